from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.outcome_dto import OutcomeDto


T = TypeVar("T", bound="ItemChangeDto")


@_attrs_define
class ItemChangeDto:
    """An item that did better or worse under one setting.

    Attributes:
        after (OutcomeDto): An item's outcome under one setting in one run.
        before (OutcomeDto): An item's outcome under one setting in one run.
        query (str):
        setting (int):
    """

    after: OutcomeDto
    before: OutcomeDto
    query: str
    setting: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        after = self.after.to_dict()

        before = self.before.to_dict()

        query = self.query

        setting = self.setting

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "after": after,
                "before": before,
                "query": query,
                "setting": setting,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.outcome_dto import OutcomeDto

        d = dict(src_dict)
        after = OutcomeDto.from_dict(d.pop("after"))

        before = OutcomeDto.from_dict(d.pop("before"))

        query = d.pop("query")

        setting = d.pop("setting")

        item_change_dto = cls(
            after=after,
            before=before,
            query=query,
            setting=setting,
        )

        item_change_dto.additional_properties = d
        return item_change_dto

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
