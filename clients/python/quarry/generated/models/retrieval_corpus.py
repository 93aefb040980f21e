from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RetrievalCorpus")


@_attrs_define
class RetrievalCorpus:
    """The size of a corpus.

    Attributes:
        chunks (int): Chunks, whatever their embedding state.
        sources (int):
        tokens (int): The chunks' token counts summed.
    """

    chunks: int
    sources: int
    tokens: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        chunks = self.chunks

        sources = self.sources

        tokens = self.tokens

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "chunks": chunks,
                "sources": sources,
                "tokens": tokens,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        chunks = d.pop("chunks")

        sources = d.pop("sources")

        tokens = d.pop("tokens")

        retrieval_corpus = cls(
            chunks=chunks,
            sources=sources,
            tokens=tokens,
        )

        retrieval_corpus.additional_properties = d
        return retrieval_corpus

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
