from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.eval_item import EvalItem


T = TypeVar("T", bound="EvalSet")


@_attrs_define
class EvalSet:
    """A test set with its items.

    Attributes:
        created_at (datetime.datetime):
        eval_id (UUID):
        item_count (int):
        name (str):
        updated_at (datetime.datetime):
        world_id (UUID):
        items (list[EvalItem]):
    """

    created_at: datetime.datetime
    eval_id: UUID
    item_count: int
    name: str
    updated_at: datetime.datetime
    world_id: UUID
    items: list[EvalItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        eval_id = str(self.eval_id)

        item_count = self.item_count

        name = self.name

        updated_at = self.updated_at.isoformat()

        world_id = str(self.world_id)

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

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
                "items": items,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_item import EvalItem

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        eval_id = UUID(d.pop("eval_id"))

        item_count = d.pop("item_count")

        name = d.pop("name")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        world_id = UUID(d.pop("world_id"))

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = EvalItem.from_dict(items_item_data)

            items.append(items_item)

        eval_set = cls(
            created_at=created_at,
            eval_id=eval_id,
            item_count=item_count,
            name=name,
            updated_at=updated_at,
            world_id=world_id,
            items=items,
        )

        eval_set.additional_properties = d
        return eval_set

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
