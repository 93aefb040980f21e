#!/usr/bin/env python3
"""What an evaluation run costs: 500 questions against a real corpus on the local model.

Starts the release `quarry serve` on a temporary folder (SQLite, embedded vectors, the local
model), uploads the Python and Debian FAQs (HTML, from Debian's python3-doc and debian-faq),
drafts a test set from their question headings (POST …/evals/suggest), repeats it up to 500
items, and times runs of 1 setting × 1 budget and 2 settings × 3 budgets beside the same
questions asked one by one through /retrieve. Prints the figures BENCHMARKS.md records.

    ./scripts/cargo build --release --bin quarry && python3 scripts/bench-eval.py
"""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/quarry")
TOKEN = "bench"
CORPORA = ["/usr/share/doc/python3-doc/html/faq/*.html", "/usr/share/doc/debian/FAQ/*.en.html"]
ITEMS = 500


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, raw=None, headers=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {TOKEN}")
        if body is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        with urllib.request.urlopen(req, timeout=600) as resp:
            text = resp.read()
            return json.loads(text) if text else None, len(text)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def main():
    if not os.path.exists(BIN):
        sys.exit("bench-eval: build the release binary first: ./scripts/cargo build --release --bin quarry")
    files = sorted(f for pattern in CORPORA for f in glob.glob(pattern))
    if not files:
        sys.exit("bench-eval: install python3-doc and debian-faq")
    work = tempfile.mkdtemp(prefix="bench-eval-")
    port = free_port()
    env = dict(os.environ)
    env.update({
        "QUARRY__SERVER__ADDR": f"127.0.0.1:{port}",
        "QUARRY__AUTH__TOKENS": TOKEN,
        "QUARRY__STORE__URL": f"sqlite://{work}/quarry.db",
        "QUARRY__VECTORS__PATH": f"{work}/vectors",
        "QUARRY__PROVIDERS__LOCAL__MODEL_DIR": os.path.join(ROOT, "models/all-minilm-l6-v2"),
        "RUST_LOG": "warn",
    })
    server = subprocess.Popen([BIN, "serve"], env=env)
    api = Api(f"http://127.0.0.1:{port}")
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(api.base + "/readyz", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        world, _ = api.call("POST", "/v1/worlds", {"name": "FAQs", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}})
        wid = world["id"]
        t = time.time()
        for path in files:
            with open(path, "rb") as f:
                body = {"filename": os.path.basename(path), "text": f.read().decode("utf-8", "replace"), "content_type": "text/html"}
            api.call("POST", f"/v1/worlds/{wid}/sources", body)
        while True:
            jobs, _ = api.call("GET", f"/v1/worlds/{wid}/jobs")
            if all(j["status"] in ("completed", "failed") for j in jobs["jobs"]):
                break
            time.sleep(0.5)
        stats, _ = api.call("GET", f"/v1/worlds/{wid}")
        print(f"corpus: {len(files)} files, {stats['stats']['chunks']} chunks, ingested in {time.time() - t:.1f} s")

        draft, _ = api.call("POST", f"/v1/worlds/{wid}/evals/suggest", {"limit": ITEMS})
        found = draft["items"]
        items = [found[i % len(found)] for i in range(ITEMS)]
        print(f"drafted: {len(found)} questions from {draft['sections_seen']} sections; set of {len(items)} (repeated)")
        set_, size = api.call("POST", f"/v1/worlds/{wid}/evals", {"name": "FAQ 500", "items": items})
        print(f"test set: {size / 1024:.0f} KiB as returned")
        eid = set_["eval_id"]

        # The same questions one by one through /retrieve, for the overhead of a run.
        t = time.time()
        for item in items:
            api.call("POST", f"/v1/worlds/{wid}/retrieve", {"query": item["query"]})
        direct = time.time() - t
        print(f"/retrieve one by one: {ITEMS} in {direct:.1f} s ({ITEMS / direct:.0f}/s)")

        for label, body, n in [
            ("1 setting x 1 budget", {}, ITEMS),
            ("2 settings x 3 budgets", {"settings": [{"mode": "dense"}, {"expand": "none"}], "budgets": [512, 1024, 2048]}, ITEMS * 6),
        ]:
            cpu0, t = cpu_s(server.pid), time.time()
            run, _ = api.call("POST", f"/v1/worlds/{wid}/evals/{eid}/runs", body)
            path = f"/v1/worlds/{wid}/evals/{eid}/runs/{run['run_id']}"
            while True:
                run, size = api.call("GET", path)
                if run["status"] not in ("queued", "running"):
                    break
                time.sleep(0.2)
            wall, cpu = time.time() - t, cpu_s(server.pid) - cpu0
            rss, hwm = rss_kib(server.pid)
            s0 = run["report"]["settings"][0]
            print(f"run {label}: {run['status']}, {n} retrievals in {wall:.1f} s ({n / wall:.0f}/s), "
                  f"server CPU {cpu:.1f} s, p50 {s0['latency_p50_ms']:.1f} ms p95 {s0['latency_p95_ms']:.1f} ms, "
                  f"report {size / 1024:.0f} KiB, server RSS {rss / 1024:.0f} MiB (peak {hwm / 1024:.0f} MiB); "
                  f"hit@1 {s0['hit_at_1']:.3f}, answer share {s0['budgets'][0]['answer_share']:.3f}")
        db = os.path.getsize(f"{work}/quarry.db")
        print(f"store: {db / 1024 / 1024:.1f} MiB")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
