from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ChunkingProfile")


@_attrs_define
class ChunkingProfile:
    """
    Attributes:
        context_prefix (bool): Whether chunks are embedded after their title and section path.
        max_tokens (int):
        overlap_tokens (int):
        parent_max_tokens (int):
    """

    context_prefix: bool
    max_tokens: int
    overlap_tokens: int
    parent_max_tokens: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        context_prefix = self.context_prefix

        max_tokens = self.max_tokens

        overlap_tokens = self.overlap_tokens

        parent_max_tokens = self.parent_max_tokens

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "context_prefix": context_prefix,
                "max_tokens": max_tokens,
                "overlap_tokens": overlap_tokens,
                "parent_max_tokens": parent_max_tokens,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        context_prefix = d.pop("context_prefix")

        max_tokens = d.pop("max_tokens")

        overlap_tokens = d.pop("overlap_tokens")

        parent_max_tokens = d.pop("parent_max_tokens")

        chunking_profile = cls(
            context_prefix=context_prefix,
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            parent_max_tokens=parent_max_tokens,
        )

        chunking_profile.additional_properties = d
        return chunking_profile

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
