from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrievalQuality")


@_attrs_define
class RetrievalQuality:
    """How far to trust the answer, for the caller to tell its model.

    Attributes:
        level (str): `high` (dense: best score ≥ 0.5, or ≥ 0.3 and ahead of the second by ≥ 0.1), `low`
            (hits, none convincing), `none` (no hits) or `unrated` (a fused search: fused scores are not similarities).
        best_score (float | None | Unset):
        score_gap (float | None | Unset): Best score less the second best.
    """

    level: str
    best_score: float | None | Unset = UNSET
    score_gap: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        level = self.level

        best_score: float | None | Unset
        if isinstance(self.best_score, Unset):
            best_score = UNSET
        else:
            best_score = self.best_score

        score_gap: float | None | Unset
        if isinstance(self.score_gap, Unset):
            score_gap = UNSET
        else:
            score_gap = self.score_gap

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "level": level,
            }
        )
        if best_score is not UNSET:
            field_dict["best_score"] = best_score
        if score_gap is not UNSET:
            field_dict["score_gap"] = score_gap

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        level = d.pop("level")

        def _parse_best_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        best_score = _parse_best_score(d.pop("best_score", UNSET))

        def _parse_score_gap(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        score_gap = _parse_score_gap(d.pop("score_gap", UNSET))

        retrieval_quality = cls(
            level=level,
            best_score=best_score,
            score_gap=score_gap,
        )

        retrieval_quality.additional_properties = d
        return retrieval_quality

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
