from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrievalCitation")


@_attrs_define
class RetrievalCitation:
    """Where one context chunk comes from, for citing it.

    Attributes:
        book_number (int):
        char_end (int):
        char_start (int): The cited span of the source's stored text, in chars (a chunk cut to fit the budget
            ends where the cut does).
        chunk_id (UUID):
        chunk_number (int):
        n (int): The passage's number in `context.text` (`[n]`).
        source_id (UUID):
        page (int | None | Unset): For a PDF's chunk, the page (1-based) it starts on: cite it as "p. N".
        result_index (int | None | Unset): Index in `results` of the hit this chunk is, or of its passage's best hit (a
            neighbour); `null` in a full-context answer, which has no results.
    """

    book_number: int
    char_end: int
    char_start: int
    chunk_id: UUID
    chunk_number: int
    n: int
    source_id: UUID
    page: int | None | Unset = UNSET
    result_index: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        book_number = self.book_number

        char_end = self.char_end

        char_start = self.char_start

        chunk_id = str(self.chunk_id)

        chunk_number = self.chunk_number

        n = self.n

        source_id = str(self.source_id)

        page: int | None | Unset
        if isinstance(self.page, Unset):
            page = UNSET
        else:
            page = self.page

        result_index: int | None | Unset
        if isinstance(self.result_index, Unset):
            result_index = UNSET
        else:
            result_index = self.result_index

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "book_number": book_number,
                "char_end": char_end,
                "char_start": char_start,
                "chunk_id": chunk_id,
                "chunk_number": chunk_number,
                "n": n,
                "source_id": source_id,
            }
        )
        if page is not UNSET:
            field_dict["page"] = page
        if result_index is not UNSET:
            field_dict["result_index"] = result_index

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        book_number = d.pop("book_number")

        char_end = d.pop("char_end")

        char_start = d.pop("char_start")

        chunk_id = UUID(d.pop("chunk_id"))

        chunk_number = d.pop("chunk_number")

        n = d.pop("n")

        source_id = UUID(d.pop("source_id"))

        def _parse_page(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        page = _parse_page(d.pop("page", UNSET))

        def _parse_result_index(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        result_index = _parse_result_index(d.pop("result_index", UNSET))

        retrieval_citation = cls(
            book_number=book_number,
            char_end=char_end,
            char_start=char_start,
            chunk_id=chunk_id,
            chunk_number=chunk_number,
            n=n,
            source_id=source_id,
            page=page,
            result_index=result_index,
        )

        retrieval_citation.additional_properties = d
        return retrieval_citation

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
