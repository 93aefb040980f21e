from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.removed_candidate import RemovedCandidate


T = TypeVar("T", bound="RetrievalExplanation")


@_attrs_define
class RetrievalExplanation:
    """How the answer came about (`explain: true`).

    Attributes:
        dense_candidates (int): Candidates of the explaining dense and BM25 searches (2 × the search's limit, at least
            20).
        removed (list[RemovedCandidate]):
        sparse_candidates (int):
    """

    dense_candidates: int
    removed: list[RemovedCandidate]
    sparse_candidates: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dense_candidates = self.dense_candidates

        removed = []
        for removed_item_data in self.removed:
            removed_item = removed_item_data.to_dict()
            removed.append(removed_item)

        sparse_candidates = self.sparse_candidates

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dense_candidates": dense_candidates,
                "removed": removed,
                "sparse_candidates": sparse_candidates,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.removed_candidate import RemovedCandidate

        d = dict(src_dict)
        dense_candidates = d.pop("dense_candidates")

        removed = []
        _removed = d.pop("removed")
        for removed_item_data in _removed:
            removed_item = RemovedCandidate.from_dict(removed_item_data)

            removed.append(removed_item)

        sparse_candidates = d.pop("sparse_candidates")

        retrieval_explanation = cls(
            dense_candidates=dense_candidates,
            removed=removed,
            sparse_candidates=sparse_candidates,
        )

        retrieval_explanation.additional_properties = d
        return retrieval_explanation

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
