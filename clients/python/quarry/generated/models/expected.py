from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Expected")


@_attrs_define
class Expected:
    """
    Attributes:
        answer (None | str | Unset): The answer's text: scored by the share of its word 4-grams found in `context.text`
            (an answer without letters or digits counts toward nothing). Example: The keeper climbs the tower every
            evening..
        chunks (list[UUID] | None | Unset):
        source_keys (list[str] | None | Unset):
        sources (list[UUID] | None | Unset):
    """

    answer: None | str | Unset = UNSET
    chunks: list[UUID] | None | Unset = UNSET
    source_keys: list[str] | None | Unset = UNSET
    sources: list[UUID] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        answer: None | str | Unset
        if isinstance(self.answer, Unset):
            answer = UNSET
        else:
            answer = self.answer

        chunks: list[str] | None | Unset
        if isinstance(self.chunks, Unset):
            chunks = UNSET
        elif isinstance(self.chunks, list):
            chunks = []
            for chunks_type_0_item_data in self.chunks:
                chunks_type_0_item = str(chunks_type_0_item_data)
                chunks.append(chunks_type_0_item)

        else:
            chunks = self.chunks

        source_keys: list[str] | None | Unset
        if isinstance(self.source_keys, Unset):
            source_keys = UNSET
        elif isinstance(self.source_keys, list):
            source_keys = self.source_keys

        else:
            source_keys = self.source_keys

        sources: list[str] | None | Unset
        if isinstance(self.sources, Unset):
            sources = UNSET
        elif isinstance(self.sources, list):
            sources = []
            for sources_type_0_item_data in self.sources:
                sources_type_0_item = str(sources_type_0_item_data)
                sources.append(sources_type_0_item)

        else:
            sources = self.sources

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if answer is not UNSET:
            field_dict["answer"] = answer
        if chunks is not UNSET:
            field_dict["chunks"] = chunks
        if source_keys is not UNSET:
            field_dict["source_keys"] = source_keys
        if sources is not UNSET:
            field_dict["sources"] = sources

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_answer(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        answer = _parse_answer(d.pop("answer", UNSET))

        def _parse_chunks(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                chunks_type_0 = []
                _chunks_type_0 = data
                for chunks_type_0_item_data in _chunks_type_0:
                    chunks_type_0_item = UUID(chunks_type_0_item_data)

                    chunks_type_0.append(chunks_type_0_item)

                return chunks_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        chunks = _parse_chunks(d.pop("chunks", UNSET))

        def _parse_source_keys(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                source_keys_type_0 = cast(list[str], data)

                return source_keys_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        source_keys = _parse_source_keys(d.pop("source_keys", UNSET))

        def _parse_sources(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                sources_type_0 = []
                _sources_type_0 = data
                for sources_type_0_item_data in _sources_type_0:
                    sources_type_0_item = UUID(sources_type_0_item_data)

                    sources_type_0.append(sources_type_0_item)

                return sources_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        sources = _parse_sources(d.pop("sources", UNSET))

        expected = cls(
            answer=answer,
            chunks=chunks,
            source_keys=source_keys,
            sources=sources,
        )

        expected.additional_properties = d
        return expected

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
