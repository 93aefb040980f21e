"""A quarry world as a LlamaIndex retriever (``pip install "quarry-client[llamaindex]"``).

>>> from quarry import Quarry
>>> from quarry.llamaindex import QuarryRetriever
>>> retriever = QuarryRetriever(Quarry(url, token).world("Docs"), top_k=4)
>>> nodes = retriever.retrieve("Who keeps the lighthouse?")

Each ``NodeWithScore`` holds a ``TextNode`` whose text is a hit's chunk text (or, with
``expanded=True``, the whole passage the context gives it), whose id is the chunk id, and whose
metadata holds ``source_id``, ``chunk_id``, ``filename``, ``title``, ``url``, ``page``,
``char_start``, ``char_end``, ``score``, ``citation`` and ``source_metadata``; only
``filename``, ``title``, ``url`` and ``page`` are shown to the LLM and the embedder.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ._client import Passage, World

__all__ = ["QuarryRetriever"]

_SHOWN = {"filename", "title", "url", "page"}


def _node(passage: Passage) -> NodeWithScore:
    metadata = passage.as_metadata()
    hidden = [name for name in metadata if name not in _SHOWN]
    node = TextNode(
        id_=passage.chunk_id,
        text=passage.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
        start_char_idx=passage.char_start,
        end_char_idx=passage.char_end,
    )
    return NodeWithScore(node=node, score=passage.score)


class QuarryRetriever(BaseRetriever):
    """Retrieves from one quarry world.

    ``top_k`` is the number of hits (``None``: the server's default); ``expanded`` gives one
    node per context passage instead of one per hit; ``settings`` are further retrieval fields
    as the API names them (``mode``, ``expand``, ``neighbors``, ``min_score``, ``filter``, ...).
    """

    def __init__(
        self,
        world: World,
        *,
        top_k: int | None = 4,
        expanded: bool = False,
        settings: dict[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.world = world
        self.top_k = top_k
        self.expanded = expanded
        self.settings = dict(settings or {})
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _settings(self) -> dict[str, Any]:
        settings = dict(self.settings)
        if self.top_k is not None:
            settings.setdefault("top_k", self.top_k)
        return settings

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        passages = self.world.passages(query_bundle.query_str, expanded=self.expanded, **self._settings())
        return [_node(p) for p in passages]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        passages = await self.world.apassages(
            query_bundle.query_str, expanded=self.expanded, **self._settings()
        )
        return [_node(p) for p in passages]
