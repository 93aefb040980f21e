from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="WorldStats")


@_attrs_define
class WorldStats:
    """
    Attributes:
        chunks (int):
        embedded (int):
        failed (int):
        pending (int):
        sources (int):
    """

    chunks: int
    embedded: int
    failed: int
    pending: int
    sources: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        chunks = self.chunks

        embedded = self.embedded

        failed = self.failed

        pending = self.pending

        sources = self.sources

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "chunks": chunks,
                "embedded": embedded,
                "failed": failed,
                "pending": pending,
                "sources": sources,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        chunks = d.pop("chunks")

        embedded = d.pop("embedded")

        failed = d.pop("failed")

        pending = d.pop("pending")

        sources = d.pop("sources")

        world_stats = cls(
            chunks=chunks,
            embedded=embedded,
            failed=failed,
            pending=pending,
            sources=sources,
        )

        world_stats.additional_properties = d
        return world_stats

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
