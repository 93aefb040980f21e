from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.setting_drift import SettingDrift


T = TypeVar("T", bound="CollectionDrift")


@_attrs_define
class CollectionDrift:
    """One collection whose layout differs from the configuration.

    Attributes:
        collection (str):  Example: chunks_local_all_minilm_l6_v2_384.
        settings (list[SettingDrift]):
    """

    collection: str
    settings: list[SettingDrift]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        collection = self.collection

        settings = []
        for settings_item_data in self.settings:
            settings_item = settings_item_data.to_dict()
            settings.append(settings_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "collection": collection,
                "settings": settings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.setting_drift import SettingDrift

        d = dict(src_dict)
        collection = d.pop("collection")

        settings = []
        _settings = d.pop("settings")
        for settings_item_data in _settings:
            settings_item = SettingDrift.from_dict(settings_item_data)

            settings.append(settings_item)

        collection_drift = cls(
            collection=collection,
            settings=settings,
        )

        collection_drift.additional_properties = d
        return collection_drift

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
