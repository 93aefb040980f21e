"""One user scenario through the Python client openapi-python-client generates from
openapi/openapi.json, untouched: create a world, add a JSON source and upload a file, follow
the jobs, retrieve, list chunks, read a typed error body, delete. Run by scripts/sdk-check:

    python scenario.py BASE_URL TOKEN FILE
"""

import sys
import time
import uuid
from pathlib import Path

from quarry_client import AuthenticatedClient
from quarry_client.api.jobs import get_job
from quarry_client.api.retrieval import retrieve
from quarry_client.api.sources import add_source, list_chunks, upload_source
from quarry_client.api.worlds import create_world, delete_world, get_world
from quarry_client.models import (
    AddSourceRequest,
    AddSourceUpload,
    CreateWorldRequest,
    EmbeddingProvider,
    EmbeddingRequest,
    ErrorBody,
    Job,
    JobStatus,
    RetrieveRequest,
    RetrieveResponse,
    SourceAccepted,
    World,
)


def check(condition, message):
    if not condition:
        print(f"sdk-check (python): {message}", file=sys.stderr)
        sys.exit(1)


def main(base_url: str, token: str, path: str) -> None:
    client = AuthenticatedClient(base_url=base_url, token=token, timeout=60.0)

    world = create_world.sync(
        client=client,
        body=CreateWorldRequest(
            name="Python SDK",
            embedding=EmbeddingRequest(provider=EmbeddingProvider.LOCAL, model="all-MiniLM-L6-v2"),
        ),
    )
    check(isinstance(world, World), f"create_world answered {world!r}")

    added = add_source.sync(
        world.id,
        client=client,
        body=AddSourceRequest(
            filename="lighthouse.md",
            text="The lighthouse on Skerry Point was lit in 1831. Its keeper climbs the tower every evening.",
            title="The lighthouse",
        ),
    )
    check(isinstance(added, SourceAccepted), f"add_source answered {added!r}")

    # The document declares the `file` part as text, with `filename` and `content_type` parts
    # to name it.
    uploaded = upload_source.sync(
        world.id,
        client=client,
        body=AddSourceUpload(
            file=Path(path).read_text(encoding="utf-8"),
            filename=Path(path).name,
            content_type="text/markdown",
        ),
    )
    check(isinstance(uploaded, SourceAccepted), f"upload_source answered {uploaded!r}")
    check(uploaded.source.filename == Path(path).name, f"the upload's filename: {uploaded.source.filename}")

    for accepted in (added, uploaded):
        # A new source always has its job (`job` is null only when a write changed nothing).
        check(isinstance(accepted.job, Job), f"a new source without a job: {accepted!r}")
        deadline = time.monotonic() + 120
        while True:
            job = get_job.sync(accepted.job.id, client=client)
            check(job is not None and not isinstance(job, ErrorBody), f"get_job answered {job!r}")
            if job.status == JobStatus.COMPLETED:
                break
            check(job.status not in (JobStatus.FAILED, JobStatus.CANCELLED), f"job ended {job.status}")
            check(time.monotonic() < deadline, f"job {job.id} still {job.status} after 120 s")
            time.sleep(0.2)

    answer = retrieve.sync(world.id, client=client, body=RetrieveRequest(query="Who climbs the tower?", top_k=3))
    check(isinstance(answer, RetrieveResponse), f"retrieve answered {answer!r}")
    check(len(answer.results) > 0, "retrieve found nothing")
    check("tower" in answer.context.text, f"the context misses the answer: {answer.context.text!r}")

    chunks = list_chunks.sync(world.id, uploaded.source.id, client=client)
    check(chunks is not None and not isinstance(chunks, ErrorBody), f"list_chunks answered {chunks!r}")
    check(chunks.total > 0 and len(chunks.chunks) > 0, "the upload has no chunks")

    missing = get_world.sync(uuid.uuid4(), client=client)
    check(isinstance(missing, ErrorBody), f"an unknown world answered {missing!r}")
    check(missing.error.code == "world_not_found", f"error code {missing.error.code}")

    deleted = delete_world.sync_detailed(world.id, client=client)
    check(deleted.status_code == 204, f"delete_world answered {deleted.status_code}")
    gone = get_world.sync_detailed(world.id, client=client)
    check(gone.status_code == 404, f"a deleted world answered {gone.status_code}")
    print(f"sdk-check (python): ok ({len(answer.results)} results, {chunks.total} chunks in the upload)")


if __name__ == "__main__":
    main(*sys.argv[1:4])
