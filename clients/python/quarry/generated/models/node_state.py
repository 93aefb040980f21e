from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="NodeState")


@_attrs_define
class NodeState:
    """One configured Qdrant node, as `/readyz` shows it.

    Attributes:
        index (int): Position in `vectors.urls` (0-based; addresses are not shown to unauthenticated callers).
        ok (bool): Whether the node answered its health check.
        preferred (bool): Whether requests go to this node first (the last one that answered).
    """

    index: int
    ok: bool
    preferred: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        index = self.index

        ok = self.ok

        preferred = self.preferred

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "index": index,
                "ok": ok,
                "preferred": preferred,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        index = d.pop("index")

        ok = d.pop("ok")

        preferred = d.pop("preferred")

        node_state = cls(
            index=index,
            ok=ok,
            preferred=preferred,
        )

        node_state.additional_properties = d
        return node_state

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
