from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.breaker_state import BreakerState
from ..types import UNSET, Unset

T = TypeVar("T", bound="Breaker")


@_attrs_define
class Breaker:
    """A circuit breaker: a run of transient failures (5xx, overloaded, timeouts) opens it, and
    while it is open the provider is not called for the model; work waits without spending
    attempts.

        Attributes:
            failures_in_row (int): Transient failures since the last success.
            model (str):
            state (BreakerState): A circuit breaker's state (`breakers[].state`).
            failing_since (datetime.datetime | None | Unset): The first failure since the last success.
            open_until (datetime.datetime | None | Unset):
    """

    failures_in_row: int
    model: str
    state: BreakerState
    failing_since: datetime.datetime | None | Unset = UNSET
    open_until: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        failures_in_row = self.failures_in_row

        model = self.model

        state = self.state.value

        failing_since: None | str | Unset
        if isinstance(self.failing_since, Unset):
            failing_since = UNSET
        elif isinstance(self.failing_since, datetime.datetime):
            failing_since = self.failing_since.isoformat()
        else:
            failing_since = self.failing_since

        open_until: None | str | Unset
        if isinstance(self.open_until, Unset):
            open_until = UNSET
        elif isinstance(self.open_until, datetime.datetime):
            open_until = self.open_until.isoformat()
        else:
            open_until = self.open_until

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failures_in_row": failures_in_row,
                "model": model,
                "state": state,
            }
        )
        if failing_since is not UNSET:
            field_dict["failing_since"] = failing_since
        if open_until is not UNSET:
            field_dict["open_until"] = open_until

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        failures_in_row = d.pop("failures_in_row")

        model = d.pop("model")

        state = BreakerState(d.pop("state"))

        def _parse_failing_since(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                failing_since_type_0 = datetime.datetime.fromisoformat(data)

                return failing_since_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        failing_since = _parse_failing_since(d.pop("failing_since", UNSET))

        def _parse_open_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                open_until_type_0 = datetime.datetime.fromisoformat(data)

                return open_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        open_until = _parse_open_until(d.pop("open_until", UNSET))

        breaker = cls(
            failures_in_row=failures_in_row,
            model=model,
            state=state,
            failing_since=failing_since,
            open_until=open_until,
        )

        breaker.additional_properties = d
        return breaker

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
