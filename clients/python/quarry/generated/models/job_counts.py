from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="JobCounts")


@_attrs_define
class JobCounts:
    """
    Attributes:
        embedded (int):
        failed (int):
        pending (int):
        rate_limited (int): Times entries were given back because a key was rate limited (no attempt spent).
        retries (int): Failed attempts that were retried.
        reused (int): Entries embedded by reusing an existing vector of identical text.
        total (int):
    """

    embedded: int
    failed: int
    pending: int
    rate_limited: int
    retries: int
    reused: int
    total: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        embedded = self.embedded

        failed = self.failed

        pending = self.pending

        rate_limited = self.rate_limited

        retries = self.retries

        reused = self.reused

        total = self.total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "embedded": embedded,
                "failed": failed,
                "pending": pending,
                "rate_limited": rate_limited,
                "retries": retries,
                "reused": reused,
                "total": total,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        embedded = d.pop("embedded")

        failed = d.pop("failed")

        pending = d.pop("pending")

        rate_limited = d.pop("rate_limited")

        retries = d.pop("retries")

        reused = d.pop("reused")

        total = d.pop("total")

        job_counts = cls(
            embedded=embedded,
            failed=failed,
            pending=pending,
            rate_limited=rate_limited,
            retries=retries,
            reused=reused,
            total=total,
        )

        job_counts.additional_properties = d
        return job_counts

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
