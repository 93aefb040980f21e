from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.audit_action_name import AuditActionName
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.audit_actor import AuditActor


T = TypeVar("T", bound="AuditEvent")


@_attrs_define
class AuditEvent:
    """
    Attributes:
        action (AuditActionName): An action the audit log records.
        actor (AuditActor): Who acted.
        at (datetime.datetime):
        seq (int): Orders the log: a later entry has a larger `seq`.
        address (None | str | Unset): The client's IP address as quarry saw it (behind a proxy, the proxy's).
        target (None | str | Unset): The id of the world, provider key, webhook or token acted on.
    """

    action: AuditActionName
    actor: AuditActor
    at: datetime.datetime
    seq: int
    address: None | str | Unset = UNSET
    target: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action = self.action.value

        actor = self.actor.to_dict()

        at = self.at.isoformat()

        seq = self.seq

        address: None | str | Unset
        if isinstance(self.address, Unset):
            address = UNSET
        else:
            address = self.address

        target: None | str | Unset
        if isinstance(self.target, Unset):
            target = UNSET
        else:
            target = self.target

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "actor": actor,
                "at": at,
                "seq": seq,
            }
        )
        if address is not UNSET:
            field_dict["address"] = address
        if target is not UNSET:
            field_dict["target"] = target

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.audit_actor import AuditActor

        d = dict(src_dict)
        action = AuditActionName(d.pop("action"))

        actor = AuditActor.from_dict(d.pop("actor"))

        at = datetime.datetime.fromisoformat(d.pop("at"))

        seq = d.pop("seq")

        def _parse_address(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        address = _parse_address(d.pop("address", UNSET))

        def _parse_target(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        target = _parse_target(d.pop("target", UNSET))

        audit_event = cls(
            action=action,
            actor=actor,
            at=at,
            seq=seq,
            address=address,
            target=target,
        )

        audit_event.additional_properties = d
        return audit_event

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
