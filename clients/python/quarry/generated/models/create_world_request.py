from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chunking_request import ChunkingRequest
    from ..models.embedding_request import EmbeddingRequest


T = TypeVar("T", bound="CreateWorldRequest")


@_attrs_define
class CreateWorldRequest:
    """
    Attributes:
        embedding (EmbeddingRequest): The embedding profile of a new world.
        name (str): 1 to 200 characters as sent, not only whitespace, no control characters (it is one
            line); stored without surrounding whitespace. Example: Aerth.
        chunking (ChunkingRequest | None | Unset):
        hybrid (bool | Unset): Store BM25 sparse vectors too, enabling `mode: hybrid` retrieval.
    """

    embedding: EmbeddingRequest
    name: str
    chunking: ChunkingRequest | None | Unset = UNSET
    hybrid: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.chunking_request import ChunkingRequest

        embedding = self.embedding.to_dict()

        name = self.name

        chunking: dict[str, Any] | None | Unset
        if isinstance(self.chunking, Unset):
            chunking = UNSET
        elif isinstance(self.chunking, ChunkingRequest):
            chunking = self.chunking.to_dict()
        else:
            chunking = self.chunking

        hybrid = self.hybrid

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "embedding": embedding,
                "name": name,
            }
        )
        if chunking is not UNSET:
            field_dict["chunking"] = chunking
        if hybrid is not UNSET:
            field_dict["hybrid"] = hybrid

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chunking_request import ChunkingRequest
        from ..models.embedding_request import EmbeddingRequest

        d = dict(src_dict)
        embedding = EmbeddingRequest.from_dict(d.pop("embedding"))

        name = d.pop("name")

        def _parse_chunking(data: object) -> ChunkingRequest | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                chunking_type_0 = ChunkingRequest.from_dict(data)

                return chunking_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChunkingRequest | None | Unset, data)

        chunking = _parse_chunking(d.pop("chunking", UNSET))

        hybrid = d.pop("hybrid", UNSET)

        create_world_request = cls(
            embedding=embedding,
            name=name,
            chunking=chunking,
            hybrid=hybrid,
        )

        return create_world_request
