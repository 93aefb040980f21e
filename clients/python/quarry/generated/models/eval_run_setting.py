from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.retrieve_expand import RetrieveExpand
from ..models.retrieve_mode import RetrieveMode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.retrieve_filter import RetrieveFilter
    from ..models.retrieve_fusion import RetrieveFusion
    from ..models.retrieve_rerank import RetrieveRerank


T = TypeVar("T", bound="EvalRunSetting")


@_attrs_define
class EvalRunSetting:
    """One setting of a run: a `/retrieve` body without `query` and `max_context_tokens`, each
    field as `/retrieve` documents it (its refusals name `settings[i].<field>`). For the
    document only: the server reads it with `/retrieve`'s own parser.

        Attributes:
            expand (None | RetrieveExpand | Unset):
            explain (bool | None | Unset):
            filter_ (None | RetrieveFilter | Unset):
            fusion (None | RetrieveFusion | Unset):
            hnsw_ef (int | None | Unset):
            min_score (float | None | Unset):
            mode (None | RetrieveMode | Unset):
            neighbors (int | None | Unset):
            rerank (None | RetrieveRerank | Unset):
            top_k (int | None | Unset):  Example: 8.
    """

    expand: None | RetrieveExpand | Unset = UNSET
    explain: bool | None | Unset = UNSET
    filter_: None | RetrieveFilter | Unset = UNSET
    fusion: None | RetrieveFusion | Unset = UNSET
    hnsw_ef: int | None | Unset = UNSET
    min_score: float | None | Unset = UNSET
    mode: None | RetrieveMode | Unset = UNSET
    neighbors: int | None | Unset = UNSET
    rerank: None | RetrieveRerank | Unset = UNSET
    top_k: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.retrieve_filter import RetrieveFilter
        from ..models.retrieve_fusion import RetrieveFusion
        from ..models.retrieve_rerank import RetrieveRerank

        expand: None | str | Unset
        if isinstance(self.expand, Unset):
            expand = UNSET
        elif isinstance(self.expand, RetrieveExpand):
            expand = self.expand.value
        else:
            expand = self.expand

        explain: bool | None | Unset
        if isinstance(self.explain, Unset):
            explain = UNSET
        else:
            explain = self.explain

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, RetrieveFilter):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        fusion: dict[str, Any] | None | Unset
        if isinstance(self.fusion, Unset):
            fusion = UNSET
        elif isinstance(self.fusion, RetrieveFusion):
            fusion = self.fusion.to_dict()
        else:
            fusion = self.fusion

        hnsw_ef: int | None | Unset
        if isinstance(self.hnsw_ef, Unset):
            hnsw_ef = UNSET
        else:
            hnsw_ef = self.hnsw_ef

        min_score: float | None | Unset
        if isinstance(self.min_score, Unset):
            min_score = UNSET
        else:
            min_score = self.min_score

        mode: None | str | Unset
        if isinstance(self.mode, Unset):
            mode = UNSET
        elif isinstance(self.mode, RetrieveMode):
            mode = self.mode.value
        else:
            mode = self.mode

        neighbors: int | None | Unset
        if isinstance(self.neighbors, Unset):
            neighbors = UNSET
        else:
            neighbors = self.neighbors

        rerank: dict[str, Any] | None | Unset
        if isinstance(self.rerank, Unset):
            rerank = UNSET
        elif isinstance(self.rerank, RetrieveRerank):
            rerank = self.rerank.to_dict()
        else:
            rerank = self.rerank

        top_k: int | None | Unset
        if isinstance(self.top_k, Unset):
            top_k = UNSET
        else:
            top_k = self.top_k

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if expand is not UNSET:
            field_dict["expand"] = expand
        if explain is not UNSET:
            field_dict["explain"] = explain
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if fusion is not UNSET:
            field_dict["fusion"] = fusion
        if hnsw_ef is not UNSET:
            field_dict["hnsw_ef"] = hnsw_ef
        if min_score is not UNSET:
            field_dict["min_score"] = min_score
        if mode is not UNSET:
            field_dict["mode"] = mode
        if neighbors is not UNSET:
            field_dict["neighbors"] = neighbors
        if rerank is not UNSET:
            field_dict["rerank"] = rerank
        if top_k is not UNSET:
            field_dict["top_k"] = top_k

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.retrieve_filter import RetrieveFilter
        from ..models.retrieve_fusion import RetrieveFusion
        from ..models.retrieve_rerank import RetrieveRerank

        d = dict(src_dict)

        def _parse_expand(data: object) -> None | RetrieveExpand | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expand_type_0 = RetrieveExpand(data)

                return expand_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveExpand | Unset, data)

        expand = _parse_expand(d.pop("expand", UNSET))

        def _parse_explain(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        explain = _parse_explain(d.pop("explain", UNSET))

        def _parse_filter_(data: object) -> None | RetrieveFilter | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_0 = RetrieveFilter.from_dict(data)

                return filter_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveFilter | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))

        def _parse_fusion(data: object) -> None | RetrieveFusion | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                fusion_type_0 = RetrieveFusion.from_dict(data)

                return fusion_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveFusion | Unset, data)

        fusion = _parse_fusion(d.pop("fusion", UNSET))

        def _parse_hnsw_ef(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        hnsw_ef = _parse_hnsw_ef(d.pop("hnsw_ef", UNSET))

        def _parse_min_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_score = _parse_min_score(d.pop("min_score", UNSET))

        def _parse_mode(data: object) -> None | RetrieveMode | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                mode_type_0 = RetrieveMode(data)

                return mode_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveMode | Unset, data)

        mode = _parse_mode(d.pop("mode", UNSET))

        def _parse_neighbors(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        neighbors = _parse_neighbors(d.pop("neighbors", UNSET))

        def _parse_rerank(data: object) -> None | RetrieveRerank | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rerank_type_0 = RetrieveRerank.from_dict(data)

                return rerank_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveRerank | Unset, data)

        rerank = _parse_rerank(d.pop("rerank", UNSET))

        def _parse_top_k(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        top_k = _parse_top_k(d.pop("top_k", UNSET))

        eval_run_setting = cls(
            expand=expand,
            explain=explain,
            filter_=filter_,
            fusion=fusion,
            hnsw_ef=hnsw_ef,
            min_score=min_score,
            mode=mode,
            neighbors=neighbors,
            rerank=rerank,
            top_k=top_k,
        )

        return eval_run_setting
