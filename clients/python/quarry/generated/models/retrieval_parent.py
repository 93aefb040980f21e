from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RetrievalParent")


@_attrs_define
class RetrievalParent:
    """A parent holding hits (`expand: parent`).

    Attributes:
        book_number (int):
        char_end (int):
        char_start (int): Its span of the source's stored text, in chars (its first chunk's start to its last
            chunk's end).
        children (list[UUID]):
        first_chunk (int): Its chunks, `first_chunk..=last_chunk` by chunk number.
        last_chunk (int):
        parent_number (int): 0-based order of the parent in its source.
        result_indexes (list[int]): Its hits, best first: their indexes in `results` (whose entries carry each matched
            chunk's exact offsets) and chunk ids.
        score (float): The best score of its hits.
        source_id (UUID):
        token_count (int): Its chunks' token counts summed.
    """

    book_number: int
    char_end: int
    char_start: int
    children: list[UUID]
    first_chunk: int
    last_chunk: int
    parent_number: int
    result_indexes: list[int]
    score: float
    source_id: UUID
    token_count: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        book_number = self.book_number

        char_end = self.char_end

        char_start = self.char_start

        children = []
        for children_item_data in self.children:
            children_item = str(children_item_data)
            children.append(children_item)

        first_chunk = self.first_chunk

        last_chunk = self.last_chunk

        parent_number = self.parent_number

        result_indexes = self.result_indexes

        score = self.score

        source_id = str(self.source_id)

        token_count = self.token_count

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "book_number": book_number,
                "char_end": char_end,
                "char_start": char_start,
                "children": children,
                "first_chunk": first_chunk,
                "last_chunk": last_chunk,
                "parent_number": parent_number,
                "result_indexes": result_indexes,
                "score": score,
                "source_id": source_id,
                "token_count": token_count,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        book_number = d.pop("book_number")

        char_end = d.pop("char_end")

        char_start = d.pop("char_start")

        children = []
        _children = d.pop("children")
        for children_item_data in _children:
            children_item = UUID(children_item_data)

            children.append(children_item)

        first_chunk = d.pop("first_chunk")

        last_chunk = d.pop("last_chunk")

        parent_number = d.pop("parent_number")

        result_indexes = cast(list[int], d.pop("result_indexes"))

        score = d.pop("score")

        source_id = UUID(d.pop("source_id"))

        token_count = d.pop("token_count")

        retrieval_parent = cls(
            book_number=book_number,
            char_end=char_end,
            char_start=char_start,
            children=children,
            first_chunk=first_chunk,
            last_chunk=last_chunk,
            parent_number=parent_number,
            result_indexes=result_indexes,
            score=score,
            source_id=source_id,
            token_count=token_count,
        )

        retrieval_parent.additional_properties = d
        return retrieval_parent

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
