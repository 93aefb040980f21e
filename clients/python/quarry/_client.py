"""The hand-written layer over the generated client: a ``Quarry`` connection and ``World``
handles that add text and files, keep a folder in sync, follow ingest jobs to their end and
retrieve passages with their citations."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from ._errors import QuarryError, QuarryJobError
from .generated import AuthenticatedClient
from .generated.api.jobs import get_job
from .generated.api.retrieval import retrieve as retrieve_op
from .generated.api.sources import (
    add_source,
    delete_source_by_key,
    get_source_by_key,
    list_sources,
)
from .generated.api.worlds import create_world, delete_world, get_world, list_worlds
from .generated.models import (
    AddSourceRequest,
    CreateWorldRequest,
    Job,
    JobStatus,
    RetrieveRequest,
    RetrieveResponse,
    Source,
    SourceAccepted,
)
from .generated.models import World as WorldModel
from .generated.types import Response, Unset

#: Called with the job's latest state each time a followed job moves.
Progress = Callable[[Job], None]

_FINAL = {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED}

# The file part's content type by extension; quarry takes these four.
_CONTENT_TYPES = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
}


def _checked(response: Response[Any] | httpx.Response) -> Any:
    """The parsed body of a 2xx answer; a ``QuarryError`` for any other."""
    status = int(response.status_code)
    if status >= 400:
        raise QuarryError.from_response(status, response.content)
    if isinstance(response, httpx.Response):
        return response.json() if response.content else None
    return response.parsed


def _content_type(path: Path) -> str:
    return _CONTENT_TYPES.get(path.suffix.lower(), "text/plain")


def _plain(value: Any) -> Any:
    """A generated model's optional field as plain Python: ``None`` for unset."""
    return None if isinstance(value, Unset) else value


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None


class Quarry:
    """A connection to a quarry server.

    >>> q = Quarry("http://127.0.0.1:8080", "my-token")
    >>> docs = q.world("Docs", create=True)

    ``api`` is the generated ``AuthenticatedClient`` for every operation this layer does not
    wrap (``quarry.generated.api.<tag>.<operation>.sync(..., client=q.api)``).
    """

    def __init__(self, url: str, token: str, *, timeout: float = 60.0, poll_interval: float = 0.25) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self.poll_interval = poll_interval
        self.api = self._new_api()
        self._http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(timeout)
        )
        self.api.set_httpx_client(self._http)

    def __repr__(self) -> str:
        return f"Quarry({self.url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the HTTP connections."""
        self._http.close()

    def _new_api(self) -> AuthenticatedClient:
        return AuthenticatedClient(base_url=self.url, token=self._token, timeout=httpx.Timeout(self._timeout))

    def _async_api(self) -> AuthenticatedClient:
        # A fresh client per call: an httpx.AsyncClient belongs to the event loop it was first
        # used on, and callers (LangChain, LlamaIndex, asyncio.run) may use a new loop each time.
        return self._new_api()

    # ---- worlds ----

    def worlds(self) -> list[WorldModel]:
        """Every world the token can see (all pages)."""
        found: list[WorldModel] = []
        offset = 0
        while True:
            page = _checked(list_worlds.sync_detailed(client=self.api, offset=offset, limit=1000))
            found.extend(page.worlds)
            next_offset = _plain(page.next_offset)
            if next_offset is None or not page.worlds:
                return found
            offset = next_offset

    def world(
        self,
        name_or_id: str | uuid.UUID,
        *,
        create: bool = False,
        provider: str = "local",
        model: str = "all-MiniLM-L6-v2",
        dimensions: int | None = None,
        hybrid: bool | None = None,
        chunking: Mapping[str, Any] | None = None,
    ) -> World:
        """The world with this id or name.

        A UUID is looked up by id (``QuarryError`` ``world_not_found`` when there is none).
        A name must match exactly one world; when none does, ``create=True`` creates it with
        this embedding profile (``provider``, ``model``, ``dimensions``; ``hybrid`` stores
        BM25 vectors too, ``chunking`` sets ``max_tokens``/``overlap_tokens``), otherwise it
        is ``QuarryError`` ``world_not_found`` (status 404, as the server's). The profile is
        only used to create: an existing world keeps its own.
        """
        as_id = name_or_id if isinstance(name_or_id, uuid.UUID) else _as_uuid(str(name_or_id))
        if as_id is not None:
            return World(self, _checked(get_world.sync_detailed(as_id, client=self.api)))
        name = str(name_or_id).strip()
        # The server filters by name (two are enough to know the name is ambiguous).
        page = _checked(list_worlds.sync_detailed(client=self.api, name=name, limit=2))
        matches = [w for w in page.worlds if w.name == name]
        if len(matches) > 1:
            ids = ", ".join(str(w.id) for w in matches)
            raise LookupError(f"more than one world is named {name!r} ({ids}, ...): pass an id")
        if matches:
            return World(self, matches[0])
        if not create:
            raise QuarryError(404, "world_not_found", f"no world is named {name!r}")
        embedding: dict[str, Any] = {"provider": provider, "model": model}
        if dimensions is not None:
            embedding["dimensions"] = dimensions
        body: dict[str, Any] = {"name": name, "embedding": embedding}
        if hybrid is not None:
            body["hybrid"] = hybrid
        if chunking is not None:
            body["chunking"] = dict(chunking)
        request = CreateWorldRequest.from_dict(body)
        return World(self, _checked(create_world.sync_detailed(client=self.api, body=request)))

    # ---- jobs ----

    def job(self, job_id: str | uuid.UUID) -> Job:
        return _checked(get_job.sync_detailed(uuid.UUID(str(job_id)), client=self.api))

    def wait(
        self,
        jobs: Job | list[Job],
        *,
        progress: Progress | None = None,
        timeout: float | None = 600.0,
    ) -> list[Job]:
        """Follows jobs (polling ``GET /v1/jobs/{id}``) until each is final; calls ``progress``
        with a job's state each time its status or counts change. Raises ``QuarryJobError`` for
        a job that ends ``failed`` or ``cancelled``, ``TimeoutError`` past ``timeout`` seconds."""
        pending = [jobs] if isinstance(jobs, Job) else list(jobs)
        deadline = None if timeout is None else time.monotonic() + timeout
        last: dict[Any, Any] = {}
        done: dict[Any, Job] = {}
        while True:
            for job in pending:
                if job.id in done:
                    continue
                current = job if job.status in _FINAL else self.job(job.id)
                seen = (current.status, current.counts.embedded, current.counts.failed, current.counts.total)
                if progress is not None and last.get(job.id) != seen:
                    progress(current)
                last[job.id] = seen
                if current.status in _FINAL:
                    if current.status != JobStatus.COMPLETED:
                        raise QuarryJobError(current)
                    done[job.id] = current
            if len(done) == len(pending):
                return [done[job.id] for job in pending]
            if deadline is not None and time.monotonic() > deadline:
                moving = [str(job.id) for job in pending if job.id not in done]
                raise TimeoutError(f"jobs still running after {timeout} s: {', '.join(moving)}")
            time.sleep(self.poll_interval)


