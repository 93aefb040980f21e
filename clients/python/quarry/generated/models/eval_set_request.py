from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.eval_item import EvalItem


T = TypeVar("T", bound="EvalSetRequest")


@_attrs_define
class EvalSetRequest:
    """A test set as sent to create or replace one.

    Attributes:
        items (list[EvalItem]):
        name (str): As a world's name. Example: FAQ questions.
    """

    items: list[EvalItem]
    name: str

    def to_dict(self) -> dict[str, Any]:
        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        name = self.name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "items": items,
                "name": name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_item import EvalItem

        d = dict(src_dict)
        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = EvalItem.from_dict(items_item_data)

            items.append(items_item)

        name = d.pop("name")

        eval_set_request = cls(
            items=items,
            name=name,
        )

        return eval_set_request
