from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pending_version import PendingVersion
    from ..models.source_metadata import SourceMetadata


T = TypeVar("T", bound="Source")


@_attrs_define
class Source:
    """
    Attributes:
        book_number (int):
        chars (int): Length of the stored text in chars (Unicode scalar values).
        chunks (int):
        content_type (str):
        created_at (datetime.datetime):
        embedded (int):
        failed (int):
        filename (str):
        id (UUID):
        metadata (SourceMetadata): As given at upload; `{}` when none was.
        pending (int):
        sha256 (str):
        updated_at (datetime.datetime): When the version served now was stored.
        version (int): 1 at creation, one more each time a replace switches in; also the `ETag` (`"3"`).
        world_id (UUID):
        key (None | str | Unset): Your name for the source, if you gave one.
        pending_version (None | PendingVersion | Unset):
        title (None | str | Unset): As given at upload; for an HTML page uploaded without one, the page's own title
            (with
            `sources.html = "main"`); `null` otherwise.
        url (None | str | Unset): As given at upload; `null` when none was.
    """

    book_number: int
    chars: int
    chunks: int
    content_type: str
    created_at: datetime.datetime
    embedded: int
    failed: int
    filename: str
    id: UUID
    metadata: SourceMetadata
    pending: int
    sha256: str
    updated_at: datetime.datetime
    version: int
    world_id: UUID
    key: None | str | Unset = UNSET
    pending_version: None | PendingVersion | Unset = UNSET
    title: None | str | Unset = UNSET
    url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pending_version import PendingVersion

        book_number = self.book_number

        chars = self.chars

        chunks = self.chunks

        content_type = self.content_type

        created_at = self.created_at.isoformat()

        embedded = self.embedded

        failed = self.failed

        filename = self.filename

        id = str(self.id)

        metadata = self.metadata.to_dict()

        pending = self.pending

        sha256 = self.sha256

        updated_at = self.updated_at.isoformat()

        version = self.version

        world_id = str(self.world_id)

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        pending_version: dict[str, Any] | None | Unset
        if isinstance(self.pending_version, Unset):
            pending_version = UNSET
        elif isinstance(self.pending_version, PendingVersion):
            pending_version = self.pending_version.to_dict()
        else:
            pending_version = self.pending_version

        title: None | str | Unset
        if isinstance(self.title, Unset):
            title = UNSET
        else:
            title = self.title

        url: None | str | Unset
        if isinstance(self.url, Unset):
            url = UNSET
        else:
            url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "book_number": book_number,
                "chars": chars,
                "chunks": chunks,
                "content_type": content_type,
                "created_at": created_at,
                "embedded": embedded,
                "failed": failed,
                "filename": filename,
                "id": id,
                "metadata": metadata,
                "pending": pending,
                "sha256": sha256,
                "updated_at": updated_at,
                "version": version,
                "world_id": world_id,
            }
        )
        if key is not UNSET:
            field_dict["key"] = key
        if pending_version is not UNSET:
            field_dict["pending_version"] = pending_version
        if title is not UNSET:
            field_dict["title"] = title
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pending_version import PendingVersion
        from ..models.source_metadata import SourceMetadata

        d = dict(src_dict)
        book_number = d.pop("book_number")

        chars = d.pop("chars")

        chunks = d.pop("chunks")

        content_type = d.pop("content_type")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        embedded = d.pop("embedded")

        failed = d.pop("failed")

        filename = d.pop("filename")

        id = UUID(d.pop("id"))

        metadata = SourceMetadata.from_dict(d.pop("metadata"))

        pending = d.pop("pending")

        sha256 = d.pop("sha256")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        version = d.pop("version")

        world_id = UUID(d.pop("world_id"))

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        def _parse_pending_version(data: object) -> None | PendingVersion | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                pending_version_type_0 = PendingVersion.from_dict(data)

                return pending_version_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PendingVersion | Unset, data)

        pending_version = _parse_pending_version(d.pop("pending_version", UNSET))

        def _parse_title(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        title = _parse_title(d.pop("title", UNSET))

        def _parse_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        url = _parse_url(d.pop("url", UNSET))

        source = cls(
            book_number=book_number,
            chars=chars,
            chunks=chunks,
            content_type=content_type,
            created_at=created_at,
            embedded=embedded,
            failed=failed,
            filename=filename,
            id=id,
            metadata=metadata,
            pending=pending,
            sha256=sha256,
            updated_at=updated_at,
            version=version,
            world_id=world_id,
            key=key,
            pending_version=pending_version,
            title=title,
            url=url,
        )

        source.additional_properties = d
        return source

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
