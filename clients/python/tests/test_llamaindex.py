"""The LlamaIndex retriever in a query engine answered by MockLLM (no real LLM)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import LIGHTHOUSE
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode

from quarry import World
from quarry.llamaindex import QuarryRetriever


def test_query_engine_cites_the_passage(lighthouse: World) -> None:
    retriever = QuarryRetriever(lighthouse, top_k=2)
    assert isinstance(retriever, BaseRetriever)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("Who climbs the tower every evening?")

    best = response.source_nodes[0]
    assert best.node.get_content() == LIGHTHOUSE
    assert best.node.metadata["filename"] == "lighthouse.md"
    assert best.node.metadata["citation"] == 1
    assert best.score == pytest.approx(best.node.metadata["score"])
    assert best.node.node_id == best.node.metadata["chunk_id"]
    # The LLM sees the passage with its title, not the offsets.
    shown = best.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: The lighthouse" in shown and "char_start" not in shown
    assert str(response)  # MockLLM's answer, made from the prompt


def test_async_retrieve(lighthouse: World) -> None:
    retriever = QuarryRetriever(lighthouse, top_k=1)
    nodes = asyncio.run(retriever.aretrieve("Who climbs the tower every evening?"))
    assert [n.node.get_content() for n in nodes] == [LIGHTHOUSE]
