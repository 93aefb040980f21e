from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProviderKey")


@_attrs_define
class ProviderKey:
    """
    Attributes:
        created_at (datetime.datetime):
        enabled (bool):
        fingerprint (str): Last four characters and a sha256 prefix, e.g. `…a1b2:0f3c9a1e`.
        key_id (UUID):
        label (str):
        provider (str):
        retired (bool):
        source (str): `api` (added here) or `config` (from configuration; read-only but can be disabled).
        updated_at (datetime.datetime):
        usable (bool): Whether quarry can embed with the key now: enabled, not retired and its secret at hand
            (cooldowns aside).
        problem (None | str | Unset): Why a key that is enabled cannot be used, e.g. its secret does not decrypt with
            the
            configured `security.master_key`.
        quota_group (None | str | Unset):
        retired_reason (None | str | Unset):
    """

    created_at: datetime.datetime
    enabled: bool
    fingerprint: str
    key_id: UUID
    label: str
    provider: str
    retired: bool
    source: str
    updated_at: datetime.datetime
    usable: bool
    problem: None | str | Unset = UNSET
    quota_group: None | str | Unset = UNSET
    retired_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        enabled = self.enabled

        fingerprint = self.fingerprint

        key_id = str(self.key_id)

        label = self.label

        provider = self.provider

        retired = self.retired

        source = self.source

        updated_at = self.updated_at.isoformat()

        usable = self.usable

        problem: None | str | Unset
        if isinstance(self.problem, Unset):
            problem = UNSET
        else:
            problem = self.problem

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
                "created_at": created_at,
                "enabled": enabled,
                "fingerprint": fingerprint,
                "key_id": key_id,
                "label": label,
                "provider": provider,
                "retired": retired,
                "source": source,
                "updated_at": updated_at,
                "usable": usable,
            }
        )
        if problem is not UNSET:
            field_dict["problem"] = problem
        if quota_group is not UNSET:
            field_dict["quota_group"] = quota_group
        if retired_reason is not UNSET:
            field_dict["retired_reason"] = retired_reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        enabled = d.pop("enabled")

        fingerprint = d.pop("fingerprint")

        key_id = UUID(d.pop("key_id"))

        label = d.pop("label")

        provider = d.pop("provider")

        retired = d.pop("retired")

        source = d.pop("source")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        usable = d.pop("usable")

        def _parse_problem(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        problem = _parse_problem(d.pop("problem", UNSET))

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

        provider_key = cls(
            created_at=created_at,
            enabled=enabled,
            fingerprint=fingerprint,
            key_id=key_id,
            label=label,
            provider=provider,
            retired=retired,
            source=source,
            updated_at=updated_at,
            usable=usable,
            problem=problem,
            quota_group=quota_group,
            retired_reason=retired_reason,
        )

        provider_key.additional_properties = d
        return provider_key

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
