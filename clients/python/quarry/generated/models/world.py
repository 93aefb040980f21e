from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.chunking_profile import ChunkingProfile
    from ..models.embedding_profile import EmbeddingProfile
    from ..models.world_stats import WorldStats


T = TypeVar("T", bound="World")


@_attrs_define
class World:
    """
    Attributes:
        chunking (ChunkingProfile):
        collection (str): The vector collection holding this world's chunk vectors.
        created_at (datetime.datetime):
        embedding (EmbeddingProfile):
        hybrid (bool):
        id (UUID):
        name (str):
        stats (WorldStats):
        updated_at (datetime.datetime):
    """

    chunking: ChunkingProfile
    collection: str
    created_at: datetime.datetime
    embedding: EmbeddingProfile
    hybrid: bool
    id: UUID
    name: str
    stats: WorldStats
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        chunking = self.chunking.to_dict()

        collection = self.collection

        created_at = self.created_at.isoformat()

        embedding = self.embedding.to_dict()

        hybrid = self.hybrid

        id = str(self.id)

        name = self.name

        stats = self.stats.to_dict()

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "chunking": chunking,
                "collection": collection,
                "created_at": created_at,
                "embedding": embedding,
                "hybrid": hybrid,
                "id": id,
                "name": name,
                "stats": stats,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.chunking_profile import ChunkingProfile
        from ..models.embedding_profile import EmbeddingProfile
        from ..models.world_stats import WorldStats

        d = dict(src_dict)
        chunking = ChunkingProfile.from_dict(d.pop("chunking"))

        collection = d.pop("collection")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        embedding = EmbeddingProfile.from_dict(d.pop("embedding"))

        hybrid = d.pop("hybrid")

        id = UUID(d.pop("id"))

        name = d.pop("name")

        stats = WorldStats.from_dict(d.pop("stats"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        world = cls(
            chunking=chunking,
            collection=collection,
            created_at=created_at,
            embedding=embedding,
            hybrid=hybrid,
            id=id,
            name=name,
            stats=stats,
            updated_at=updated_at,
        )

        world.additional_properties = d
        return world

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
