from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.expected import Expected


T = TypeVar("T", bound="EvalItem")


@_attrs_define
class EvalItem:
    """One question of a test set.

    Attributes:
        expected (Expected):
        query (str): The question, as a `/retrieve` query (surrounding whitespace is stripped). Example: Who keeps the
            tower?.
    """

    expected: Expected
    query: str

    def to_dict(self) -> dict[str, Any]:
        expected = self.expected.to_dict()

        query = self.query

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "expected": expected,
                "query": query,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.expected import Expected

        d = dict(src_dict)
        expected = Expected.from_dict(d.pop("expected"))

        query = d.pop("query")

        eval_item = cls(
            expected=expected,
            query=query,
        )

        return eval_item