@dataclass
class SyncReport:
    """What ``World.sync_folder`` did, by source key."""

    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)


@dataclass
class Passage:
    """One retrieved passage, ready to cite.

    ``text`` is the hit's chunk text, or with ``expanded=True`` the whole passage the context
    holds for it (its neighbours or parent section); ``citation`` is its ``[n]`` in
    ``context.text`` (``None`` for a hit the context budget left out). ``score``,
    ``filename``, ``title``, ``url`` and ``metadata`` come from the best hit; a full-context
    answer (``mode="full"``) has no hits, so they are ``None``/empty there.
    """

    text: str
    citation: int | None
    source_id: str
    chunk_id: str
    score: float | None
    filename: str | None
    title: str | None
    url: str | None
    page: int | None
    char_start: int
    char_end: int
    metadata: dict[str, str]

    def as_metadata(self) -> dict[str, Any]:
        """The fields a framework document carries (everything but the text)."""
        return {
            "source_id": self.source_id,
            "chunk_id": self.chunk_id,
            "filename": self.filename,
            "title": self.title,
            "url": self.url,
            "page": self.page,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "score": self.score,
            "citation": self.citation,
            "source_metadata": dict(self.metadata),
        }


def passages_of(answer: RetrieveResponse, *, expanded: bool = False) -> list[Passage]:
    """The passages of a retrieval answer: one per hit in rank order (``expanded=False``), or
    one per ``[n]`` passage of the context in its order (``expanded=True``)."""
    citations = answer.context.citations
    if not expanded:
        out = []
        for index, hit in enumerate(answer.results):
            own = [c for c in citations if _plain(c.result_index) == index]
            exact = [c for c in own if c.chunk_id == hit.chunk_id]
            cited = (exact or own or [None])[0]
            out.append(
                Passage(
                    text=hit.chunk_text,
                    citation=None if cited is None else cited.n,
                    source_id=str(hit.source_id),
                    chunk_id=str(hit.chunk_id),
                    score=hit.score,
                    filename=hit.source_filename,
                    title=_plain(hit.title),
                    url=_plain(hit.url),
                    page=_plain(hit.page),
                    char_start=hit.char_start,
                    char_end=hit.char_end,
                    metadata=dict(hit.metadata.additional_properties),
                )
            )
        return out
    groups: dict[int, list[tuple[str, Any]]] = {}
    for text, cited in zip(answer.context.chunks, citations, strict=False):
        groups.setdefault(cited.n, []).append((text, cited))
    out = []
    for n, parts in groups.items():
        best = next((c for _, c in parts if _plain(c.result_index) is not None), None)
        hit = answer.results[best.result_index] if best is not None else None
        first = parts[0][1]
        same_source = [c for _, c in parts if c.source_id == first.source_id]
        out.append(
            Passage(
                text="\n\n".join(text for text, _ in parts),
                citation=n,
                source_id=str(first.source_id),
                chunk_id=str(hit.chunk_id if hit is not None else first.chunk_id),
                score=hit.score if hit is not None else None,
                filename=hit.source_filename if hit is not None else None,
                title=_plain(hit.title) if hit is not None else None,
                url=_plain(hit.url) if hit is not None else None,
                page=_plain(first.page),
                char_start=min(c.char_start for c in same_source),
                char_end=max(c.char_end for c in same_source),
                metadata=dict(hit.metadata.additional_properties) if hit is not None else {},
            )
        )
    return out


