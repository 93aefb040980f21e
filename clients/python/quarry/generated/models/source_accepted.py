from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.outcome import Outcome
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job import Job
    from ..models.source import Source


T = TypeVar("T", bound="SourceAccepted")


@_attrs_define
class SourceAccepted:
    """
    Attributes:
        outcome (Outcome): What an upload did.
        source (Source):
        job (Job | None | Unset):
    """

    outcome: Outcome
    source: Source
    job: Job | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.job import Job

        outcome = self.outcome.value

        source = self.source.to_dict()

        job: dict[str, Any] | None | Unset
        if isinstance(self.job, Unset):
            job = UNSET
        elif isinstance(self.job, Job):
            job = self.job.to_dict()
        else:
            job = self.job

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "outcome": outcome,
                "source": source,
            }
        )
        if job is not UNSET:
            field_dict["job"] = job

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job import Job
        from ..models.source import Source

        d = dict(src_dict)
        outcome = Outcome(d.pop("outcome"))

        source = Source.from_dict(d.pop("source"))

        def _parse_job(data: object) -> Job | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                job_type_0 = Job.from_dict(data)

                return job_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Job | None | Unset, data)

        job = _parse_job(d.pop("job", UNSET))

        source_accepted = cls(
            outcome=outcome,
            source=source,
            job=job,
        )

        source_accepted.additional_properties = d
        return source_accepted

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
