from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.budget_scores import BudgetScores


T = TypeVar("T", bound="SettingScores")


@_attrs_define
class SettingScores:
    """One setting's figures; `null` where no item could be judged.

    Attributes:
        budgets (list[BudgetScores]):
        hit_items (int): Items that name sources or chunks.
        setting (int): The setting's place in `settings`.
        hit_at_1 (float | None | Unset):
        hit_at_5 (float | None | Unset):
        latency_p50_ms (float | None | Unset): Percentiles of the retrievals' time in the service.
        latency_p95_ms (float | None | Unset):
        mrr_at_10 (float | None | Unset):
    """

    budgets: list[BudgetScores]
    hit_items: int
    setting: int
    hit_at_1: float | None | Unset = UNSET
    hit_at_5: float | None | Unset = UNSET
    latency_p50_ms: float | None | Unset = UNSET
    latency_p95_ms: float | None | Unset = UNSET
    mrr_at_10: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        budgets = []
        for budgets_item_data in self.budgets:
            budgets_item = budgets_item_data.to_dict()
            budgets.append(budgets_item)

        hit_items = self.hit_items

        setting = self.setting

        hit_at_1: float | None | Unset
        if isinstance(self.hit_at_1, Unset):
            hit_at_1 = UNSET
        else:
            hit_at_1 = self.hit_at_1

        hit_at_5: float | None | Unset
        if isinstance(self.hit_at_5, Unset):
            hit_at_5 = UNSET
        else:
            hit_at_5 = self.hit_at_5

        latency_p50_ms: float | None | Unset
        if isinstance(self.latency_p50_ms, Unset):
            latency_p50_ms = UNSET
        else:
            latency_p50_ms = self.latency_p50_ms

        latency_p95_ms: float | None | Unset
        if isinstance(self.latency_p95_ms, Unset):
            latency_p95_ms = UNSET
        else:
            latency_p95_ms = self.latency_p95_ms

        mrr_at_10: float | None | Unset
        if isinstance(self.mrr_at_10, Unset):
            mrr_at_10 = UNSET
        else:
            mrr_at_10 = self.mrr_at_10

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "budgets": budgets,
                "hit_items": hit_items,
                "setting": setting,
            }
        )
        if hit_at_1 is not UNSET:
            field_dict["hit_at_1"] = hit_at_1
        if hit_at_5 is not UNSET:
            field_dict["hit_at_5"] = hit_at_5
        if latency_p50_ms is not UNSET:
            field_dict["latency_p50_ms"] = latency_p50_ms
        if latency_p95_ms is not UNSET:
            field_dict["latency_p95_ms"] = latency_p95_ms
        if mrr_at_10 is not UNSET:
            field_dict["mrr_at_10"] = mrr_at_10

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget_scores import BudgetScores

        d = dict(src_dict)
        budgets = []
        _budgets = d.pop("budgets")
        for budgets_item_data in _budgets:
            budgets_item = BudgetScores.from_dict(budgets_item_data)

            budgets.append(budgets_item)

        hit_items = d.pop("hit_items")

        setting = d.pop("setting")

        def _parse_hit_at_1(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        hit_at_1 = _parse_hit_at_1(d.pop("hit_at_1", UNSET))

        def _parse_hit_at_5(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        hit_at_5 = _parse_hit_at_5(d.pop("hit_at_5", UNSET))

        def _parse_latency_p50_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        latency_p50_ms = _parse_latency_p50_ms(d.pop("latency_p50_ms", UNSET))

        def _parse_latency_p95_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        latency_p95_ms = _parse_latency_p95_ms(d.pop("latency_p95_ms", UNSET))

        def _parse_mrr_at_10(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mrr_at_10 = _parse_mrr_at_10(d.pop("mrr_at_10", UNSET))

        setting_scores = cls(
            budgets=budgets,
            hit_items=hit_items,
            setting=setting,
            hit_at_1=hit_at_1,
            hit_at_5=hit_at_5,
            latency_p50_ms=latency_p50_ms,
            latency_p95_ms=latency_p95_ms,
            mrr_at_10=mrr_at_10,
        )

        setting_scores.additional_properties = d
        return setting_scores

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
