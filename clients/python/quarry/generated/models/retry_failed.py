from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.job import Job


T = TypeVar("T", bound="RetryFailed")


@_attrs_define
class RetryFailed:
    """What a world's retry put back in the queue.

    Attributes:
        jobs (list[Job]): The jobs that took them, as they are now: each failed chunk under its own job when that
            job can run again, the others under a repair job (or the world's running re-ingest).
        retried (int): Chunks pending again.
    """

    jobs: list[Job]
    retried: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        retried = self.retried

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "jobs": jobs,
                "retried": retried,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job import Job

        d = dict(src_dict)
        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = Job.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        retried = d.pop("retried")

        retry_failed = cls(
            jobs=jobs,
            retried=retried,
        )

        retry_failed.additional_properties = d
        return retry_failed

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
