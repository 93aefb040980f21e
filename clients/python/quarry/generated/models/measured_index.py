from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MeasuredIndex")


@_attrs_define
class MeasuredIndex:
    """The index a run measured: the world's run and the profiles it was built with.

    Attributes:
        context_prefix (bool):
        dimensions (int):
        hybrid (bool):
        max_tokens (int):
        model (str):
        overlap_tokens (int):
        parent_max_tokens (int):
        provider (str):
        run_id (UUID): The world's run measured: its `active_run` when the run started, or for a gated
            re-ingest's run, the run served or the one being built.
    """

    context_prefix: bool
    dimensions: int
    hybrid: bool
    max_tokens: int
    model: str
    overlap_tokens: int
    parent_max_tokens: int
    provider: str
    run_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        context_prefix = self.context_prefix

        dimensions = self.dimensions

        hybrid = self.hybrid

        max_tokens = self.max_tokens

        model = self.model

        overlap_tokens = self.overlap_tokens

        parent_max_tokens = self.parent_max_tokens

        provider = self.provider

        run_id = str(self.run_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "context_prefix": context_prefix,
                "dimensions": dimensions,
                "hybrid": hybrid,
                "max_tokens": max_tokens,
                "model": model,
                "overlap_tokens": overlap_tokens,
                "parent_max_tokens": parent_max_tokens,
                "provider": provider,
                "run_id": run_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        context_prefix = d.pop("context_prefix")

        dimensions = d.pop("dimensions")

        hybrid = d.pop("hybrid")

        max_tokens = d.pop("max_tokens")

        model = d.pop("model")

        overlap_tokens = d.pop("overlap_tokens")

        parent_max_tokens = d.pop("parent_max_tokens")

        provider = d.pop("provider")

        run_id = UUID(d.pop("run_id"))

        measured_index = cls(
            context_prefix=context_prefix,
            dimensions=dimensions,
            hybrid=hybrid,
            max_tokens=max_tokens,
            model=model,
            overlap_tokens=overlap_tokens,
            parent_max_tokens=parent_max_tokens,
            provider=provider,
            run_id=run_id,
        )

        measured_index.additional_properties = d
        return measured_index

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
