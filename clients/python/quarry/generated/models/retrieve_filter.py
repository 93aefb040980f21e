from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata_filter import MetadataFilter


T = TypeVar("T", bound="RetrieveFilter")


@_attrs_define
class RetrieveFilter:
    """Which sources a retrieval searches.

    Attributes:
        book_numbers (list[int] | None | Unset): Book numbers (1 to 1000 of them, each at least 1).
        filenames (list[str] | None | Unset): Exact file names as stored (1 to 1000).
        metadata (MetadataFilter | None | Unset):
        source_ids (list[UUID] | None | Unset): Source ids (1 to 1000).
    """

    book_numbers: list[int] | None | Unset = UNSET
    filenames: list[str] | None | Unset = UNSET
    metadata: MetadataFilter | None | Unset = UNSET
    source_ids: list[UUID] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata_filter import MetadataFilter

        book_numbers: list[int] | None | Unset
        if isinstance(self.book_numbers, Unset):
            book_numbers = UNSET
        elif isinstance(self.book_numbers, list):
            book_numbers = self.book_numbers

        else:
            book_numbers = self.book_numbers

        filenames: list[str] | None | Unset
        if isinstance(self.filenames, Unset):
            filenames = UNSET
        elif isinstance(self.filenames, list):
            filenames = self.filenames

        else:
            filenames = self.filenames

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, MetadataFilter):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        source_ids: list[str] | None | Unset
        if isinstance(self.source_ids, Unset):
            source_ids = UNSET
        elif isinstance(self.source_ids, list):
            source_ids = []
            for source_ids_type_0_item_data in self.source_ids:
                source_ids_type_0_item = str(source_ids_type_0_item_data)
                source_ids.append(source_ids_type_0_item)

        else:
            source_ids = self.source_ids

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if book_numbers is not UNSET:
            field_dict["book_numbers"] = book_numbers
        if filenames is not UNSET:
            field_dict["filenames"] = filenames
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if source_ids is not UNSET:
            field_dict["source_ids"] = source_ids

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.metadata_filter import MetadataFilter

        d = dict(src_dict)

        def _parse_book_numbers(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                book_numbers_type_0 = cast(list[int], data)

                return book_numbers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        book_numbers = _parse_book_numbers(d.pop("book_numbers", UNSET))

        def _parse_filenames(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                filenames_type_0 = cast(list[str], data)

                return filenames_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        filenames = _parse_filenames(d.pop("filenames", UNSET))

        def _parse_metadata(data: object) -> MetadataFilter | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = MetadataFilter.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MetadataFilter | None | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

        def _parse_source_ids(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                source_ids_type_0 = []
                _source_ids_type_0 = data
                for source_ids_type_0_item_data in _source_ids_type_0:
                    source_ids_type_0_item = UUID(source_ids_type_0_item_data)

                    source_ids_type_0.append(source_ids_type_0_item)

                return source_ids_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        source_ids = _parse_source_ids(d.pop("source_ids", UNSET))

        retrieve_filter = cls(
            book_numbers=book_numbers,
            filenames=filenames,
            metadata=metadata,
            source_ids=source_ids,
        )

        return retrieve_filter
