from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chunk_error import ChunkError


T = TypeVar("T", bound="Chunk")


@_attrs_define
class Chunk:
    """A chunk of a source with the state of its embedding.

    Attributes:
        attempts (int): Embedding attempts spent (rate limits spend none).
        char_end (int):
        char_start (int): Offsets in chars (Unicode scalar values) of the stored text, end exclusive.
        chunk_number (int): 0-based reading order within the source.
        chunk_text (str): The embedded text: exactly the stored text's chars `char_start..char_end`.
        id (UUID): The chunk's id, as retrieval results, duplicates and citations name it.
        overlap_text (str): Context carried in from the previous chunk (ends at `char_start`); not embedded.
        sha256 (str): Hex sha256 of `chunk_text`.
        state (str): `pending`, `embedded` or `failed`.
        token_count (int):
        last_error (ChunkError | None | Unset):
        page (int | None | Unset): For a PDF's chunks, the page (1-based) the chunk starts on; `null` for other formats.
    """

    attempts: int
    char_end: int
    char_start: int
    chunk_number: int
    chunk_text: str
    id: UUID
    overlap_text: str
    sha256: str
    state: str
    token_count: int
    last_error: ChunkError | None | Unset = UNSET
    page: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.chunk_error import ChunkError

        attempts = self.attempts

        char_end = self.char_end

        char_start = self.char_start

        chunk_number = self.chunk_number

        chunk_text = self.chunk_text

        id = str(self.id)

        overlap_text = self.overlap_text

        sha256 = self.sha256

        state = self.state

        token_count = self.token_count

        last_error: dict[str, Any] | None | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        elif isinstance(self.last_error, ChunkError):
            last_error = self.last_error.to_dict()
        else:
            last_error = self.last_error

        page: int | None | Unset
        if isinstance(self.page, Unset):
            page = UNSET
        else:
            page = self.page

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempts": attempts,
                "char_end": char_end,
                "char_start": char_start,
                "chunk_number": chunk_number,
                "chunk_text": chunk_text,
                "id": id,
                "overlap_text": overlap_text,
                "sha256": sha256,
                "state": state,
                "token_count": token_count,
            }
        )
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if page is not UNSET:
            field_dict["page"] = page

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chunk_error import ChunkError

        d = dict(src_dict)
        attempts = d.pop("attempts")

        char_end = d.pop("char_end")

        char_start = d.pop("char_start")

        chunk_number = d.pop("chunk_number")

        chunk_text = d.pop("chunk_text")

        id = UUID(d.pop("id"))

        overlap_text = d.pop("overlap_text")

        sha256 = d.pop("sha256")

        state = d.pop("state")

        token_count = d.pop("token_count")

        def _parse_last_error(data: object) -> ChunkError | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_error_type_0 = ChunkError.from_dict(data)

                return last_error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChunkError | None | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

        def _parse_page(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        page = _parse_page(d.pop("page", UNSET))

        chunk = cls(
            attempts=attempts,
            char_end=char_end,
            char_start=char_start,
            chunk_number=chunk_number,
            chunk_text=chunk_text,
            id=id,
            overlap_text=overlap_text,
            sha256=sha256,
            state=state,
            token_count=token_count,
            last_error=last_error,
            page=page,
        )

        chunk.additional_properties = d
        return chunk

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
