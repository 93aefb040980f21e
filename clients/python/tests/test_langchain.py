"""The LangChain retriever in a chain that formats a prompt (no LLM is called)."""

from __future__ import annotations

import asyncio

from conftest import LIGHTHOUSE
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

from quarry import World
from quarry.langchain import QuarryRetriever


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['citation']}] {d.page_content}" for d in docs)


def chain_for(retriever: QuarryRetriever):
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from these passages and cite them by number:\n\n{context}"),
            ("human", "{question}"),
        ]
    )
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt


def test_documents_carry_the_citation_fields(lighthouse: World) -> None:
    retriever = QuarryRetriever(world=lighthouse, top_k=2)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("Who climbs the tower every evening?")
    assert len(docs) == 2
    best = docs[0]
    assert best.page_content == LIGHTHOUSE
    meta = best.metadata
    assert (meta["filename"], meta["title"], meta["url"]) == (
        "lighthouse.md",
        "The lighthouse",
        "https://example.com/isles/lighthouse",
    )
    assert (meta["char_start"], meta["char_end"], meta["page"], meta["citation"]) == (
        0,
        len(LIGHTHOUSE),
        None,
        1,
    )
    assert meta["source_id"] and 0 < meta["score"] <= 1
    assert meta["source_metadata"] == {"island": "Skerry"}


def test_chain_formats_a_prompt_holding_the_passage(lighthouse: World) -> None:
    chain = chain_for(QuarryRetriever(world=lighthouse, top_k=2))
    prompt = chain.invoke("Who climbs the tower every evening?")
    messages = prompt.to_messages()
    assert f"[1] {LIGHTHOUSE}" in messages[0].content
    assert messages[1].content == "Who climbs the tower every evening?"


def test_async_chain_and_retriever(lighthouse: World) -> None:
    retriever = QuarryRetriever(world=lighthouse, top_k=2, expanded=True)

    async def run():
        docs = await retriever.ainvoke("Who climbs the tower every evening?")
        prompt = await chain_for(retriever).ainvoke("Who climbs the tower every evening?")
        return docs, prompt

    docs, prompt = asyncio.run(run())
    assert docs[0].page_content == LIGHTHOUSE
    assert LIGHTHOUSE in prompt.to_string()
    # A second event loop works too (each async call opens its own connection).
    assert asyncio.run(retriever.ainvoke("Who climbs the tower every evening?"))[0].page_content == LIGHTHOUSE
