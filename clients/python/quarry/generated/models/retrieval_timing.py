from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RetrievalTiming")


@_attrs_define
class RetrievalTiming:
    """Milliseconds per phase.

    Attributes:
        embed_ms (float):
        rerank_ms (float):
        search_ms (float):
        total_ms (float):
        verify_ms (float):
    """

    embed_ms: float
    rerank_ms: float
    search_ms: float
    total_ms: float
    verify_ms: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        embed_ms = self.embed_ms

        rerank_ms = self.rerank_ms

        search_ms = self.search_ms

        total_ms = self.total_ms

        verify_ms = self.verify_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "embed_ms": embed_ms,
                "rerank_ms": rerank_ms,
                "search_ms": search_ms,
                "total_ms": total_ms,
                "verify_ms": verify_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        embed_ms = d.pop("embed_ms")

        rerank_ms = d.pop("rerank_ms")

        search_ms = d.pop("search_ms")

        total_ms = d.pop("total_ms")

        verify_ms = d.pop("verify_ms")

        retrieval_timing = cls(
            embed_ms=embed_ms,
            rerank_ms=rerank_ms,
            search_ms=search_ms,
            total_ms=total_ms,
            verify_ms=verify_ms,
        )

        retrieval_timing.additional_properties = d
        return retrieval_timing

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
