from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.item_scores import ItemScores
    from ..models.setting_scores import SettingScores


T = TypeVar("T", bound="EvalRunReport")


@_attrs_define
class EvalRunReport:
    """What the items scored so far add up to.

    Attributes:
        items (list[ItemScores]):
        scored (int):
        settings (list[SettingScores]):
    """

    items: list[ItemScores]
    scored: int
    settings: list[SettingScores]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        scored = self.scored

        settings = []
        for settings_item_data in self.settings:
            settings_item = settings_item_data.to_dict()
            settings.append(settings_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "items": items,
                "scored": scored,
                "settings": settings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.item_scores import ItemScores
        from ..models.setting_scores import SettingScores

        d = dict(src_dict)
        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = ItemScores.from_dict(items_item_data)

            items.append(items_item)

        scored = d.pop("scored")

        settings = []
        _settings = d.pop("settings")
        for settings_item_data in _settings:
            settings_item = SettingScores.from_dict(settings_item_data)

            settings.append(settings_item)

        eval_run_report = cls(
            items=items,
            scored=scored,
            settings=settings,
        )

        eval_run_report.additional_properties = d
        return eval_run_report

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
