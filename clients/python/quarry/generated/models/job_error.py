from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="JobError")


@_attrs_define
class JobError:
    """
    Attributes:
        book_number (int):
        chunk_number (int):
        code (str):
        message (str):
    """

    book_number: int
    chunk_number: int
    code: str
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        book_number = self.book_number

        chunk_number = self.chunk_number

        code = self.code

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "book_number": book_number,
                "chunk_number": chunk_number,
                "code": code,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        book_number = d.pop("book_number")

        chunk_number = d.pop("chunk_number")

        code = d.pop("code")

        message = d.pop("message")

        job_error = cls(
            book_number=book_number,
            chunk_number=chunk_number,
            code=code,
            message=message,
        )

        job_error.additional_properties = d
        return job_error

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
