from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.eval_run_status import EvalRunStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.eval_run_progress import EvalRunProgress
    from ..models.eval_run_report import EvalRunReport
    from ..models.eval_run_settings_item import EvalRunSettingsItem
    from ..models.measured_index import MeasuredIndex


T = TypeVar("T", bound="EvalRun")


@_attrs_define
class EvalRun:
    """An evaluation run.

    Attributes:
        attempts (int): Times the run was taken up: more than 1 when it was resumed after a restart.
        budgets (list[int]):
        created_at (datetime.datetime):
        eval_id (UUID):
        eval_name (str): The test set's name when the run was asked for.
        progress (EvalRunProgress): Items scored of all.
        run_id (UUID):
        settings (list[EvalRunSettingsItem]): As sent.
        status (EvalRunStatus): Where a run is in its life; `completed`, `failed` and `cancelled` are final. `waiting`:
            a
            gated re-ingest's run, queued once the new index is embedded.
        world_id (UUID):
        error (None | str | Unset): Why a failed run failed.
        finished_at (datetime.datetime | None | Unset):
        measured (MeasuredIndex | None | Unset):
        reingest_job_id (None | Unset | UUID): For a gated re-ingest's run: the re-ingest job it decides; `null`
            otherwise.
        report (EvalRunReport | None | Unset):
        started_at (datetime.datetime | None | Unset):
    """

    attempts: int
    budgets: list[int]
    created_at: datetime.datetime
    eval_id: UUID
    eval_name: str
    progress: EvalRunProgress
    run_id: UUID
    settings: list[EvalRunSettingsItem]
    status: EvalRunStatus
    world_id: UUID
    error: None | str | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    measured: MeasuredIndex | None | Unset = UNSET
    reingest_job_id: None | Unset | UUID = UNSET
    report: EvalRunReport | None | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.eval_run_report import EvalRunReport
        from ..models.measured_index import MeasuredIndex

        attempts = self.attempts

        budgets = self.budgets

        created_at = self.created_at.isoformat()

        eval_id = str(self.eval_id)

        eval_name = self.eval_name

        progress = self.progress.to_dict()

        run_id = str(self.run_id)

        settings = []
        for settings_item_data in self.settings:
            settings_item = settings_item_data.to_dict()
            settings.append(settings_item)

        status = self.status.value

        world_id = str(self.world_id)

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        measured: dict[str, Any] | None | Unset
        if isinstance(self.measured, Unset):
            measured = UNSET
        elif isinstance(self.measured, MeasuredIndex):
            measured = self.measured.to_dict()
        else:
            measured = self.measured

        reingest_job_id: None | str | Unset
        if isinstance(self.reingest_job_id, Unset):
            reingest_job_id = UNSET
        elif isinstance(self.reingest_job_id, UUID):
            reingest_job_id = str(self.reingest_job_id)
        else:
            reingest_job_id = self.reingest_job_id

        report: dict[str, Any] | None | Unset
        if isinstance(self.report, Unset):
            report = UNSET
        elif isinstance(self.report, EvalRunReport):
            report = self.report.to_dict()
        else:
            report = self.report

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempts": attempts,
                "budgets": budgets,
                "created_at": created_at,
                "eval_id": eval_id,
                "eval_name": eval_name,
                "progress": progress,
                "run_id": run_id,
                "settings": settings,
                "status": status,
                "world_id": world_id,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if measured is not UNSET:
            field_dict["measured"] = measured
        if reingest_job_id is not UNSET:
            field_dict["reingest_job_id"] = reingest_job_id
        if report is not UNSET:
            field_dict["report"] = report
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_run_progress import EvalRunProgress
        from ..models.eval_run_report import EvalRunReport
        from ..models.eval_run_settings_item import EvalRunSettingsItem
        from ..models.measured_index import MeasuredIndex

        d = dict(src_dict)
        attempts = d.pop("attempts")

        budgets = cast(list[int], d.pop("budgets"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        eval_id = UUID(d.pop("eval_id"))

        eval_name = d.pop("eval_name")

        progress = EvalRunProgress.from_dict(d.pop("progress"))

        run_id = UUID(d.pop("run_id"))

        settings = []
        _settings = d.pop("settings")
        for settings_item_data in _settings:
            settings_item = EvalRunSettingsItem.from_dict(settings_item_data)

            settings.append(settings_item)

        status = EvalRunStatus(d.pop("status"))

        world_id = UUID(d.pop("world_id"))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

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

        def _parse_measured(data: object) -> MeasuredIndex | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                measured_type_0 = MeasuredIndex.from_dict(data)

                return measured_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MeasuredIndex | None | Unset, data)

        measured = _parse_measured(d.pop("measured", UNSET))

        def _parse_reingest_job_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reingest_job_id_type_0 = UUID(data)

                return reingest_job_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        reingest_job_id = _parse_reingest_job_id(d.pop("reingest_job_id", UNSET))

        def _parse_report(data: object) -> EvalRunReport | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                report_type_0 = EvalRunReport.from_dict(data)

                return report_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EvalRunReport | None | Unset, data)

        report = _parse_report(d.pop("report", UNSET))

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

        eval_run = cls(
            attempts=attempts,
            budgets=budgets,
            created_at=created_at,
            eval_id=eval_id,
            eval_name=eval_name,
            progress=progress,
            run_id=run_id,
            settings=settings,
            status=status,
            world_id=world_id,
            error=error,
            finished_at=finished_at,
            measured=measured,
            reingest_job_id=reingest_job_id,
            report=report,
            started_at=started_at,
        )

        eval_run.additional_properties = d
        return eval_run

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
