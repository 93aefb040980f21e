from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="OutcomeDto")


@_attrs_define
class OutcomeDto:
    """An item's outcome under one setting in one run.

    Attributes:
        answer_share (list[float | None]): At the budgets both runs measured, in run `a`'s order.
        first_hit (int | None | Unset):
    """

    answer_share: list[float | None]
    first_hit: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        answer_share = []
        for answer_share_item_data in self.answer_share:
            answer_share_item: float | None
            answer_share_item = answer_share_item_data
            answer_share.append(answer_share_item)

        first_hit: int | None | Unset
        if isinstance(self.first_hit, Unset):
            first_hit = UNSET
        else:
            first_hit = self.first_hit

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "answer_share": answer_share,
            }
        )
        if first_hit is not UNSET:
            field_dict["first_hit"] = first_hit

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        answer_share = []
        _answer_share = d.pop("answer_share")
        for answer_share_item_data in _answer_share:

            def _parse_answer_share_item(data: object) -> float | None:
                if data is None:
                    return data
                return cast(float | None, data)

            answer_share_item = _parse_answer_share_item(answer_share_item_data)

            answer_share.append(answer_share_item)

        def _parse_first_hit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        first_hit = _parse_first_hit(d.pop("first_hit", UNSET))

        outcome_dto = cls(
            answer_share=answer_share,
            first_hit=first_hit,
        )

        outcome_dto.additional_properties = d
        return outcome_dto

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
