from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.retrieval_citation import RetrievalCitation


T = TypeVar("T", bound="RetrievalContext")


@_attrs_define
class RetrievalContext:
    """Chunk text for a model's context: no scores, filenames or overlap text.

    Attributes:
        chunks (list[str]): The selected chunk texts, in passage order (passages by their best hit's rank), reading
            order within a passage.
        citations (list[RetrievalCitation]): One per entry of `chunks`, in the same order: where it comes from.
        text (str): The passages, each marked `[n] ` (its citation number) and apart by a blank line; the
            chunks of a passage are apart by a blank line too.
    """

    chunks: list[str]
    citations: list[RetrievalCitation]
    text: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        chunks = self.chunks

        citations = []
        for citations_item_data in self.citations:
            citations_item = citations_item_data.to_dict()
            citations.append(citations_item)

        text = self.text

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "chunks": chunks,
                "citations": citations,
                "text": text,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.retrieval_citation import RetrievalCitation

        d = dict(src_dict)
        chunks = cast(list[str], d.pop("chunks"))

        citations = []
        _citations = d.pop("citations")
        for citations_item_data in _citations:
            citations_item = RetrievalCitation.from_dict(citations_item_data)

            citations.append(citations_item)

        text = d.pop("text")

        retrieval_context = cls(
            chunks=chunks,
            citations=citations,
            text=text,
        )

        retrieval_context.additional_properties = d
        return retrieval_context

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
