"""Starts one real quarry server for the whole test session: SQLite and embedded vectors in a
temporary directory, the built-in local embedding model, a random bootstrap token, and every
remote provider pointed at a closed local port, so that nothing leaves the machine.

    QUARRY_BIN        the binary (default: $CARGO_TARGET_DIR/debug/quarry, or target/debug/quarry;
                      a relative path is taken from the repository's root)
    QUARRY_MODEL_DIR  the local model (default: models/all-minilm-l6-v2 of the repository)
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from quarry import Quarry, World

REPO = Path(__file__).resolve().parents[3]

# A passage the retrieval tests look for, and two others that must not outrank it.
LIGHTHOUSE = (
    "The lighthouse on Skerry Point was first lit in 1831. Its keeper, Morag Flett, climbs "
    "the hundred and twelve steps of the tower every evening to trim the wick."
)
OTHERS = {
    "ferry.md": "The ferry to Hoy leaves Stromness at seven each morning and returns at dusk.",
    "wool.md": "Fair Isle knitting uses two colours in each row and is worked in the round.",
}


@dataclass
class Server:
    url: str
    token: str
    log: Path


def _resolve(value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else REPO / path


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    default_bin = f"{os.environ.get('CARGO_TARGET_DIR', 'target')}/debug/quarry"
    binary = _resolve(os.environ.get("QUARRY_BIN", default_bin))
    model_dir = _resolve(os.environ.get("QUARRY_MODEL_DIR", "models/all-minilm-l6-v2"))
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no quarry binary at {binary} (build it, or set QUARRY_BIN)", pytrace=False)
    if not (model_dir / "model.onnx").is_file():
        pytest.fail(f"the local model is missing in {model_dir} (run scripts/fetch-model)", pytrace=False)

    work = tmp_path_factory.mktemp("quarry-server")
    token = "py-" + secrets.token_hex(16)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "RUST_LOG": "info",
        "QUARRY__AUTH__TOKENS": token,
        "QUARRY__SERVER__ADDR": "127.0.0.1:0",
        "QUARRY__STORE__URL": f"sqlite://{work}/quarry.db",
        "QUARRY__VECTORS__PATH": str(work / "vectors"),
        "QUARRY__PROVIDERS__LOCAL__MODEL_DIR": str(model_dir),
        # Nothing listens on port 9: a stray call to a remote provider fails at once.
        "QUARRY__PROVIDERS__GOOGLE__BASE_URL": "http://127.0.0.1:9",
        "QUARRY__PROVIDERS__OPENAI__BASE_URL": "http://127.0.0.1:9",
        "QUARRY__PROVIDERS__RERANK__BASE_URL": "http://127.0.0.1:9",
        "QUARRY__SECURITY__MASTER_KEY": base64.b64encode(os.urandom(32)).decode(),
    }
    log_path = work / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(binary), "serve", "--log-format", "json"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        url = _wait_listening(process, log_path, deadline=time.monotonic() + 60)
        yield Server(url=url, token=token, log=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_listening(process: subprocess.Popen[bytes], log_path: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            fields = event.get("fields", event)
            if fields.get("message") == "quarry is listening" and fields.get("addr"):
                return f"http://{fields['addr']}"
        if process.poll() is not None:
            pytest.fail(f"quarry stopped at startup:\n{log_path.read_text(errors='replace')}", pytrace=False)
        time.sleep(0.1)
    pytest.fail(
        f"quarry did not say where it listens within 60 s:\n{log_path.read_text(errors='replace')}",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[Quarry]:
    with Quarry(server.url, server.token) as q:
        yield q


def unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def lighthouse(client: Quarry) -> World:
    """A world holding the lighthouse passage and two unrelated ones, all embedded."""
    world = client.world(unique("Northern Isles"), create=True)
    world.add_text(
        LIGHTHOUSE,
        filename="lighthouse.md",
        title="The lighthouse",
        key="isles/lighthouse.md",
        url="https://example.com/isles/lighthouse",
        metadata={"island": "Skerry"},
    )
    for filename, text in OTHERS.items():
        world.add_text(text, filename=filename, key=f"isles/{filename}")
    return world
