from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.replica import Replica


T = TypeVar("T", bound="Cluster")


@_attrs_define
class Cluster:
    """The replicas that heartbeat into this store, and how they share provider budgets.

    Attributes:
        budgets (str): `shared`: provider budgets are one per quota group for every replica (kept in the
            store); `local`: each process keeps its own (one process per store). Example: shared.
        dead_after_s (int):
        heartbeat_s (int): Seconds between heartbeats, and the silence after which a replica counts as dead.
        replicas (list[Replica]): Live replicas, oldest first.
        this (str): The id of the replica that answered.
    """

    budgets: str
    dead_after_s: int
    heartbeat_s: int
    replicas: list[Replica]
    this: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        budgets = self.budgets

        dead_after_s = self.dead_after_s

        heartbeat_s = self.heartbeat_s

        replicas = []
        for replicas_item_data in self.replicas:
            replicas_item = replicas_item_data.to_dict()
            replicas.append(replicas_item)

        this = self.this

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "budgets": budgets,
                "dead_after_s": dead_after_s,
                "heartbeat_s": heartbeat_s,
                "replicas": replicas,
                "this": this,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.replica import Replica

        d = dict(src_dict)
        budgets = d.pop("budgets")

        dead_after_s = d.pop("dead_after_s")

        heartbeat_s = d.pop("heartbeat_s")

        replicas = []
        _replicas = d.pop("replicas")
        for replicas_item_data in _replicas:
            replicas_item = Replica.from_dict(replicas_item_data)

            replicas.append(replicas_item)

        this = d.pop("this")

        cluster = cls(
            budgets=budgets,
            dead_after_s=dead_after_s,
            heartbeat_s=heartbeat_s,
            replicas=replicas,
            this=this,
        )

        cluster.additional_properties = d
        return cluster

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
