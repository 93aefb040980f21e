from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.dimension_range import DimensionRange


T = TypeVar("T", bound="Model")


@_attrs_define
class Model:
    """
    Attributes:
        allowed_dimensions (DimensionRange): Inclusive range of output sizes a model supports.
        default_dimensions (int):
        max_chunk_tokens (int): Largest `chunking.max_tokens` a world on this model accepts: `max_input_tokens`, less
            what the model adds to every input (the local model's `[CLS]` and `[SEP]`).
        max_input_tokens (int): Exact per-input limit in the provider's own tokens.
        model (str):  Example: gemini-embedding-001.
        provider (str):  Example: google.
        document_mode (None | str | Unset): How documents are marked for the provider (`null`: symmetric model).
        query_mode (None | str | Unset): How queries are marked for the provider (`null`: symmetric model).
    """

    allowed_dimensions: DimensionRange
    default_dimensions: int
    max_chunk_tokens: int
    max_input_tokens: int
    model: str
    provider: str
    document_mode: None | str | Unset = UNSET
    query_mode: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        allowed_dimensions = self.allowed_dimensions.to_dict()

        default_dimensions = self.default_dimensions

        max_chunk_tokens = self.max_chunk_tokens

        max_input_tokens = self.max_input_tokens

        model = self.model

        provider = self.provider

        document_mode: None | str | Unset
        if isinstance(self.document_mode, Unset):
            document_mode = UNSET
        else:
            document_mode = self.document_mode

        query_mode: None | str | Unset
        if isinstance(self.query_mode, Unset):
            query_mode = UNSET
        else:
            query_mode = self.query_mode

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "allowed_dimensions": allowed_dimensions,
                "default_dimensions": default_dimensions,
                "max_chunk_tokens": max_chunk_tokens,
                "max_input_tokens": max_input_tokens,
                "model": model,
                "provider": provider,
            }
        )
        if document_mode is not UNSET:
            field_dict["document_mode"] = document_mode
        if query_mode is not UNSET:
            field_dict["query_mode"] = query_mode

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.dimension_range import DimensionRange

        d = dict(src_dict)
        allowed_dimensions = DimensionRange.from_dict(d.pop("allowed_dimensions"))

        default_dimensions = d.pop("default_dimensions")

        max_chunk_tokens = d.pop("max_chunk_tokens")

        max_input_tokens = d.pop("max_input_tokens")

        model = d.pop("model")

        provider = d.pop("provider")

        def _parse_document_mode(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        document_mode = _parse_document_mode(d.pop("document_mode", UNSET))

        def _parse_query_mode(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        query_mode = _parse_query_mode(d.pop("query_mode", UNSET))

        model = cls(
            allowed_dimensions=allowed_dimensions,
            default_dimensions=default_dimensions,
            max_chunk_tokens=max_chunk_tokens,
            max_input_tokens=max_input_tokens,
            model=model,
            provider=provider,
            document_mode=document_mode,
            query_mode=query_mode,
        )

        model.additional_properties = d
        return model

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
