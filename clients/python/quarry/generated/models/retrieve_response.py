from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.retrieval_context import RetrievalContext
    from ..models.retrieval_corpus import RetrievalCorpus
    from ..models.retrieval_explanation import RetrievalExplanation
    from ..models.retrieval_fusion import RetrievalFusion
    from ..models.retrieval_parent import RetrievalParent
    from ..models.retrieval_quality import RetrievalQuality
    from ..models.retrieval_repair import RetrievalRepair
    from ..models.retrieval_result import RetrievalResult
    from ..models.retrieval_timing import RetrievalTiming
    from ..models.retrieval_warning import RetrievalWarning


T = TypeVar("T", bound="RetrieveResponse")


@_attrs_define
class RetrieveResponse:
    """
    Attributes:
        context (RetrievalContext): Chunk text for a model's context: no scores, filenames or overlap text.
        effective_top_k (int): `top_k` clamped to the number of embedded chunks.
        parents (list[RetrievalParent]): With `expand: parent`: each parent holding hits, once, best first (empty
            otherwise).
        quality (RetrievalQuality): How far to trust the answer, for the caller to tell its model.
        repairs (list[RetrievalRepair]):
        requested_top_k (int):
        results (list[RetrievalResult]): Sorted by score descending, then book_number, then chunk_number.
        timing (RetrievalTiming): Milliseconds per phase.
        warnings (list[RetrievalWarning]):
        corpus (None | RetrievalCorpus | Unset):
        explain (None | RetrievalExplanation | Unset):
        fusion_used (None | RetrievalFusion | Unset):
        mode_used (None | str | Unset): What ran: `dense`, `hybrid` or `full` (the whole corpus as the context); `null`
            when
            nothing did (top_k 0, nothing embedded, a filter matching nothing).
    """

    context: RetrievalContext
    effective_top_k: int
    parents: list[RetrievalParent]
    quality: RetrievalQuality
    repairs: list[RetrievalRepair]
    requested_top_k: int
    results: list[RetrievalResult]
    timing: RetrievalTiming
    warnings: list[RetrievalWarning]
    corpus: None | RetrievalCorpus | Unset = UNSET
    explain: None | RetrievalExplanation | Unset = UNSET
    fusion_used: None | RetrievalFusion | Unset = UNSET
    mode_used: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.retrieval_corpus import RetrievalCorpus
        from ..models.retrieval_explanation import RetrievalExplanation
        from ..models.retrieval_fusion import RetrievalFusion

        context = self.context.to_dict()

        effective_top_k = self.effective_top_k

        parents = []
        for parents_item_data in self.parents:
            parents_item = parents_item_data.to_dict()
            parents.append(parents_item)

        quality = self.quality.to_dict()

        repairs = []
        for repairs_item_data in self.repairs:
            repairs_item = repairs_item_data.to_dict()
            repairs.append(repairs_item)

        requested_top_k = self.requested_top_k

        results = []
        for results_item_data in self.results:
            results_item = results_item_data.to_dict()
            results.append(results_item)

        timing = self.timing.to_dict()

        warnings = []
        for warnings_item_data in self.warnings:
            warnings_item = warnings_item_data.to_dict()
            warnings.append(warnings_item)

        corpus: dict[str, Any] | None | Unset
        if isinstance(self.corpus, Unset):
            corpus = UNSET
        elif isinstance(self.corpus, RetrievalCorpus):
            corpus = self.corpus.to_dict()
        else:
            corpus = self.corpus

        explain: dict[str, Any] | None | Unset
        if isinstance(self.explain, Unset):
            explain = UNSET
        elif isinstance(self.explain, RetrievalExplanation):
            explain = self.explain.to_dict()
        else:
            explain = self.explain

        fusion_used: dict[str, Any] | None | Unset
        if isinstance(self.fusion_used, Unset):
            fusion_used = UNSET
        elif isinstance(self.fusion_used, RetrievalFusion):
            fusion_used = self.fusion_used.to_dict()
        else:
            fusion_used = self.fusion_used

        mode_used: None | str | Unset
        if isinstance(self.mode_used, Unset):
            mode_used = UNSET
        else:
            mode_used = self.mode_used

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "context": context,
                "effective_top_k": effective_top_k,
                "parents": parents,
                "quality": quality,
                "repairs": repairs,
                "requested_top_k": requested_top_k,
                "results": results,
                "timing": timing,
                "warnings": warnings,
            }
        )
        if corpus is not UNSET:
            field_dict["corpus"] = corpus
        if explain is not UNSET:
            field_dict["explain"] = explain
        if fusion_used is not UNSET:
            field_dict["fusion_used"] = fusion_used
        if mode_used is not UNSET:
            field_dict["mode_used"] = mode_used

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.retrieval_context import RetrievalContext
        from ..models.retrieval_corpus import RetrievalCorpus
        from ..models.retrieval_explanation import RetrievalExplanation
        from ..models.retrieval_fusion import RetrievalFusion
        from ..models.retrieval_parent import RetrievalParent
        from ..models.retrieval_quality import RetrievalQuality
        from ..models.retrieval_repair import RetrievalRepair
        from ..models.retrieval_result import RetrievalResult
        from ..models.retrieval_timing import RetrievalTiming
        from ..models.retrieval_warning import RetrievalWarning

        d = dict(src_dict)
        context = RetrievalContext.from_dict(d.pop("context"))

        effective_top_k = d.pop("effective_top_k")

        parents = []
        _parents = d.pop("parents")
        for parents_item_data in _parents:
            parents_item = RetrievalParent.from_dict(parents_item_data)

            parents.append(parents_item)

        quality = RetrievalQuality.from_dict(d.pop("quality"))

        repairs = []
        _repairs = d.pop("repairs")
        for repairs_item_data in _repairs:
            repairs_item = RetrievalRepair.from_dict(repairs_item_data)

            repairs.append(repairs_item)

        requested_top_k = d.pop("requested_top_k")

        results = []
        _results = d.pop("results")
        for results_item_data in _results:
            results_item = RetrievalResult.from_dict(results_item_data)

            results.append(results_item)

        timing = RetrievalTiming.from_dict(d.pop("timing"))

        warnings = []
        _warnings = d.pop("warnings")
        for warnings_item_data in _warnings:
            warnings_item = RetrievalWarning.from_dict(warnings_item_data)

            warnings.append(warnings_item)

        def _parse_corpus(data: object) -> None | RetrievalCorpus | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                corpus_type_0 = RetrievalCorpus.from_dict(data)

                return corpus_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrievalCorpus | Unset, data)

        corpus = _parse_corpus(d.pop("corpus", UNSET))

        def _parse_explain(data: object) -> None | RetrievalExplanation | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                explain_type_0 = RetrievalExplanation.from_dict(data)

                return explain_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrievalExplanation | Unset, data)

        explain = _parse_explain(d.pop("explain", UNSET))

        def _parse_fusion_used(data: object) -> None | RetrievalFusion | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                fusion_used_type_0 = RetrievalFusion.from_dict(data)

                return fusion_used_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrievalFusion | Unset, data)

        fusion_used = _parse_fusion_used(d.pop("fusion_used", UNSET))

        def _parse_mode_used(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        mode_used = _parse_mode_used(d.pop("mode_used", UNSET))

        retrieve_response = cls(
            context=context,
            effective_top_k=effective_top_k,
            parents=parents,
            quality=quality,
            repairs=repairs,
            requested_top_k=requested_top_k,
            results=results,
            timing=timing,
            warnings=warnings,
            corpus=corpus,
            explain=explain,
            fusion_used=fusion_used,
            mode_used=mode_used,
        )

        retrieve_response.additional_properties = d
        return retrieve_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
