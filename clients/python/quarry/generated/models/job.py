from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.job_kind import JobKind
from ..models.job_status import JobStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_counts import JobCounts
    from ..models.job_error import JobError
    from ..models.reingest_gate import ReingestGate
    from ..models.waiting import Waiting


T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """
    Attributes:
        counts (JobCounts):
        created_at (datetime.datetime):
        errors (list[JobError]): The first 100 failed chunks, by book and chunk number. `counts.failed` counts them all;
            every chunk's error is also in its source's chunk listing (`last_error`).
        id (UUID):
        kind (JobKind): What a job does: `ingest` (new sources), `reingest` (the world under a new profile),
            `repair`, or `replace` (a new version of one source: `source_id`).
        run_id (UUID):
        status (JobStatus): Where a job is in its life; `cancelled`, `completed` and `failed` are final. `held`: a
            gated re-ingest whose new run scored worse than the run served (or whose evaluation could
            not finish); the world keeps its run until the re-ingest is promoted or discarded.
        world_id (UUID):
        finished_at (datetime.datetime | None | Unset):
        gate (None | ReingestGate | Unset):
        source_id (None | Unset | UUID): For a `replace`: the source it makes a new version of; `null` for other kinds.
        started_at (datetime.datetime | None | Unset):
        waiting (None | Unset | Waiting):
    """

    counts: JobCounts
    created_at: datetime.datetime
    errors: list[JobError]
    id: UUID
    kind: JobKind
    run_id: UUID
    status: JobStatus
    world_id: UUID
    finished_at: datetime.datetime | None | Unset = UNSET
    gate: None | ReingestGate | Unset = UNSET
    source_id: None | Unset | UUID = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    waiting: None | Unset | Waiting = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.reingest_gate import ReingestGate
        from ..models.waiting import Waiting

        counts = self.counts.to_dict()

        created_at = self.created_at.isoformat()

        errors = []
        for errors_item_data in self.errors:
            errors_item = errors_item_data.to_dict()
            errors.append(errors_item)

        id = str(self.id)

        kind = self.kind.value

        run_id = str(self.run_id)

        status = self.status.value

        world_id = str(self.world_id)

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        gate: dict[str, Any] | None | Unset
        if isinstance(self.gate, Unset):
            gate = UNSET
        elif isinstance(self.gate, ReingestGate):
            gate = self.gate.to_dict()
        else:
            gate = self.gate

        source_id: None | str | Unset
        if isinstance(self.source_id, Unset):
            source_id = UNSET
        elif isinstance(self.source_id, UUID):
            source_id = str(self.source_id)
        else:
            source_id = self.source_id

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        waiting: dict[str, Any] | None | Unset
        if isinstance(self.waiting, Unset):
            waiting = UNSET
        elif isinstance(self.waiting, Waiting):
            waiting = self.waiting.to_dict()
        else:
            waiting = self.waiting

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "counts": counts,
                "created_at": created_at,
                "errors": errors,
                "id": id,
                "kind": kind,
                "run_id": run_id,
                "status": status,
                "world_id": world_id,
            }
        )
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if gate is not UNSET:
            field_dict["gate"] = gate
        if source_id is not UNSET:
            field_dict["source_id"] = source_id
        if started_at is not UNSET:
            field_dict["started_at"] = started_at
        if waiting is not UNSET:
            field_dict["waiting"] = waiting

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_counts import JobCounts
        from ..models.job_error import JobError
        from ..models.reingest_gate import ReingestGate
        from ..models.waiting import Waiting

        d = dict(src_dict)
        counts = JobCounts.from_dict(d.pop("counts"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        errors = []
        _errors = d.pop("errors")
        for errors_item_data in _errors:
            errors_item = JobError.from_dict(errors_item_data)

            errors.append(errors_item)

        id = UUID(d.pop("id"))

        kind = JobKind(d.pop("kind"))

        run_id = UUID(d.pop("run_id"))

        status = JobStatus(d.pop("status"))

        world_id = UUID(d.pop("world_id"))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_gate(data: object) -> None | ReingestGate | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gate_type_0 = ReingestGate.from_dict(data)

                return gate_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReingestGate | Unset, data)

        gate = _parse_gate(d.pop("gate", UNSET))

        def _parse_source_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                source_id_type_0 = UUID(data)

                return source_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        source_id = _parse_source_id(d.pop("source_id", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        def _parse_waiting(data: object) -> None | Unset | Waiting:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                waiting_type_0 = Waiting.from_dict(data)

                return waiting_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | Waiting, data)

        waiting = _parse_waiting(d.pop("waiting", UNSET))

        job = cls(
            counts=counts,
            created_at=created_at,
            errors=errors,
            id=id,
            kind=kind,
            run_id=run_id,
            status=status,
            world_id=world_id,
            finished_at=finished_at,
            gate=gate,
            source_id=source_id,
            started_at=started_at,
            waiting=waiting,
        )

        job.additional_properties = d
        return job

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
