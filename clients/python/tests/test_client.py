"""The hand-written layer against a real server: worlds, text, uploads, folder sync, jobs,
retrieval and errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from conftest import LIGHTHOUSE, unique

from quarry import Quarry, QuarryError, World
from quarry.generated.api.worlds import create_world
from quarry.generated.models import CreateWorldRequest, Job, JobStatus, RetrieveResponse


def test_world_is_created_when_missing_then_found_by_name_and_id(client: Quarry) -> None:
    name = unique("Docs")
    with pytest.raises(QuarryError) as missing:
        client.world(name)
    assert (missing.value.status, missing.value.code) == (404, "world_not_found")

    created = client.world(name, create=True, provider="local", model="all-MiniLM-L6-v2")
    assert created.name == name
    assert created.info.embedding.dimensions == 384

    assert client.world(name).id == created.id
    assert client.world(str(created.id)).id == created.id
    assert client.world(name, create=True).id == created.id  # found, not created again
    assert [w.id for w in client.worlds() if w.name == name] == [created.id]


def test_a_name_two_worlds_share_is_ambiguous(client: Quarry) -> None:
    name = unique("Twin")
    first = client.world(name, create=True)
    # A second world of the same name, made through the generated client.
    body = CreateWorldRequest.from_dict({"name": name, "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}})
    second = create_world.sync(client=client.api, body=body)
    with pytest.raises(LookupError) as ambiguous:
        client.world(name)
    assert str(first.id) in str(ambiguous.value) and str(second.id) in str(ambiguous.value)
    assert client.world(str(second.id)).id == second.id


def test_unknown_world_id_raises_world_not_found(client: Quarry) -> None:
    with pytest.raises(QuarryError) as error:
        client.world(str(uuid.uuid4()))
    assert error.value.status == 404
    assert error.value.code == "world_not_found"
    assert error.value.message


def test_invalid_retrieval_settings_raise_with_the_field(lighthouse: World) -> None:
    with pytest.raises(QuarryError) as error:
        lighthouse.retrieve("Who climbs the tower?", top_k=5000)
    assert error.value.status == 400
    assert error.value.code == "invalid_retrieval_settings"
    assert error.value.details == {"field": "top_k"} or "top_k" in error.value.message


def test_add_text_then_retrieve_finds_the_passage(client: Quarry) -> None:
    docs = client.world(unique("Docs"), create=True)
    seen: list[Job] = []
    accepted = docs.add_text(
        LIGHTHOUSE,
        filename="lighthouse.md",
        title="The lighthouse",
        key="isles/lighthouse.md",
        metadata={"island": "Skerry"},
        progress=seen.append,
    )
    assert accepted.job.status == JobStatus.COMPLETED
    assert seen and seen[-1].status == JobStatus.COMPLETED

    answer = docs.retrieve("Who climbs the tower every evening?", top_k=3)
    assert isinstance(answer, RetrieveResponse)
    best = answer.results[0]
    assert best.chunk_text == LIGHTHOUSE
    assert (best.source_filename, best.title) == ("lighthouse.md", "The lighthouse")
    assert best.metadata.additional_properties == {"island": "Skerry"}
    assert answer.context.text.startswith("[1] ")
    assert "Morag Flett" in answer.context.text
    assert answer.context.citations[0].n == 1
    assert answer.context.citations[0].source_id == accepted.source.id

    [passage] = docs.passages("Who climbs the tower every evening?", top_k=1)
    assert (passage.text, passage.citation, passage.filename) == (LIGHTHOUSE, 1, "lighthouse.md")
    assert (passage.char_start, passage.char_end) == (0, len(LIGHTHOUSE))
    assert passage.metadata == {"island": "Skerry"}

    # The same key with the same text changes nothing: no new version, no job.
    again = docs.add_text(
        LIGHTHOUSE,
        filename="lighthouse.md",
        title="The lighthouse",
        key="isles/lighthouse.md",
        metadata={"island": "Skerry"},
    )
    assert again.outcome.value == "unchanged"
    assert again.source.id == accepted.source.id


def test_expanded_passages_follow_the_context(lighthouse: World) -> None:
    answer = lighthouse.retrieve("Who climbs the tower?", top_k=3)
    passages = lighthouse.passages("Who climbs the tower?", expanded=True, top_k=3)
    assert [p.citation for p in passages] == sorted({c.n for c in answer.context.citations})
    assert passages[0].text == LIGHTHOUSE
    assert passages[0].url == "https://example.com/isles/lighthouse"


def test_upload_a_file(client: Quarry, tmp_path: Path) -> None:
    docs = client.world(unique("Uploads"), create=True)
    path = tmp_path / "harbour.md"
    path.write_text("# Harbour\n\nThe harbour master of Kirkwall keeps a ledger of every whaling ship.\n")
    accepted = docs.upload(path, title="Harbour notes")
    assert accepted.source.filename == "harbour.md"
    assert accepted.source.content_type == "text/markdown"
    assert accepted.job.status == JobStatus.COMPLETED

    [hit] = docs.retrieve("Who records the whaling ships?", top_k=1).results
    assert "harbour master of Kirkwall" in hit.chunk_text
    assert hit.title == "Harbour notes"


def test_sync_folder_adds_replaces_in_place_and_deletes(client: Quarry, tmp_path: Path) -> None:
    docs = client.world(unique("Folder"), create=True)
    folder = tmp_path / "notes"
    (folder / "birds").mkdir(parents=True)
    (folder / "puffins.md").write_text("Puffins nest in burrows on the cliffs of Westray from April.\n")
    (folder / "birds" / "skuas.txt").write_text("Great skuas dive at walkers who come near their nests.\n")
    (folder / ".hidden.md").write_text("Never synced.\n")

    first = docs.sync_folder(folder)
    assert sorted(first.created) == ["birds/skuas.txt", "puffins.md"]
    assert all(job.status == JobStatus.COMPLETED for job in first.jobs)
    skuas = docs.source("birds/skuas.txt")
    assert (skuas.version, skuas.filename) == (1, "skuas.txt")

    (folder / "birds" / "skuas.txt").write_text(
        "Arctic terns defend their nests by diving at intruders' heads.\n"
    )
    second = docs.sync_folder(folder)
    assert (second.replaced, second.unchanged, second.created) == (["birds/skuas.txt"], ["puffins.md"], [])
    replaced = docs.source("birds/skuas.txt")
    assert replaced.id == skuas.id  # the same source, a new version
    assert replaced.version == 2
    [hit] = docs.retrieve("Which birds defend their nests?", top_k=1).results
    assert "Arctic terns" in hit.chunk_text

    (folder / "puffins.md").unlink()
    kept = docs.sync_folder(folder)
    assert kept.deleted == [] and "puffins.md" in {s.key for s in docs.sources()}
    pruned = docs.sync_folder(folder, delete=True)
    assert pruned.deleted == ["puffins.md"]
    assert [s.key for s in docs.sources()] == ["birds/skuas.txt"]
    with pytest.raises(QuarryError) as gone:
        docs.source("puffins.md")
    assert gone.value.code == "source_not_found"


def test_unauthorized_token(server) -> None:
    with Quarry(server.url, "not-a-token") as q, pytest.raises(QuarryError) as error:
        q.worlds()
    assert (error.value.status, error.value.code) == (401, "unauthorized")


def test_error_bodies_of_other_shapes_keep_their_text() -> None:
    known = QuarryError.from_response(
        409, b'{"error": {"code": "a_code_this_client_does_not_know", "message": "m", "details": {"x": 1}}}'
    )
    assert (known.status, known.code, known.message, known.details) == (
        409,
        "a_code_this_client_does_not_know",
        "m",
        {"x": 1},
    )
    proxy = QuarryError.from_response(502, b"<html>Bad gateway</html>")
    assert (proxy.status, proxy.code, proxy.message) == (502, None, "<html>Bad gateway</html>")
    assert str(proxy) == "HTTP 502 error: <html>Bad gateway</html>"
