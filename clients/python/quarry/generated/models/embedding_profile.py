from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="EmbeddingProfile")


@_attrs_define
class EmbeddingProfile:
    """
    Attributes:
        dimensions (int):
        distance (str): Always `cosine`.
        model (str):
        provider (str):
    """

    dimensions: int
    distance: str
    model: str
    provider: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dimensions = self.dimensions

        distance = self.distance

        model = self.model

        provider = self.provider

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dimensions": dimensions,
                "distance": distance,
                "model": model,
                "provider": provider,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        dimensions = d.pop("dimensions")

        distance = d.pop("distance")

        model = d.pop("model")

        provider = d.pop("provider")

        embedding_profile = cls(
            dimensions=dimensions,
            distance=distance,
            model=model,
            provider=provider,
        )

        embedding_profile.additional_properties = d
        return embedding_profile

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
