from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.eval_item import EvalItem


T = TypeVar("T", bound="SuggestedEvalSet")


@_attrs_define
class SuggestedEvalSet:
    """A drafted test set: read it, correct it, then create it with `POST …/evals`.

    Attributes:
        draft (bool): Always true: nothing was stored, and no model judged these questions.
        items (list[EvalItem]): Each a section heading that asks a question, with the start of the text under it as
            the answer and its source as the expected hit.
        name (str):
        sections_seen (int): Sections seen in them.
        sources_read (int): Sources read (at most 2,000, or 32 Mi chars of text, in reading order).
    """

    draft: bool
    items: list[EvalItem]
    name: str
    sections_seen: int
    sources_read: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        draft = self.draft

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        name = self.name

        sections_seen = self.sections_seen

        sources_read = self.sources_read

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "draft": draft,
                "items": items,
                "name": name,
                "sections_seen": sections_seen,
                "sources_read": sources_read,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.eval_item import EvalItem

        d = dict(src_dict)
        draft = d.pop("draft")

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = EvalItem.from_dict(items_item_data)

            items.append(items_item)

        name = d.pop("name")

        sections_seen = d.pop("sections_seen")

        sources_read = d.pop("sources_read")

        suggested_eval_set = cls(
            draft=draft,
            items=items,
            name=name,
            sections_seen=sections_seen,
            sources_read=sources_read,
        )

        suggested_eval_set.additional_properties = d
        return suggested_eval_set

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
