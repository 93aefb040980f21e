from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ChunkingRequest")


@_attrs_define
class ChunkingRequest:
    """How sources are split into chunks.

    Attributes:
        context_prefix (bool | None | Unset): Embed each chunk after a short line naming its source's title and the
            headings of the
            sections it sits in (the stored text, and what retrieval returns, are unchanged). Part
            of the locked profile: every vector changes with it. Takes up to 48 tokens, so
            max_tokens may then be at most the model's chunk limit less 48. Default false for a new
            world (on the measured corpora it did not win everywhere: BENCHMARKS.md); a re-ingest
            keeps the world's own.
        max_tokens (int | None | Unset): Largest chunk, in the model's tokens: 16 up to the model's chunk limit (254 for
            the local
            model, its input limit for the others). Default 512, capped at three quarters of the limit. Example: 512.
        overlap_tokens (int | None | Unset): Tokens of context carried from the previous chunk (default 64, at most half
            of max_tokens). Example: 64.
        parent_max_tokens (int | None | Unset): Largest parent (a run of consecutive chunks that `expand: parent`
            retrieves), in the
            same tokens: max_tokens up to 1048576. Default four times max_tokens, at most
            `retrieval.max_context_tokens`. Parents are not embedded. Example: 2048.
    """

    context_prefix: bool | None | Unset = UNSET
    max_tokens: int | None | Unset = UNSET
    overlap_tokens: int | None | Unset = UNSET
    parent_max_tokens: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        context_prefix: bool | None | Unset
        if isinstance(self.context_prefix, Unset):
            context_prefix = UNSET
        else:
            context_prefix = self.context_prefix

        max_tokens: int | None | Unset
        if isinstance(self.max_tokens, Unset):
            max_tokens = UNSET
        else:
            max_tokens = self.max_tokens

        overlap_tokens: int | None | Unset
        if isinstance(self.overlap_tokens, Unset):
            overlap_tokens = UNSET
        else:
            overlap_tokens = self.overlap_tokens

        parent_max_tokens: int | None | Unset
        if isinstance(self.parent_max_tokens, Unset):
            parent_max_tokens = UNSET
        else:
            parent_max_tokens = self.parent_max_tokens

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if context_prefix is not UNSET:
            field_dict["context_prefix"] = context_prefix
        if max_tokens is not UNSET:
            field_dict["max_tokens"] = max_tokens
        if overlap_tokens is not UNSET:
            field_dict["overlap_tokens"] = overlap_tokens
        if parent_max_tokens is not UNSET:
            field_dict["parent_max_tokens"] = parent_max_tokens

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_context_prefix(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        context_prefix = _parse_context_prefix(d.pop("context_prefix", UNSET))

        def _parse_max_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_tokens = _parse_max_tokens(d.pop("max_tokens", UNSET))

        def _parse_overlap_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        overlap_tokens = _parse_overlap_tokens(d.pop("overlap_tokens", UNSET))

        def _parse_parent_max_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        parent_max_tokens = _parse_parent_max_tokens(d.pop("parent_max_tokens", UNSET))

        chunking_request = cls(
            context_prefix=context_prefix,
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            parent_max_tokens=parent_max_tokens,
        )

        return chunking_request
