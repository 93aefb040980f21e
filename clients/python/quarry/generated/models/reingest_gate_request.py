from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.gate_metric import GateMetric
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.eval_run_setting import EvalRunSetting


T = TypeVar("T", bound="ReingestGateRequest")


@_attrs_define
class ReingestGateRequest:
    """A re-ingest's gate: when the new run is embedded, test set `eval_id` is scored on it and
    on the run served (one setting, one budget), and the world switches only if `metric` did
    not drop by more than `tolerance`. Otherwise the job is `held` and the world keeps its run
    until `POST /v1/worlds/{world_id}/reingest/{job_id}/promote` or `/discard`.

        Attributes:
            eval_id (UUID): A test set of the world (`/v1/worlds/{world_id}/evals`). Its items are copied when the
                re-ingest is asked for.
            metric (GateMetric): What a gate compares: `hit_at_1`, `hit_at_5`, `mrr_at_10` (on the items that name sources
                or chunks), `answer_share` or `fully` (on the items with an answer, at the gate's budget).
            budget (int | None | Unset): The context budget, in tokens. Absent: the server's default
                (`retrieval.max_context_tokens`). Example: 1024.
            settings (EvalRunSetting | None | Unset):
            tolerance (float | None | Unset): How far the metric (0 to 1) may drop, 0 to 1. Absent: 0 (it must not drop).
                Example: 0.02.
    """

    eval_id: UUID
    metric: GateMetric
    budget: int | None | Unset = UNSET
    settings: EvalRunSetting | None | Unset = UNSET
    tolerance: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.eval_run_setting import EvalRunSetting

        eval_id = str(self.eval_id)

        metric = self.metric.value

        budget: int | None | Unset
        if isinstance(self.budget, Unset):
            budget = UNSET
        else:
            budget = self.budget

        settings: dict[str, Any] | None | Unset
        if isinstance(self.settings, Unset):
            settings = UNSET
        elif isinstance(self.settings, EvalRunSetting):
            settings = self.settings.to_dict()
        else:
            settings = self.settings

        tolerance: float | None | Unset
        if isinstance(self.tolerance, Unset):
            tolerance = UNSET
        else:
            tolerance = self.tolerance

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "eval_id": eval_id,
                "metric": metric,
            }
        )
        if budget is not UNSET:
            field_dict["budget"] = budget
        if settings is not UNSET:
            field_dict["settings"] = settings
        if tolerance is not UNSET:
            field_dict["tolerance"] = tolerance

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_run_setting import EvalRunSetting

        d = dict(src_dict)
        eval_id = UUID(d.pop("eval_id"))

        metric = GateMetric(d.pop("metric"))

        def _parse_budget(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        budget = _parse_budget(d.pop("budget", UNSET))

        def _parse_settings(data: object) -> EvalRunSetting | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                settings_type_0 = EvalRunSetting.from_dict(data)

                return settings_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EvalRunSetting | None | Unset, data)

        settings = _parse_settings(d.pop("settings", UNSET))

        def _parse_tolerance(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        tolerance = _parse_tolerance(d.pop("tolerance", UNSET))

        reingest_gate_request = cls(
            eval_id=eval_id,
            metric=metric,
            budget=budget,
            settings=settings,
            tolerance=tolerance,
        )

        return reingest_gate_request
