from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.rank_standing import RankStanding


T = TypeVar("T", bound="HitExplanation")


@_attrs_define
class HitExplanation:
    """One result, explained.

    Attributes:
        dense (None | RankStanding | Unset):
        fused_score (float | None | Unset): The fused score, in a fused search.
        rerank_score (float | None | Unset):
        sparse (None | RankStanding | Unset):
    """

    dense: None | RankStanding | Unset = UNSET
    fused_score: float | None | Unset = UNSET
    rerank_score: float | None | Unset = UNSET
    sparse: None | RankStanding | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.rank_standing import RankStanding

        dense: dict[str, Any] | None | Unset
        if isinstance(self.dense, Unset):
            dense = UNSET
        elif isinstance(self.dense, RankStanding):
            dense = self.dense.to_dict()
        else:
            dense = self.dense

        fused_score: float | None | Unset
        if isinstance(self.fused_score, Unset):
            fused_score = UNSET
        else:
            fused_score = self.fused_score

        rerank_score: float | None | Unset
        if isinstance(self.rerank_score, Unset):
            rerank_score = UNSET
        else:
            rerank_score = self.rerank_score

        sparse: dict[str, Any] | None | Unset
        if isinstance(self.sparse, Unset):
            sparse = UNSET
        elif isinstance(self.sparse, RankStanding):
            sparse = self.sparse.to_dict()
        else:
            sparse = self.sparse

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if dense is not UNSET:
            field_dict["dense"] = dense
        if fused_score is not UNSET:
            field_dict["fused_score"] = fused_score
        if rerank_score is not UNSET:
            field_dict["rerank_score"] = rerank_score
        if sparse is not UNSET:
            field_dict["sparse"] = sparse

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.rank_standing import RankStanding

        d = dict(src_dict)

        def _parse_dense(data: object) -> None | RankStanding | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                dense_type_0 = RankStanding.from_dict(data)

                return dense_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RankStanding | Unset, data)

        dense = _parse_dense(d.pop("dense", UNSET))

        def _parse_fused_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        fused_score = _parse_fused_score(d.pop("fused_score", UNSET))

        def _parse_rerank_score(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rerank_score = _parse_rerank_score(d.pop("rerank_score", UNSET))

        def _parse_sparse(data: object) -> None | RankStanding | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sparse_type_0 = RankStanding.from_dict(data)

                return sparse_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RankStanding | Unset, data)

        sparse = _parse_sparse(d.pop("sparse", UNSET))

        hit_explanation = cls(
            dense=dense,
            fused_score=fused_score,
            rerank_score=rerank_score,
            sparse=sparse,
        )

        hit_explanation.additional_properties = d
        return hit_explanation

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
