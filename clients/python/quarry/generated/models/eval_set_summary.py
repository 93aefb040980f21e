from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="EvalSetSummary")


@_attrs_define
class EvalSetSummary:
    """A test set as listed: its items counted.

    Attributes:
        created_at (datetime.datetime):
        eval_id (UUID):
        item_count (int):
        name (str):
        updated_at (datetime.datetime):
        world_id (UUID):
    """

    created_at: datetime.datetime
    eval_id: UUID
    item_count: int
    name: str
    updated_at: datetime.datetime
    world_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        eval_id = str(self.eval_id)

        item_count = self.item_count

        name = self.name

        updated_at = self.updated_at.isoformat()

        world_id = str(self.world_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "eval_id": eval_id,
                "item_count": item_count,
                "name": name,
                "updated_at": updated_at,
                "world_id": world_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        eval_id = UUID(d.pop("eval_id"))

        item_count = d.pop("item_count")

        name = d.pop("name")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        world_id = UUID(d.pop("world_id"))

        eval_set_summary = cls(
            created_at=created_at,
            eval_id=eval_id,
            item_count=item_count,
            name=name,
            updated_at=updated_at,
            world_id=world_id,
        )

        eval_set_summary.additional_properties = d
        return eval_set_summary

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
