from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.gate_metric import GateMetric
from ..models.gate_state import GateState
from ..types import UNSET, Unset

T = TypeVar("T", bound="ReingestGate")


@_attrs_define
class ReingestGate:
    """A re-ingest's gate. Its two evaluation runs are ordinary runs of the test set: read them,
    or compare them (`GET /v1/worlds/{world_id}/evals/{eval_id}/runs/{before_run_id}/compare/{after_run_id}`)
    for the items that got better or worse.

        Attributes:
            after_run_id (UUID): The run scoring the new run.
            before_run_id (UUID): The run scoring the run the world served when the re-ingest was asked for.
            eval_id (UUID):
            metric (GateMetric): What a gate compares: `hit_at_1`, `hit_at_5`, `mrr_at_10` (on the items that name sources
                or chunks), `answer_share` or `fully` (on the items with an answer, at the gate's budget).
            state (GateState): Where a gate's decision is: `waiting` (the new run is being built), `evaluating`, `held`
                (promote or discard decides), `passed` (the world switched), `promoted`, `discarded` (on
                request, or the re-ingest failed or was cancelled).
            tolerance (float):
            after (float | None | Unset):
            before (float | None | Unset): The metric on each, once both completed.
            decided_at (datetime.datetime | None | Unset):
            reason (None | str | Unset): What decided the gate, in words.
    """

    after_run_id: UUID
    before_run_id: UUID
    eval_id: UUID
    metric: GateMetric
    state: GateState
    tolerance: float
    after: float | None | Unset = UNSET
    before: float | None | Unset = UNSET
    decided_at: datetime.datetime | None | Unset = UNSET
    reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        after_run_id = str(self.after_run_id)

        before_run_id = str(self.before_run_id)

        eval_id = str(self.eval_id)

        metric = self.metric.value

        state = self.state.value

        tolerance = self.tolerance

        after: float | None | Unset
        if isinstance(self.after, Unset):
            after = UNSET
        else:
            after = self.after

        before: float | None | Unset
        if isinstance(self.before, Unset):
            before = UNSET
        else:
            before = self.before

        decided_at: None | str | Unset
        if isinstance(self.decided_at, Unset):
            decided_at = UNSET
        elif isinstance(self.decided_at, datetime.datetime):
            decided_at = self.decided_at.isoformat()
        else:
            decided_at = self.decided_at

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "after_run_id": after_run_id,
                "before_run_id": before_run_id,
                "eval_id": eval_id,
                "metric": metric,
                "state": state,
                "tolerance": tolerance,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if before is not UNSET:
            field_dict["before"] = before
        if decided_at is not UNSET:
            field_dict["decided_at"] = decided_at
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        after_run_id = UUID(d.pop("after_run_id"))

        before_run_id = UUID(d.pop("before_run_id"))

        eval_id = UUID(d.pop("eval_id"))

        metric = GateMetric(d.pop("metric"))

        state = GateState(d.pop("state"))

        tolerance = d.pop("tolerance")

        def _parse_after(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        after = _parse_after(d.pop("after", UNSET))

        def _parse_before(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        before = _parse_before(d.pop("before", UNSET))

        def _parse_decided_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                decided_at_type_0 = datetime.datetime.fromisoformat(data)

                return decided_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        decided_at = _parse_decided_at(d.pop("decided_at", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        reingest_gate = cls(
            after_run_id=after_run_id,
            before_run_id=before_run_id,
            eval_id=eval_id,
            metric=metric,
            state=state,
            tolerance=tolerance,
            after=after,
            before=before,
            decided_at=decided_at,
            reason=reason,
        )

        reingest_gate.additional_properties = d
        return reingest_gate

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
