from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.update_world_request_chunking_type_0 import (
        UpdateWorldRequestChunkingType0,
    )
    from ..models.update_world_request_embedding_type_0 import (
        UpdateWorldRequestEmbeddingType0,
    )


T = TypeVar("T", bound="UpdateWorldRequest")


@_attrs_define
class UpdateWorldRequest:
    """
    Attributes:
        chunking (None | Unset | UpdateWorldRequestChunkingType0):
        embedding (None | Unset | UpdateWorldRequestEmbeddingType0):
        hybrid (bool | None | Unset): `true` alone turns a dense world hybrid.
        name (None | str | Unset): The new name, as `name` of a new world. Example: Aerth.
    """

    chunking: None | Unset | UpdateWorldRequestChunkingType0 = UNSET
    embedding: None | Unset | UpdateWorldRequestEmbeddingType0 = UNSET
    hybrid: bool | None | Unset = UNSET
    name: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.update_world_request_chunking_type_0 import (
            UpdateWorldRequestChunkingType0,
        )
        from ..models.update_world_request_embedding_type_0 import (
            UpdateWorldRequestEmbeddingType0,
        )

        chunking: dict[str, Any] | None | Unset
        if isinstance(self.chunking, Unset):
            chunking = UNSET
        elif isinstance(self.chunking, UpdateWorldRequestChunkingType0):
            chunking = self.chunking.to_dict()
        else:
            chunking = self.chunking

        embedding: dict[str, Any] | None | Unset
        if isinstance(self.embedding, Unset):
            embedding = UNSET
        elif isinstance(self.embedding, UpdateWorldRequestEmbeddingType0):
            embedding = self.embedding.to_dict()
        else:
            embedding = self.embedding

        hybrid: bool | None | Unset
        if isinstance(self.hybrid, Unset):
            hybrid = UNSET
        else:
            hybrid = self.hybrid

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if chunking is not UNSET:
            field_dict["chunking"] = chunking
        if embedding is not UNSET:
            field_dict["embedding"] = embedding
        if hybrid is not UNSET:
            field_dict["hybrid"] = hybrid
        if name is not UNSET:
            field_dict["name"] = name

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.update_world_request_chunking_type_0 import (
            UpdateWorldRequestChunkingType0,
        )
        from ..models.update_world_request_embedding_type_0 import (
            UpdateWorldRequestEmbeddingType0,
        )

        d = dict(src_dict)

        def _parse_chunking(
            data: object,
        ) -> None | Unset | UpdateWorldRequestChunkingType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                chunking_type_0 = UpdateWorldRequestChunkingType0.from_dict(data)

                return chunking_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UpdateWorldRequestChunkingType0, data)

        chunking = _parse_chunking(d.pop("chunking", UNSET))

        def _parse_embedding(
            data: object,
        ) -> None | Unset | UpdateWorldRequestEmbeddingType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                embedding_type_0 = UpdateWorldRequestEmbeddingType0.from_dict(data)

                return embedding_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UpdateWorldRequestEmbeddingType0, data)

        embedding = _parse_embedding(d.pop("embedding", UNSET))

        def _parse_hybrid(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        hybrid = _parse_hybrid(d.pop("hybrid", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        update_world_request = cls(
            chunking=chunking,
            embedding=embedding,
            hybrid=hybrid,
            name=name,
        )

        update_world_request.additional_properties = d
        return update_world_request

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
