from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.check import Check
    from ..models.error_detail import ErrorDetail


T = TypeVar("T", bound="Readiness")


@_attrs_define
class Readiness:
    """Readiness, per dependency. When not ready, `error` carries the same structured error as
    every other non-2xx answer: `store_unavailable` when the database is down (whatever the
    vector store), else `vector_store_unavailable`.

        Attributes:
            status (str): `ready` or `unavailable`.
            store (Check): The state of one dependency.
            vectors (Check): The state of one dependency.
            error (ErrorDetail | None | Unset):
    """

    status: str
    store: Check
    vectors: Check
    error: ErrorDetail | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.error_detail import ErrorDetail

        status = self.status

        store = self.store.to_dict()

        vectors = self.vectors.to_dict()

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, ErrorDetail):
            error = self.error.to_dict()
        else:
            error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "store": store,
                "vectors": vectors,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.check import Check
        from ..models.error_detail import ErrorDetail

        d = dict(src_dict)
        status = d.pop("status")

        store = Check.from_dict(d.pop("store"))

        vectors = Check.from_dict(d.pop("vectors"))

        def _parse_error(data: object) -> ErrorDetail | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_0 = ErrorDetail.from_dict(data)

                return error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ErrorDetail | None | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        readiness = cls(
            status=status,
            store=store,
            vectors=vectors,
            error=error,
        )

        readiness.additional_properties = d
        return readiness

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
