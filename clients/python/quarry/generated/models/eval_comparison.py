from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.item_change_dto import ItemChangeDto
    from ..models.setting_delta_dto import SettingDeltaDto


T = TypeVar("T", bound="EvalComparison")


@_attrs_define
class EvalComparison:
    """How run `b` differs from run `a`.

    Attributes:
        a (UUID):
        b (UUID):
        better (list[ItemChangeDto]): Items with a better rank (within 10) or a larger answer share, and nothing worse.
        items_compared (int): Items in both runs, matched by query.
        mixed (int): Items better on one figure and worse on another.
        settings (list[SettingDeltaDto]): Per setting, by place (as many as the run with fewer has).
        worse (list[ItemChangeDto]): Items with a worse rank or a smaller answer share, and nothing better.
    """

    a: UUID
    b: UUID
    better: list[ItemChangeDto]
    items_compared: int
    mixed: int
    settings: list[SettingDeltaDto]
    worse: list[ItemChangeDto]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        a = str(self.a)

        b = str(self.b)

        better = []
        for better_item_data in self.better:
            better_item = better_item_data.to_dict()
            better.append(better_item)

        items_compared = self.items_compared

        mixed = self.mixed

        settings = []
        for settings_item_data in self.settings:
            settings_item = settings_item_data.to_dict()
            settings.append(settings_item)

        worse = []
        for worse_item_data in self.worse:
            worse_item = worse_item_data.to_dict()
            worse.append(worse_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "a": a,
                "b": b,
                "better": better,
                "items_compared": items_compared,
                "mixed": mixed,
                "settings": settings,
                "worse": worse,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.item_change_dto import ItemChangeDto
        from ..models.setting_delta_dto import SettingDeltaDto

        d = dict(src_dict)
        a = UUID(d.pop("a"))

        b = UUID(d.pop("b"))

        better = []
        _better = d.pop("better")
        for better_item_data in _better:
            better_item = ItemChangeDto.from_dict(better_item_data)

            better.append(better_item)

        items_compared = d.pop("items_compared")

        mixed = d.pop("mixed")

        settings = []
        _settings = d.pop("settings")
        for settings_item_data in _settings:
            settings_item = SettingDeltaDto.from_dict(settings_item_data)

            settings.append(settings_item)

        worse = []
        _worse = d.pop("worse")
        for worse_item_data in _worse:
            worse_item = ItemChangeDto.from_dict(worse_item_data)

            worse.append(worse_item)

        eval_comparison = cls(
            a=a,
            b=b,
            better=better,
            items_compared=items_compared,
            mixed=mixed,
            settings=settings,
            worse=worse,
        )

        eval_comparison.additional_properties = d
        return eval_comparison

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
