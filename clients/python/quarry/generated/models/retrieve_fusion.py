from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.retrieve_fusion_method import RetrieveFusionMethod
from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrieveFusion")


@_attrs_define
class RetrieveFusion:
    """How a hybrid retrieval fuses the dense and the BM25 ranking.

    Attributes:
        dense_weight (float | None | Unset): The dense ranking's weight in `rrf` (0 to 100, default 1; not both 0).
            Qdrant's weighted
            RRF (k 60): a list's positions count as divided by its weight, so weight 3 makes its
            third hit score like an unweighted first; 0 leaves the list out. Example: 1.0.
        method (None | RetrieveFusionMethod | Unset):
        sparse_weight (float | None | Unset): The BM25 ranking's weight in `rrf` (0 to 100, default 1; not both 0), as
            `dense_weight`. Example: 1.0.
    """

    dense_weight: float | None | Unset = UNSET
    method: None | RetrieveFusionMethod | Unset = UNSET
    sparse_weight: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        dense_weight: float | None | Unset
        if isinstance(self.dense_weight, Unset):
            dense_weight = UNSET
        else:
            dense_weight = self.dense_weight

        method: None | str | Unset
        if isinstance(self.method, Unset):
            method = UNSET
        elif isinstance(self.method, RetrieveFusionMethod):
            method = self.method.value
        else:
            method = self.method

        sparse_weight: float | None | Unset
        if isinstance(self.sparse_weight, Unset):
            sparse_weight = UNSET
        else:
            sparse_weight = self.sparse_weight

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if dense_weight is not UNSET:
            field_dict["dense_weight"] = dense_weight
        if method is not UNSET:
            field_dict["method"] = method
        if sparse_weight is not UNSET:
            field_dict["sparse_weight"] = sparse_weight

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_dense_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        dense_weight = _parse_dense_weight(d.pop("dense_weight", UNSET))

        def _parse_method(data: object) -> None | RetrieveFusionMethod | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                method_type_0 = RetrieveFusionMethod(data)

                return method_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrieveFusionMethod | Unset, data)

        method = _parse_method(d.pop("method", UNSET))

        def _parse_sparse_weight(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        sparse_weight = _parse_sparse_weight(d.pop("sparse_weight", UNSET))

        retrieve_fusion = cls(
            dense_weight=dense_weight,
            method=method,
            sparse_weight=sparse_weight,
        )

        return retrieve_fusion
