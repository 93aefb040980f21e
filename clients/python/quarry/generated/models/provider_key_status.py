from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProviderKeyStatus")


@_attrs_define
class ProviderKeyStatus:
    """
    Attributes:
        enabled (bool):
        failures (int):
        fingerprint (str):
        in_flight (int):
        key_id (UUID):
        label (str):
        rate_limited (int):
        requests (int): Requests and outcomes since this process started.
        retired (bool):
        source (str):
        cooling_down_until (datetime.datetime | None | Unset): When the key (or its quota group) may be used again;
            `null` when it is not cooling down.
        quota_group (None | str | Unset):
        retired_reason (None | str | Unset):
    """

    enabled: bool
    failures: int
    fingerprint: str
    in_flight: int
    key_id: UUID
    label: str
    rate_limited: int
    requests: int
    retired: bool
    source: str
    cooling_down_until: datetime.datetime | None | Unset = UNSET
    quota_group: None | str | Unset = UNSET
    retired_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        enabled = self.enabled

        failures = self.failures

        fingerprint = self.fingerprint

        in_flight = self.in_flight

        key_id = str(self.key_id)

        label = self.label

        rate_limited = self.rate_limited

        requests = self.requests

        retired = self.retired

        source = self.source

        cooling_down_until: None | str | Unset
        if isinstance(self.cooling_down_until, Unset):
            cooling_down_until = UNSET
        elif isinstance(self.cooling_down_until, datetime.datetime):
            cooling_down_until = self.cooling_down_until.isoformat()
        else:
            cooling_down_until = self.cooling_down_until

        quota_group: None | str | Unset
        if isinstance(self.quota_group, Unset):
            quota_group = UNSET
        else:
            quota_group = self.quota_group

        retired_reason: None | str | Unset
        if isinstance(self.retired_reason, Unset):
            retired_reason = UNSET
        else:
            retired_reason = self.retired_reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "enabled": enabled,
                "failures": failures,
                "fingerprint": fingerprint,
                "in_flight": in_flight,
                "key_id": key_id,
                "label": label,
                "rate_limited": rate_limited,
                "requests": requests,
                "retired": retired,
                "source": source,
            }
        )
        if cooling_down_until is not UNSET:
            field_dict["cooling_down_until"] = cooling_down_until
        if quota_group is not UNSET:
            field_dict["quota_group"] = quota_group
        if retired_reason is not UNSET:
            field_dict["retired_reason"] = retired_reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        enabled = d.pop("enabled")

        failures = d.pop("failures")

        fingerprint = d.pop("fingerprint")

        in_flight = d.pop("in_flight")

        key_id = UUID(d.pop("key_id"))

        label = d.pop("label")

        rate_limited = d.pop("rate_limited")

        requests = d.pop("requests")

        retired = d.pop("retired")

        source = d.pop("source")

        def _parse_cooling_down_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                cooling_down_until_type_0 = datetime.datetime.fromisoformat(data)

                return cooling_down_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        cooling_down_until = _parse_cooling_down_until(
            d.pop("cooling_down_until", UNSET)
        )

        def _parse_quota_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        quota_group = _parse_quota_group(d.pop("quota_group", UNSET))

        def _parse_retired_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        retired_reason = _parse_retired_reason(d.pop("retired_reason", UNSET))

        provider_key_status = cls(
            enabled=enabled,
            failures=failures,
            fingerprint=fingerprint,
            in_flight=in_flight,
            key_id=key_id,
            label=label,
            rate_limited=rate_limited,
            requests=requests,
            retired=retired,
            source=source,
            cooling_down_until=cooling_down_until,
            quota_group=quota_group,
            retired_reason=retired_reason,
        )

        provider_key_status.additional_properties = d
        return provider_key_status

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
