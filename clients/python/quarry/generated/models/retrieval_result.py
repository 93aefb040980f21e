from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.hit_explanation import HitExplanation
    from ..models.retrieval_result_metadata import RetrievalResultMetadata


T = TypeVar("T", bound="RetrievalResult")


@_attrs_define
class RetrievalResult:
    """One verified hit. Text comes from the store, never from the vector store.

    Attributes:
        book_number (int):
        char_end (int):
        char_start (int):
        chunk_id (UUID):
        chunk_number (int):
        chunk_text (str):
        duplicates (list[UUID]): Other hits with exactly the same text, folded into this one (their chunk ids).
        metadata (RetrievalResultMetadata): The source's metadata as given at upload (`{}` when none was).
        overlap_text (str):
        point_id (UUID):
        score (float): Cosine similarity (dense) or the fused rank score (hybrid).
        source_filename (str):
        source_id (UUID):
        explain (HitExplanation | None | Unset):
        page (int | None | Unset): For a PDF's chunk, the page (1-based) it starts on; `null` for other formats.
        rerank_score (float | None | Unset): The reranker's relevance score, when the results were reranked (their
            order).
        title (None | str | Unset): The source's title as given at upload (`null` when none was).
        url (None | str | Unset): The source's URL as given at upload (`null` when none was).
    """

    book_number: int
    char_end: int
    char_start: int
    chunk_id: UUID
    chunk_number: int
    chunk_text: str
    duplicates: list[UUID]
    metadata: RetrievalResultMetadata
    overlap_text: str
    point_id: UUID
    score: float
    source_filename: str
    source_id: UUID
    explain: HitExplanation | None | Unset = UNSET
    page: int | None | Unset = UNSET
    rerank_score: float | None | Unset = UNSET
    title: None | str | Unset = UNSET
    url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.hit_explanation import HitExplanation

        book_number = self.book_number

        char_end = self.char_end

        char_start = self.char_start

        chunk_id = str(self.chunk_id)

        chunk_number = self.chunk_number

        chunk_text = self.chunk_text

        duplicates = []
        for duplicates_item_data in self.duplicates:
            duplicates_item = str(duplicates_item_data)
            duplicates.append(duplicates_item)

        metadata = self.metadata.to_dict()

        overlap_text = self.overlap_text

        point_id = str(self.point_id)

        score = self.score

        source_filename = self.source_filename

        source_id = str(self.source_id)

        explain: dict[str, Any] | None | Unset
        if isinstance(self.explain, Unset):
            explain = UNSET
        elif isinstance(self.explain, HitExplanation):
            explain = self.explain.to_dict()
        else:
            explain = self.explain

        page: int | None | Unset
        if isinstance(self.page, Unset):
            page = UNSET
        else:
            page = self.page

        rerank_score: float | None | Unset
        if isinstance(self.rerank_score, Unset):
            rerank_score = UNSET
        else:
            rerank_score = self.rerank_score

        title: None | str | Unset
        if isinstance(self.title, Unset):
            title = UNSET
        else:
            title = self.title

        url: None | str | Unset
        if isinstance(self.url, Unset):
            url = UNSET
        else:
            url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "book_number": book_number,
                "char_end": char_end,
                "char_start": char_start,
                "chunk_id": chunk_id,
                "chunk_number": chunk_number,
                "chunk_text": chunk_text,
                "duplicates": duplicates,
                "metadata": metadata,
                "overlap_text": overlap_text,
                "point_id": point_id,
                "score": score,
                "source_filename": source_filename,
                "source_id": source_id,
            }
        )
        if explain is not UNSET:
            field_dict["explain"] = explain
        if page is not UNSET:
            field_dict["page"] = page
        if rerank_score is not UNSET:
            field_dict["rerank_score"] = rerank_score
        if title is not UNSET:
            field_dict["title"] = title
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.hit_explanation import HitExplanation
        from ..models.retrieval_result_metadata import RetrievalResultMetadata

        d = dict(src_dict)
        book_number = d.pop("book_number")

        char_end = d.pop("char_end")

        char_start = d.pop("char_start")

        chunk_id = UUID(d.pop("chunk_id"))

        chunk_number = d.pop("chunk_number")

        chunk_text = d.pop("chunk_text")

        duplicates = []
        _duplicates = d.pop("duplicates")
        for duplicates_item_data in _duplicates:
            duplicates_item = UUID(duplicates_item_data)

            duplicates.append(duplicates_item)

        metadata = RetrievalResultMetadata.from_dict(d.pop("metadata"))

        overlap_text = d.pop("overlap_text")

        point_id = UUID(d.pop("point_id"))

        score = d.pop("score")

        source_filename = d.pop("source_filename")

        source_id = UUID(d.pop("source_id"))

        def _parse_explain(data: object) -> HitExplanation | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                explain_type_0 = HitExplanation.from_dict(data)

                return explain_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(HitExplanation | None | Unset, data)

        explain = _parse_explain(d.pop("explain", UNSET))

        def _parse_page(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        page = _parse_page(d.pop("page", UNSET))

        def _parse_rerank_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rerank_score = _parse_rerank_score(d.pop("rerank_score", UNSET))

        def _parse_title(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        title = _parse_title(d.pop("title", UNSET))

        def _parse_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        url = _parse_url(d.pop("url", UNSET))

        retrieval_result = cls(
            book_number=book_number,
            char_end=char_end,
            char_start=char_start,
            chunk_id=chunk_id,
            chunk_number=chunk_number,
            chunk_text=chunk_text,
            duplicates=duplicates,
            metadata=metadata,
            overlap_text=overlap_text,
            point_id=point_id,
            score=score,
            source_filename=source_filename,
            source_id=source_id,
            explain=explain,
            page=page,
            rerank_score=rerank_score,
            title=title,
            url=url,
        )

        retrieval_result.additional_properties = d
        return retrieval_result

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
