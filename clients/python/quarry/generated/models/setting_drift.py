from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SettingDrift")


@_attrs_define
class SettingDrift:
    """One setting of an existing collection that differs from the configuration.

    Attributes:
        actual (str): What the collection has (`unset` where the backend reports nothing). Example: none.
        configured (str):  Example: int8.
        in_place (bool): Whether `quarry vectors apply-settings` can change it in place (shard count and
            replication cannot: see the operations guide).
        setting (str): The configuration key, e.g. `vectors.collection.hnsw_m`. Example:
            vectors.collection.quantization.
    """

    actual: str
    configured: str
    in_place: bool
    setting: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        actual = self.actual

        configured = self.configured

        in_place = self.in_place

        setting = self.setting

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "actual": actual,
                "configured": configured,
                "in_place": in_place,
                "setting": setting,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        actual = d.pop("actual")

        configured = d.pop("configured")

        in_place = d.pop("in_place")

        setting = d.pop("setting")

        setting_drift = cls(
            actual=actual,
            configured=configured,
            in_place=in_place,
            setting=setting,
        )

        setting_drift.additional_properties = d
        return setting_drift

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
