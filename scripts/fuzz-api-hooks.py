"""scripts/fuzz-api's helper: seeds the server under test, and holds the schemathesis hooks.

`python fuzz-api-hooks.py seed BASE TOKEN OUT` creates a hybrid world on the local model with
one source, waits for its ingest job to finish, and writes the ids to OUT as shell variables.
Loaded by schemathesis (`hooks` in the generated config), the module registers its hooks.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
import uuid

SEED_TEXT = """# The Northern Isles

The northern isles are ruled by a council of harbour masters, who meet each spring in the
old customs house. Their ships carry wool, salted fish and peat to the mainland.

## Weather

Storms come from the west between October and March. The ferry does not sail in a gale.
"""


def _call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def seed(base: str, token: str, out: str, scope: str | None = None) -> None:
    world = _call(
        base,
        token,
        "POST",
        "/v1/worlds",
        {
            "name": "fuzz seed",
            "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"},
            "hybrid": True,
        },
    )
    added = _call(
        base,
        token,
        "POST",
        f"/v1/worlds/{world['id']}/sources",
        {
            "filename": "isles.md",
            "text": SEED_TEXT,
            "title": "The Northern Isles",
            "url": "https://example.com/isles",
            "metadata": {"lang": "en"},
        },
    )
    job = added["job"]
    deadline = time.monotonic() + 120
    while job["status"] not in ("completed", "failed", "cancelled"):
        if time.monotonic() > deadline:
            sys.exit(f"fuzz-api: the seed source was not embedded within 120 s: {job}")
        time.sleep(0.2)
        job = _call(base, token, "GET", f"/v1/jobs/{job['id']}")
    if job["status"] != "completed":
        sys.exit(f"fuzz-api: the seed source's job ended {job['status']}: {job}")
    evals = _call(
        base,
        token,
        "POST",
        f"/v1/worlds/{world['id']}/evals",
        {"name": "fuzz seed", "items": [{"query": "Who keeps the tower?", "expected": {"answer": "the keeper"}}]},
    )
    with open(out, "w", encoding="utf-8") as fd:
        fd.write(f"QUARRY_FUZZ_WORLD_ID={world['id']}\n")
        fd.write(f"QUARRY_FUZZ_EVAL_ID={evals['eval_id']}\n")
        fd.write(f"QUARRY_FUZZ_SOURCE_ID={added['source']['id']}\n")
        fd.write(f"QUARRY_FUZZ_JOB_ID={job['id']}\n")
        if scope:
            # A managed token of one scope, limited to the seeded world: the run then checks
            # that every other operation is refused as documented (403, or 404 for other worlds).
            made = _call(
                base,
                token,
                "POST",
                "/v1/tokens",
                {"name": f"fuzz {scope}", "scopes": [scope], "worlds": [world["id"]]},
            )
            fd.write(f"QUARRY_FUZZ_SCOPED_TOKEN={made['secret']}\n")


# Refusals of schema-valid requests that are right: the request is well formed by the document,
# but the server judges it against something no JSON Schema can state. Each entry is an error
# code (and the fields it may name; None: any), with the reason. Anything else a valid request
# is refused with, `invalid_request` above all, fails the run.
WELL_FORMED_BUT_REFUSED = {
    # The model registry judges provider, model and dimensions together (which models a
    # provider has, and each model's range of dimensions; configuration can add models).
    "invalid_embedding_profile": None,
    # Chunk sizes are judged against the model's input limit and against each other
    # (overlap at most half of max_tokens, parents at least max_tokens).
    "invalid_chunking_profile": None,
    # Settings that contradict each other or the world: `fusion` outside modes hybrid and
    # auto, `expand` none/parent with neighbors > 0, `mode: hybrid` on a dense world,
    # `rerank.top_n` above `rerank.candidates`, both fusion weights 0, weights with a method
    # other than rrf.
    "invalid_retrieval_settings": {
        "fusion",
        "expand",
        "mode",
        "rerank.top_n",
        "fusion.dense_weight",
        "fusion.method",
    },
    # Whether bytes are a PDF with a readable text layer is not a thing JSON Schema can say:
    # an upload marked `application/pdf` (or named `.pdf`) whose bytes are not one (422).
    "unreadable_document": {"file"},
    "no_text_layer": {"file"},
    # A query with more tokens than the world's model takes (422).
    "input_too_large": {"query"},
    # A webhook receiver's address must be public unless its network is allowed: a URL the
    # pattern takes may still name a loopback or private address (422).
    "destination_not_allowed": {"url"},
    # A conditional write names a version; whether the source is at it is state, not shape
    # (412). The same goes for an Idempotency-Key the fuzzer sends again with another body
    # (422), and for a body `key` other than the one the query or the source has (422).
    "precondition_failed": None,
    "idempotency_key_reused": {"Idempotency-Key"},
    "key_mismatch": {"key"},
    # A token's expiry is judged against the clock (422).
    "expiry_in_past": {"expires_at"},
}


def _error(response) -> tuple[str | None, str | None]:
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return None, None
    details = error.get("details") or {}
    return error.get("code"), details.get("field") if isinstance(details, dict) else None


def _curl(case) -> str:
    try:
        return case.as_curl_command(headers={"Authorization": "Bearer [token]"})
    except Exception as err:  # a log line, never a failure of the run
        return f"(no curl command: {err})"


def _register_hooks() -> None:
    import os

    import schemathesis

    # Imported here, once, in the main thread: schemathesis imports its ASGI transport (and with
    # it anyio, whose lazy importer compiles source) on first use, and two workers doing that at
    # once have been seen to crash CPython 3.11's compiler ("AST constructor recursion depth
    # mismatch"), a runtime error of the tool, not a finding.
    try:
        import schemathesis.transport.asgi  # noqa: F401
    except ImportError:
        pass

    log = os.environ.get("QUARRY_FUZZ_FAILURE_LOG")

    # The seeded world and source stay: deleting them would leave every later operation on
    # them a 404. DELETE is exercised on what the stateful phase creates and on unknown ids.
    seeded = {
        "world_id": os.environ.get("QUARRY_FUZZ_WORLD_ID"),
        "source_id": os.environ.get("QUARRY_FUZZ_SOURCE_ID"),
        "eval_id": os.environ.get("QUARRY_FUZZ_EVAL_ID"),
    }

    @schemathesis.hook
    def map_path_parameters(context, path_parameters):
        operation = context.operation
        if operation is None or operation.method.upper() != "DELETE":
            return path_parameters
        last = operation.path.rstrip("/").rsplit("/", 1)[-1].strip("{}")
        if last in seeded and path_parameters.get(last) == seeded[last]:
            path_parameters = {**path_parameters, last: str(uuid.uuid4())}
        return path_parameters

    @schemathesis.hook
    def filter_failure(context, failure, case, response) -> bool:
        code, field = _error(response)
        if log:
            with open(log, "a", encoding="utf-8") as fd:
                fd.write(
                    json.dumps(
                        {
                            "failure": failure.code,
                            "operation": failure.operation,
                            "status": response.status_code,
                            "error": code,
                            "field": field,
                            "body": response.content.decode("utf-8", "replace")[:500],
                            "curl": _curl(case),
                        }
                    )
                    + "\n"
                )
        # The stateful phase infers links from response fields named like path parameters;
        # from a field that is null (a global webhook's `world_id`) it sends the path segment
        # `None`, which the server rightly refuses as not a UUID: the fuzzer's doing, not a
        # disagreement between the document and the server.
        path = getattr(case, "path_parameters", None) or {}
        if failure.code == "ST202" and code == "invalid_request" and path.get(field, "") in (None, "None"):
            return False
        # "Created resource not found" is a 404 right after a create on an operation linked to
        # it. A re-ingest's gate names a test set in its body, and a world just created has
        # none: that 404 (`eval_not_found`) names the body's set, not the world created, which
        # the same answer would have called `world_not_found`.
        if failure.code == "ST302" and code == "eval_not_found":
            return False
        if failure.code != "ST202" or code not in WELL_FORMED_BUT_REFUSED:
            return True
        fields = WELL_FORMED_BUT_REFUSED[code]
        # An evaluation run's settings, and a re-ingest gate's, are /retrieve bodies:
        # `settings[2].fusion` and `gate.settings.fusion` are `fusion`.
        if field is not None:
            field = re.sub(r"^(settings\[\d+\]|gate\.settings)\.", "", field)
        return fields is not None and field not in fields


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "seed":
        seed(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) == 6 else None)
    else:
        sys.exit("usage: fuzz-api-hooks.py seed BASE_URL TOKEN OUT_FILE [SCOPE]")
else:
    _register_hooks()
