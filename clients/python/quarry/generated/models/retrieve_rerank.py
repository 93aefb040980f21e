from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrieveRerank")


@_attrs_define
class RetrieveRerank:
    """Reranking settings.

    Attributes:
        candidates (int | None | Unset): Candidates handed to the reranker (1 to 1000, default 50; at least the results
            kept). Example: 50.
        top_n (int | None | Unset): Results kept after reranking (1 to `candidates`; default `top_k`). Example: 8.
    """

    candidates: int | None | Unset = UNSET
    top_n: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        candidates: int | None | Unset
        if isinstance(self.candidates, Unset):
            candidates = UNSET
        else:
            candidates = self.candidates

        top_n: int | None | Unset
        if isinstance(self.top_n, Unset):
            top_n = UNSET
        else:
            top_n = self.top_n

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if candidates is not UNSET:
            field_dict["candidates"] = candidates
        if top_n is not UNSET:
            field_dict["top_n"] = top_n

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_candidates(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        candidates = _parse_candidates(d.pop("candidates", UNSET))

        def _parse_top_n(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        top_n = _parse_top_n(d.pop("top_n", UNSET))

        retrieve_rerank = cls(
            candidates=candidates,
            top_n=top_n,
        )

        return retrieve_rerank
