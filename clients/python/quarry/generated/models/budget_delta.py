from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BudgetDelta")


@_attrs_define
class BudgetDelta:
    """
    Attributes:
        budget (int):
        answer_share (float | None | Unset):
        fully (float | None | Unset):
    """

    budget: int
    answer_share: float | None | Unset = UNSET
    fully: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        budget = self.budget

        answer_share: float | None | Unset
        if isinstance(self.answer_share, Unset):
            answer_share = UNSET
        else:
            answer_share = self.answer_share

        fully: float | None | Unset
        if isinstance(self.fully, Unset):
            fully = UNSET
        else:
            fully = self.fully

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "budget": budget,
            }
        )
        if answer_share is not UNSET:
            field_dict["answer_share"] = answer_share
        if fully is not UNSET:
            field_dict["fully"] = fully

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        budget = d.pop("budget")

        def _parse_answer_share(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        answer_share = _parse_answer_share(d.pop("answer_share", UNSET))

        def _parse_fully(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        fully = _parse_fully(d.pop("fully", UNSET))

        budget_delta = cls(
            budget=budget,
            answer_share=answer_share,
            fully=fully,
        )

        budget_delta.additional_properties = d
        return budget_delta

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
