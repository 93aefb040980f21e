from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrievalFusion")


@_attrs_define
class RetrievalFusion:
    """A fusion as run.

    Attributes:
        method (str): `rrf` or `dbsf`.
        dense_weight (float | None | Unset): `rrf` only.
        sparse_weight (float | None | Unset): `rrf` only.
    """

    method: str
    dense_weight: float | None | Unset = UNSET
    sparse_weight: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        method = self.method

        dense_weight: float | None | Unset
        if isinstance(self.dense_weight, Unset):
            dense_weight = UNSET
        else:
            dense_weight = self.dense_weight

        sparse_weight: float | None | Unset
        if isinstance(self.sparse_weight, Unset):
            sparse_weight = UNSET
        else:
            sparse_weight = self.sparse_weight

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "method": method,
            }
        )
        if dense_weight is not UNSET:
            field_dict["dense_weight"] = dense_weight
        if sparse_weight is not UNSET:
            field_dict["sparse_weight"] = sparse_weight

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        method = d.pop("method")

        def _parse_dense_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        dense_weight = _parse_dense_weight(d.pop("dense_weight", UNSET))

        def _parse_sparse_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        sparse_weight = _parse_sparse_weight(d.pop("sparse_weight", UNSET))

        retrieval_fusion = cls(
            method=method,
            dense_weight=dense_weight,
            sparse_weight=sparse_weight,
        )

        retrieval_fusion.additional_properties = d
        return retrieval_fusion

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
