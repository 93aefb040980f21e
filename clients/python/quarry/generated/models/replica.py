from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Replica")


@_attrs_define
class Replica:
    """
    Attributes:
        address (str): Where it is reached (`cluster.address`, else the address it listens on).
        id (str):
        in_flight (int): Provider requests it had in flight at its last heartbeat.
        last_heartbeat (datetime.datetime): Its last heartbeat (by the store's clock, as seen now).
        started_at (datetime.datetime):
        version (str):
        workers (int): Embedding workers it runs.
    """

    address: str
    id: str
    in_flight: int
    last_heartbeat: datetime.datetime
    started_at: datetime.datetime
    version: str
    workers: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        id = self.id

        in_flight = self.in_flight

        last_heartbeat = self.last_heartbeat.isoformat()

        started_at = self.started_at.isoformat()

        version = self.version

        workers = self.workers

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "id": id,
                "in_flight": in_flight,
                "last_heartbeat": last_heartbeat,
                "started_at": started_at,
                "version": version,
                "workers": workers,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        address = d.pop("address")

        id = d.pop("id")

        in_flight = d.pop("in_flight")

        last_heartbeat = datetime.datetime.fromisoformat(d.pop("last_heartbeat"))

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        version = d.pop("version")

        workers = d.pop("workers")

        replica = cls(
            address=address,
            id=id,
            in_flight=in_flight,
            last_heartbeat=last_heartbeat,
            started_at=started_at,
            version=version,
            workers=workers,
        )

        replica.additional_properties = d
        return replica

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
