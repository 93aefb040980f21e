from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="AddSourceRequest")


@_attrs_define
class AddSourceRequest:
    """
    Attributes:
        filename (str): At most 255 characters as sent, no control characters; a path keeps its last segment,
            which must not be blank. Stored without surrounding whitespace. Example: ch1.md.
        text (str): The document's text: not only whitespace, no NUL character (U+0000).
        content_type (None | str | Unset): `text/plain`, `text/markdown` or `text/html` (converted to text), in any
            case, with
            parameters or not (`text/html; charset=utf-8`); guessed from the filename when absent
            or blank. Example: text/markdown.
        key (None | str | Unset): Your name for the source (a path, URL or document id): 1 to 1024 characters, no
            control
            characters, unique in the world and taken exactly as sent. Sending a key the world has
            already replaces that source (a new version) instead of adding another. Example: guides/install.md.
        metadata (Metadata | None | Unset):
        title (None | str | Unset): A title for the source (1 to 1000 characters as sent, not only whitespace, no
            control
            characters: one line); shown on the source and on its retrieval hits, without
            surrounding whitespace. Example: The Northern Isles, chapter 1.
        url (None | str | Unset): Where the source comes from: an absolute `http` or `https` URL of at most 2048
            characters, taken as sent (see the pattern: a host name or IP address, no user
            information, no whitespace or control characters). Example: https://example.com/isles/ch1.
    """

    filename: str
    text: str
    content_type: None | str | Unset = UNSET
    key: None | str | Unset = UNSET
    metadata: Metadata | None | Unset = UNSET
    title: None | str | Unset = UNSET
    url: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata import Metadata

        filename = self.filename

        text = self.text

        content_type: None | str | Unset
        if isinstance(self.content_type, Unset):
            content_type = UNSET
        else:
            content_type = self.content_type

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, Metadata):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

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

        field_dict.update(
            {
                "filename": filename,
                "text": text,
            }
        )
        if content_type is not UNSET:
            field_dict["content_type"] = content_type
        if key is not UNSET:
            field_dict["key"] = key
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if title is not UNSET:
            field_dict["title"] = title
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.metadata import Metadata

        d = dict(src_dict)
        filename = d.pop("filename")

        text = d.pop("text")

        def _parse_content_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        content_type = _parse_content_type(d.pop("content_type", UNSET))

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        def _parse_metadata(data: object) -> Metadata | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = Metadata.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Metadata | None | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

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

        add_source_request = cls(
            filename=filename,
            text=text,
            content_type=content_type,
            key=key,
            metadata=metadata,
            title=title,
            url=url,
        )

        return add_source_request
