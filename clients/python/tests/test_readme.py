"""Runs the README's Python examples word for word, in order, in one namespace, against the
test server (only its address and token are put in), and checks what they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from conftest import Server

README = Path(__file__).resolve().parents[1] / "README.md"


def examples() -> list[str]:
    return re.findall(
        r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL
    )


def test_readme_examples_run(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = examples()
    assert len(blocks) == 4  # the client, LangChain, LlamaIndex, the generated client
    (tmp_path / "handbook.md").write_text(
        "# Staff handbook\n\nThe office opens at eight and the canteen at noon.\n"
    )
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "onboarding.md").write_text(
        "New staff get a laptop and a badge on their first day.\n"
    )
    (tmp_path / "notes" / "parking.md").write_text("Parking permits are issued by the front desk.\n")
    monkeypatch.chdir(tmp_path)

    namespace: dict[str, object] = {}
    printed = []
    for block in blocks:
        code = block.replace('"http://127.0.0.1:8080"', repr(server.url)).replace(
            '"my-token"', repr(server.token)
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 (the README, on purpose)
        printed.append(out.getvalue())
    client, langchain, llamaindex, generated = printed

    assert "completed 1" in client  # the progress callback saw the job end
    assert "created ['notes/onboarding.md', 'notes/parking.md'] replaced [] deleted []" in client
    assert "[1] Backups run nightly at 02:00 and are kept for 30 days." in client
    assert " backups.md chars 0-" in client
    assert "400 invalid_retrieval_settings" in client

    assert "[1] Backups run nightly at 02:00 and are kept for 30 days." in langchain
    assert "Human: How long are backups kept?" in langchain
    assert "backups.md Backups run nightly at 02:00 and are kept for 30 days." in llamaindex
    assert generated.startswith("1 embedded New staff get a laptop")


MAIN_README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_main_readme_example_runs(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository README's Python section, run as written (address and token put in)."""
    text = MAIN_README.read_text(encoding="utf-8")
    section = text[text.index("### Python, LangChain and LlamaIndex") :]
    block = re.findall(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)[0]
    code = block.replace('"http://127.0.0.1:8080"', repr(server.url)).replace('"dev-token"', repr(server.token))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(MAIN_README), "exec"), {})  # noqa: S102 (the README, on purpose)
    printed = out.getvalue()
    assert "[1] Backups run nightly at 02:00 and are kept for 30 days." in printed
    assert "\nBackups run nightly at 02:00 and are kept for 30 days." in printed, printed