class World:
    """A handle on one world. ``info`` is its state when the handle was made (or last
    ``refresh``ed): ``quarry.generated.models.World``."""

    def __init__(self, client: Quarry, info: WorldModel) -> None:
        self.client = client
        self.info = info

    @property
    def id(self) -> uuid.UUID:
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        return f"World({self.name!r}, id={str(self.id)!r})"

    def refresh(self) -> World:
        self.info = _checked(get_world.sync_detailed(self.id, client=self.client.api))
        return self

    def delete(self) -> None:
        """Deletes the world with all its sources."""
        _checked(delete_world.sync_detailed(self.id, client=self.client.api))

    # ---- writing ----

    def _follow(
        self, accepted: SourceAccepted, wait: bool, progress: Progress | None, timeout: float | None
    ) -> SourceAccepted:
        job = _plain(accepted.job)
        if wait and job is not None:
            accepted.job = self.client.wait(job, progress=progress, timeout=timeout)[0]
        return accepted

    def add_text(
        self,
        text: str,
        *,
        filename: str | None = None,
        title: str | None = None,
        key: str | None = None,
        url: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
        wait: bool = True,
        progress: Progress | None = None,
        timeout: float | None = 600.0,
    ) -> SourceAccepted:
        """Adds ``text`` as a source and (``wait=True``) follows its job to the end.

        With ``key``, a source of that key is replaced in place (a new version) instead of a
        new one added; unchanged text and details answer ``outcome`` ``unchanged`` and no job.
        ``filename`` defaults to the key's last segment, else ``text.txt``; quarry guesses the
        format (plain, Markdown, HTML) from it unless ``content_type`` says.
        """
        if filename is None:
            filename = key.rstrip("/").rsplit("/", 1)[-1] if key else "text.txt"
        body: dict[str, Any] = {"filename": filename, "text": text}
        for name, value in (("title", title), ("key", key), ("url", url), ("content_type", content_type)):
            if value is not None:
                body[name] = value
        if metadata is not None:
            body["metadata"] = dict(metadata)
        accepted = _checked(
            add_source.sync_detailed(self.id, client=self.client.api, body=AddSourceRequest.from_dict(body))
        )
        return self._follow(accepted, wait, progress, timeout)

    def _multipart(
        self,
        path: Path,
        fields: Mapping[str, Any],
    ) -> list[tuple[str, tuple[str | None, bytes, str]]]:
        parts: list[tuple[str, tuple[str | None, bytes, str]]] = [
            ("file", (path.name, path.read_bytes(), fields.get("content_type") or _content_type(path)))
        ]
        for name, value in fields.items():
            if value is None or name == "content_type":
                continue
            encoded = json.dumps(dict(value)) if name == "metadata" else str(value)
            parts.append((name, (None, encoded.encode("utf-8"), "text/plain")))
        return parts

    def upload(
        self,
        path: str | Path,
        *,
        key: str | None = None,
        filename: str | None = None,
        title: str | None = None,
        url: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
        wait: bool = True,
        progress: Progress | None = None,
        timeout: float | None = 600.0,
    ) -> SourceAccepted:
        """Uploads a file (text, Markdown, HTML or PDF, sent as its bytes) as a source and
        (``wait=True``) follows its job. ``key`` replaces that source in place, as in
        ``add_text``. The content type comes from the extension unless given."""
        path = Path(path)
        fields = {
            "key": key,
            "filename": filename,
            "title": title,
            "url": url,
            "metadata": metadata,
            "content_type": content_type,
        }
        response = self.client._http.post(
            f"/v1/worlds/{self.id}/sources/upload", files=self._multipart(path, fields)
        )
        accepted = SourceAccepted.from_dict(_checked(response))
        return self._follow(accepted, wait, progress, timeout)

    def put_file(
        self,
        key: str,
        path: str | Path,
        *,
        wait: bool = True,
        progress: Progress | None = None,
        timeout: float | None = 600.0,
        **fields: Any,
    ) -> SourceAccepted:
        """Creates or replaces (in place, as a new version) the source ``key`` with a file's
        content: ``PUT /v1/worlds/{id}/sources/by-key``. ``fields``: ``title``, ``url``,
        ``metadata``, ``filename``, ``content_type``."""
        path = Path(path)
        response = self.client._http.put(
            f"/v1/worlds/{self.id}/sources/by-key", params={"key": key}, files=self._multipart(path, fields)
        )
        accepted = SourceAccepted.from_dict(_checked(response))
        return self._follow(accepted, wait, progress, timeout)

    def sync_folder(
        self,
        path: str | Path,
        *,
        delete: bool = False,
        pattern: str = "**/*",
        prefix: str = "",
        progress: Progress | None = None,
        timeout: float | None = 600.0,
    ) -> SyncReport:
        """Makes the world's keyed sources match a folder.

        Every file under ``path`` matching ``pattern`` (hidden files and folders left out)
        becomes the source of key ``prefix`` + its relative path (``/``-separated): a new file is
        added, a changed one replaced in place (retrievals keep seeing the old version until the
        new one is embedded), an unchanged one left alone. With ``delete=True``, the sources
        whose key starts with ``prefix`` and names no file any more are deleted (sources
        without a key are never touched). All uploads are sent first, then their jobs followed
        together to the end.
        """
        root = Path(path)
        if not root.is_dir():
            raise NotADirectoryError(str(root))
        report = SyncReport()
        keys: set[str] = set()
        jobs: list[Job] = []
        for file in sorted(root.glob(pattern)):
            relative = file.relative_to(root)
            if not file.is_file() or any(part.startswith(".") for part in relative.parts):
                continue
            key = prefix + relative.as_posix()
            keys.add(key)
            accepted = self.put_file(key, file, wait=False)
            getattr(report, accepted.outcome.value).append(key)
            if _plain(accepted.job) is not None:
                jobs.append(accepted.job)
        if delete:
            for source in self.sources():
                key = _plain(source.key)
                if key is not None and key.startswith(prefix) and key not in keys:
                    self.delete_source(key)
                    report.deleted.append(key)
        if jobs:
            report.jobs = self.client.wait(jobs, progress=progress, timeout=timeout)
        return report

    # ---- reading sources ----

    def sources(self) -> list[Source]:
        """Every source of the world (all pages)."""
        return list(self._iter_sources())

    def _iter_sources(self) -> Iterator[Source]:
        offset = 0
        while True:
            page = _checked(
                list_sources.sync_detailed(self.id, client=self.client.api, offset=offset, limit=1000)
            )
            yield from page.sources
            next_offset = _plain(page.next_offset)
            if next_offset is None or not page.sources:
                return
            offset = next_offset

    def source(self, key: str) -> Source:
        """The source of this key (``QuarryError`` ``source_not_found`` when none has it)."""
        return _checked(get_source_by_key.sync_detailed(self.id, client=self.client.api, key=key))

    def delete_source(self, key: str) -> None:
        """Deletes the source of this key."""
        _checked(delete_source_by_key.sync_detailed(self.id, client=self.client.api, key=key))

    # ---- retrieval ----

    @staticmethod
    def _request(query: str, settings: Mapping[str, Any]) -> RetrieveRequest:
        return RetrieveRequest.from_dict({"query": query, **settings})

    def retrieve(self, query: str, **settings: Any) -> RetrieveResponse:
        """``POST /v1/worlds/{id}/retrieve``: ``settings`` are the request's other fields as
        the API names them (``top_k``, ``mode``, ``expand``, ``neighbors``,
        ``max_context_tokens``, ``min_score``, ``filter``, ``rerank``, ...). The answer's
        ``results`` are the hits, ``context.text`` the passages marked ``[n]`` and
        ``context.citations`` where each comes from."""
        return _checked(
            retrieve_op.sync_detailed(self.id, client=self.client.api, body=self._request(query, settings))
        )

    async def aretrieve(self, query: str, **settings: Any) -> RetrieveResponse:
        """``retrieve`` without blocking the event loop."""
        async with self.client._async_api() as api:
            response = await retrieve_op.asyncio_detailed(
                self.id, client=api, body=self._request(query, settings)
            )
        return _checked(response)

    def passages(self, query: str, *, expanded: bool = False, **settings: Any) -> list[Passage]:
        """``retrieve``, as ``Passage``s (see ``passages_of``)."""
        return passages_of(self.retrieve(query, **settings), expanded=expanded)

    async def apassages(self, query: str, *, expanded: bool = False, **settings: Any) -> list[Passage]:
        return passages_of(await self.aretrieve(query, **settings), expanded=expanded)
