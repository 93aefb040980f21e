from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.eval_run_setting import EvalRunSetting


T = TypeVar("T", bound="EvalRunRequest")


@_attrs_define
class EvalRunRequest:
    """What a run measures: retrieval settings and context budgets. Every setting runs at every
    budget, for every item of the test set.

        Attributes:
            budgets (list[int] | None | Unset): 1 to 4 context budgets in tokens. Absent: the server's default
                (`retrieval.max_context_tokens`).
            settings (list[EvalRunSetting] | None | Unset): 1 to 8 settings, each a `/retrieve` body without `query` (the
                items are the queries)
                and without `max_context_tokens` (`budgets` sets it): `mode`, `fusion`, `top_k`,
                `expand`, `neighbors`, `min_score`, `rerank`, `hnsw_ef`, `filter`. Absent: one setting,
                the defaults.
    """

    budgets: list[int] | None | Unset = UNSET
    settings: list[EvalRunSetting] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        budgets: list[int] | None | Unset
        if isinstance(self.budgets, Unset):
            budgets = UNSET
        elif isinstance(self.budgets, list):
            budgets = self.budgets

        else:
            budgets = self.budgets

        settings: list[dict[str, Any]] | None | Unset
        if isinstance(self.settings, Unset):
            settings = UNSET
        elif isinstance(self.settings, list):
            settings = []
            for settings_type_0_item_data in self.settings:
                settings_type_0_item = settings_type_0_item_data.to_dict()
                settings.append(settings_type_0_item)

        else:
            settings = self.settings

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if budgets is not UNSET:
            field_dict["budgets"] = budgets
        if settings is not UNSET:
            field_dict["settings"] = settings

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_run_setting import EvalRunSetting

        d = dict(src_dict)

        def _parse_budgets(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                budgets_type_0 = cast(list[int], data)

                return budgets_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        budgets = _parse_budgets(d.pop("budgets", UNSET))

        def _parse_settings(data: object) -> list[EvalRunSetting] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                settings_type_0 = []
                _settings_type_0 = data
                for settings_type_0_item_data in _settings_type_0:
                    settings_type_0_item = EvalRunSetting.from_dict(
                        settings_type_0_item_data
                    )

                    settings_type_0.append(settings_type_0_item)

                return settings_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[EvalRunSetting] | None | Unset, data)

        settings = _parse_settings(d.pop("settings", UNSET))

        eval_run_request = cls(
            budgets=budgets,
            settings=settings,
        )

        return eval_run_request
