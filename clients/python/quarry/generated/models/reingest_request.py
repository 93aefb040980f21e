from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chunking_request import ChunkingRequest
    from ..models.embedding_request import EmbeddingRequest
    from ..models.reingest_gate_request import ReingestGateRequest


T = TypeVar("T", bound="ReingestRequest")


@_attrs_define
class ReingestRequest:
    """A re-ingest: the new embedding and/or chunking profile. What is absent stays as it is.

    Attributes:
        chunking (ChunkingRequest | None | Unset):
        embedding (EmbeddingRequest | None | Unset):
        gate (None | ReingestGateRequest | Unset):
    """

    chunking: ChunkingRequest | None | Unset = UNSET
    embedding: EmbeddingRequest | None | Unset = UNSET
    gate: None | ReingestGateRequest | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.chunking_request import ChunkingRequest
        from ..models.embedding_request import EmbeddingRequest
        from ..models.reingest_gate_request import ReingestGateRequest

        chunking: dict[str, Any] | None | Unset
        if isinstance(self.chunking, Unset):
            chunking = UNSET
        elif isinstance(self.chunking, ChunkingRequest):
            chunking = self.chunking.to_dict()
        else:
            chunking = self.chunking

        embedding: dict[str, Any] | None | Unset
        if isinstance(self.embedding, Unset):
            embedding = UNSET
        elif isinstance(self.embedding, EmbeddingRequest):
            embedding = self.embedding.to_dict()
        else:
            embedding = self.embedding

        gate: dict[str, Any] | None | Unset
        if isinstance(self.gate, Unset):
            gate = UNSET
        elif isinstance(self.gate, ReingestGateRequest):
            gate = self.gate.to_dict()
        else:
            gate = self.gate

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if chunking is not UNSET:
            field_dict["chunking"] = chunking
        if embedding is not UNSET:
            field_dict["embedding"] = embedding
        if gate is not UNSET:
            field_dict["gate"] = gate

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chunking_request import ChunkingRequest
        from ..models.embedding_request import EmbeddingRequest
        from ..models.reingest_gate_request import ReingestGateRequest

        d = dict(src_dict)

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

        def _parse_embedding(data: object) -> EmbeddingRequest | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                embedding_type_0 = EmbeddingRequest.from_dict(data)

                return embedding_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EmbeddingRequest | None | Unset, data)

        embedding = _parse_embedding(d.pop("embedding", UNSET))

        def _parse_gate(data: object) -> None | ReingestGateRequest | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                gate_type_0 = ReingestGateRequest.from_dict(data)

                return gate_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReingestGateRequest | Unset, data)

        gate = _parse_gate(d.pop("gate", UNSET))

        reingest_request = cls(
            chunking=chunking,
            embedding=embedding,
            gate=gate,
        )

        return reingest_request
