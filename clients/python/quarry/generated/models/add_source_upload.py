from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from .. import types
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="AddSourceUpload")


@_attrs_define
class AddSourceUpload:
    """The `multipart/form-data` form of a source upload. A part left out is not given; an empty
    one is (there is no `null` in a form). Any other part is refused.

        Attributes:
            file (str): The document as UTF-8 text, as `text` in the JSON body (not only whitespace, no NUL
                character) — or a PDF's bytes, known by the content type `application/pdf`, or, when no
                content type is given, by a `.pdf` name or the `%PDF-` header. A PDF's text is read page
                by page (its chunks carry `page`); one without a text layer (a scan) is 422
                `no_text_layer`, a damaged or password-protected one 422 `unreadable_document`. Its
                part's filename and content type name the source unless the fields below are sent.
            content_type (str | Unset): Overrides the `file` part's content type: `text/plain`, `text/markdown` or
                `text/html`,
                as `content_type` in the JSON body, or `application/pdf`.
            filename (str | Unset): Overrides the `file` part's filename; as `filename` in the JSON body.
            key (str | Unset): As `key` in the JSON body.
            metadata (Metadata | Unset):
            title (str | Unset): As `title` in the JSON body.
            url (str | Unset): As `url` in the JSON body.
    """

    file: str
    content_type: str | Unset = UNSET
    filename: str | Unset = UNSET
    key: str | Unset = UNSET
    metadata: Metadata | Unset = UNSET
    title: str | Unset = UNSET
    url: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        file = self.file

        content_type = self.content_type

        filename = self.filename

        key = self.key

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        title = self.title

        url = self.url

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "file": file,
            }
        )
        if content_type is not UNSET:
            field_dict["content_type"] = content_type
        if filename is not UNSET:
            field_dict["filename"] = filename
        if key is not UNSET:
            field_dict["key"] = key
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if title is not UNSET:
            field_dict["title"] = title
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    def to_multipart(self) -> types.RequestFiles:
        files: types.RequestFiles = []

        files.append(("file", (None, str(self.file).encode(), "text/plain")))

        if not isinstance(self.content_type, Unset):
            files.append(
                ("content_type", (None, str(self.content_type).encode(), "text/plain"))
            )

        if not isinstance(self.filename, Unset):
            files.append(
                ("filename", (None, str(self.filename).encode(), "text/plain"))
            )

        if not isinstance(self.key, Unset):
            files.append(("key", (None, str(self.key).encode(), "text/plain")))

        if not isinstance(self.metadata, Unset):
            files.append(
                (
                    "metadata",
                    (
                        None,
                        json.dumps(self.metadata.to_dict()).encode(),
                        "application/json",
                    ),
                )
            )

        if not isinstance(self.title, Unset):
            files.append(("title", (None, str(self.title).encode(), "text/plain")))

        if not isinstance(self.url, Unset):
            files.append(("url", (None, str(self.url).encode(), "text/plain")))

        return files

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.metadata import Metadata

        d = dict(src_dict)
        file = d.pop("file")

        content_type = d.pop("content_type", UNSET)

        filename = d.pop("filename", UNSET)

        key = d.pop("key", UNSET)

        _metadata = d.pop("metadata", UNSET)
        metadata: Metadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = Metadata.from_dict(_metadata)

        title = d.pop("title", UNSET)

        url = d.pop("url", UNSET)

        add_source_upload = cls(
            file=file,
            content_type=content_type,
            filename=filename,
            key=key,
            metadata=metadata,
            title=title,
            url=url,
        )

        return add_source_upload
