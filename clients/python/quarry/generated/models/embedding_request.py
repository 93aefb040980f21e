from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.embedding_provider import EmbeddingProvider
from ..types import UNSET, Unset

T = TypeVar("T", bound="EmbeddingRequest")


@_attrs_define
class EmbeddingRequest:
    """The embedding profile of a new world.

    Attributes:
        model (str): A model of the provider, as `GET /v1/models` lists them (`invalid_embedding_profile`
            otherwise). Example: gemini-embedding-001.
        provider (EmbeddingProvider): The providers a world can embed with.
        dimensions (int | None | Unset): Output size, within the model's `allowed_dimensions`; defaults to the model's
            default. Example: 768.
    """

    model: str
    provider: EmbeddingProvider
    dimensions: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        model = self.model

        provider = self.provider.value

        dimensions: int | None | Unset
        if isinstance(self.dimensions, Unset):
            dimensions = UNSET
        else:
            dimensions = self.dimensions

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "model": model,
                "provider": provider,
            }
        )
        if dimensions is not UNSET:
            field_dict["dimensions"] = dimensions

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        model = d.pop("model")

        provider = EmbeddingProvider(d.pop("provider"))

        def _parse_dimensions(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dimensions = _parse_dimensions(d.pop("dimensions", UNSET))

        embedding_request = cls(
            model=model,
            provider=provider,
            dimensions=dimensions,
        )

        return embedding_request
