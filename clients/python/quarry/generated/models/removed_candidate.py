from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.rank_standing import RankStanding


T = TypeVar("T", bound="RemovedCandidate")


@_attrs_define
class RemovedCandidate:
    """A candidate not in the answer, and why.

    Attributes:
        point_id (UUID):
        reason (str): `filter`, `min_score`, `bm25_not_used` (BM25 found it, but the search ran dense),
            `verification` (its chunk is gone or changed), `duplicate` (same text as a result) or
            `ranked_out` (below the cut: `top_k`, the fusion or the reranker).
        book_number (int | None | Unset):
        chunk_number (int | None | Unset):
        dense (None | RankStanding | Unset):
        source_id (None | Unset | UUID):
        sparse (None | RankStanding | Unset):
    """

    point_id: UUID
    reason: str
    book_number: int | None | Unset = UNSET
    chunk_number: int | None | Unset = UNSET
    dense: None | RankStanding | Unset = UNSET
    source_id: None | Unset | UUID = UNSET
    sparse: None | RankStanding | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.rank_standing import RankStanding

        point_id = str(self.point_id)

        reason = self.reason

        book_number: int | None | Unset
        if isinstance(self.book_number, Unset):
            book_number = UNSET
        else:
            book_number = self.book_number

        chunk_number: int | None | Unset
        if isinstance(self.chunk_number, Unset):
            chunk_number = UNSET
        else:
            chunk_number = self.chunk_number

        dense: dict[str, Any] | None | Unset
        if isinstance(self.dense, Unset):
            dense = UNSET
        elif isinstance(self.dense, RankStanding):
            dense = self.dense.to_dict()
        else:
            dense = self.dense

        source_id: None | str | Unset
        if isinstance(self.source_id, Unset):
            source_id = UNSET
        elif isinstance(self.source_id, UUID):
            source_id = str(self.source_id)
        else:
            source_id = self.source_id

        sparse: dict[str, Any] | None | Unset
        if isinstance(self.sparse, Unset):
            sparse = UNSET
        elif isinstance(self.sparse, RankStanding):
            sparse = self.sparse.to_dict()
        else:
            sparse = self.sparse

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "point_id": point_id,
                "reason": reason,
            }
        )
        if book_number is not UNSET:
            field_dict["book_number"] = book_number
        if chunk_number is not UNSET:
            field_dict["chunk_number"] = chunk_number
        if dense is not UNSET:
            field_dict["dense"] = dense
        if source_id is not UNSET:
            field_dict["source_id"] = source_id
        if sparse is not UNSET:
            field_dict["sparse"] = sparse

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.rank_standing import RankStanding

        d = dict(src_dict)
        point_id = UUID(d.pop("point_id"))

        reason = d.pop("reason")

        def _parse_book_number(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        book_number = _parse_book_number(d.pop("book_number", UNSET))

        def _parse_chunk_number(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        chunk_number = _parse_chunk_number(d.pop("chunk_number", UNSET))

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

        def _parse_source_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                source_id_type_0 = UUID(data)

                return source_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        source_id = _parse_source_id(d.pop("source_id", UNSET))

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

        removed_candidate = cls(
            point_id=point_id,
            reason=reason,
            book_number=book_number,
            chunk_number=chunk_number,
            dense=dense,
            source_id=source_id,
            sparse=sparse,
        )

        removed_candidate.additional_properties = d
        return removed_candidate

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
