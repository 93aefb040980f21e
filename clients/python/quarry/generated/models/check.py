from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.collection_drift import CollectionDrift
    from ..models.node_state import NodeState


T = TypeVar("T", bound="Check")


@_attrs_define
class Check:
    """The state of one dependency.

    Attributes:
        kind (str): Backend kind, e.g. `sqlite`, `postgres`, `embedded`, `qdrant`.
        ok (bool):
        drift (list[CollectionDrift] | Unset): Vector store: collections whose layout differs from
            `[vectors.collection]` (reported,
            never changed silently; `quarry vectors apply-settings` changes what can change in
            place). Does not affect readiness.
        error (None | str | Unset): Why it is not ready (no secrets).
        nodes (list[NodeState] | Unset): Vector store with several nodes (`vectors.urls`): each node's state. Ready
            while any
            node answers; a node down is a degraded state worth an alert.
    """

    kind: str
    ok: bool
    drift: list[CollectionDrift] | Unset = UNSET
    error: None | str | Unset = UNSET
    nodes: list[NodeState] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind

        ok = self.ok

        drift: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.drift, Unset):
            drift = []
            for drift_item_data in self.drift:
                drift_item = drift_item_data.to_dict()
                drift.append(drift_item)

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        nodes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.nodes, Unset):
            nodes = []
            for nodes_item_data in self.nodes:
                nodes_item = nodes_item_data.to_dict()
                nodes.append(nodes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "ok": ok,
            }
        )
        if drift is not UNSET:
            field_dict["drift"] = drift
        if error is not UNSET:
            field_dict["error"] = error
        if nodes is not UNSET:
            field_dict["nodes"] = nodes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.collection_drift import CollectionDrift
        from ..models.node_state import NodeState

        d = dict(src_dict)
        kind = d.pop("kind")

        ok = d.pop("ok")

        _drift = d.pop("drift", UNSET)
        drift: list[CollectionDrift] | Unset = UNSET
        if _drift is not UNSET:
            drift = []
            for drift_item_data in _drift:
                drift_item = CollectionDrift.from_dict(drift_item_data)

                drift.append(drift_item)

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        _nodes = d.pop("nodes", UNSET)
        nodes: list[NodeState] | Unset = UNSET
        if _nodes is not UNSET:
            nodes = []
            for nodes_item_data in _nodes:
                nodes_item = NodeState.from_dict(nodes_item_data)

                nodes.append(nodes_item)

        check = cls(
            kind=kind,
            ok=ok,
            drift=drift,
            error=error,
            nodes=nodes,
        )

        check.additional_properties = d
        return check

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
