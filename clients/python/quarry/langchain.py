"""A quarry world as a LangChain retriever (``pip install "quarry-client[langchain]"``).

>>> from quarry import Quarry
>>> from quarry.langchain import QuarryRetriever
>>> retriever = QuarryRetriever(world=Quarry(url, token).world("Docs"), top_k=4)
>>> docs = retriever.invoke("Who keeps the lighthouse?")

Each ``Document``'s ``page_content`` is a hit's chunk text (or, with ``expanded=True``, the
whole passage the context gives it) and its ``metadata`` holds ``source_id``, ``chunk_id``,
``filename``, ``title``, ``url``, ``page``, ``char_start``, ``char_end``, ``score``,
``citation`` (the passage's ``[n]`` in quarry's context) and ``source_metadata``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from ._client import Passage, World

__all__ = ["QuarryRetriever"]


def _document(passage: Passage) -> Document:
    return Document(page_content=passage.text, metadata=passage.as_metadata(), id=passage.chunk_id)


class QuarryRetriever(BaseRetriever):
    """Retrieves from one quarry world.

    ``top_k`` is the number of hits (``None``: the server's default); ``expanded`` gives one
    document per context passage instead of one per hit; ``settings`` are further retrieval
    fields as the API names them (``mode``, ``expand``, ``neighbors``, ``min_score``,
    ``filter``, ``max_context_tokens``, ...).
    """

    world: World
    top_k: int | None = 4
    expanded: bool = False
    settings: dict[str, Any] = Field(default_factory=dict)

    def _settings(self) -> dict[str, Any]:
        settings = dict(self.settings)
        if self.top_k is not None:
            settings.setdefault("top_k", self.top_k)
        return settings

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        passages = self.world.passages(query, expanded=self.expanded, **self._settings())
        return [_document(p) for p in passages]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        passages = await self.world.apassages(query, expanded=self.expanded, **self._settings())
        return [_document(p) for p in passages]
