"""The web console in a real browser (issue 42), as a user walks it.

Run by scripts/browser-test, which starts a quarry binary and passes its address and token in
QUARRY_BASE and QUARRY_TOKEN. Chromium is Debian's (QUARRY_CHROMIUM), driven headless by
Playwright. Checks, in order: the CSP header on the page; a wrong token is refused with a clear
message; an API 4xx shows the API's message; a world made on the local model; two files
uploaded at once through the file input and a third dropped on the upload box, their jobs
followed live to `completed` without a reload; a source's text with as many chunk marks as the
API lists; a question whose expected passage comes first;
its citation opening the source text with the cited span highlighted inside its chunk marks; the same question
explained and held to one source; the operations page (a
provider key disabled and enabled, a webhook created, one made before the uploads showing
its three deliveries, the new one deleted after a confirmation);
a `read` token told it is read-only, shown no create form, upload box, delete button or job
control, and the API's 403 on the operations page; a re-ingest really held by its gate shown
with its figures and promoted; a test set's two runs as a table
and a chart; by keyboard alone, every control of the worlds page reached in turn by Tab with
a visible outline, and a question asked with Tab, typing and Ctrl+Enter; the pages at 375 px
with no sideways scrolling; a longer job's rate and ETA beside its bar while it runs; the world
deleted after a confirmation. Throughout: no request leaves for another origin, and the page
logs no error (a CSP violation would be one). A screenshot of each page
goes to QUARRY_SCREENSHOTS.
"""

import os
import re
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

# The fp32 local model's option, and not its int8 sibling's (whose name it begins).
FP32_MODEL = re.compile(r"local / all-MiniLM-L6-v2(?!-int8)")

BASE = os.environ["QUARRY_BASE"].rstrip("/")
TOKEN = os.environ["QUARRY_TOKEN"]
CHROMIUM = os.environ.get("QUARRY_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("QUARRY_SCREENSHOTS", "target/console-screenshots"))
HEADED = os.environ.get("QUARRY_BROWSER_HEADED") == "1"

WORLD = "Console walk"
ISLES = """# The Isles

Queen Maren rules the northern isles from the harbour town of Skellig, where her fleet winters.
She took the crown after the long winter war and has kept the peace for thirty years.

## Trade

The islanders trade salted fish, wool and whale oil for grain from the southern mainland.
Merchants sail in spring, when the ice leaves the straits, and return before the autumn gales.

## Festivals

Every midsummer the towns light bonfires on the cliffs and sing the old sailing songs until dawn.
Children race small boats of bark and sailcloth across the harbour for a prize of honey cakes.
"""
WEATHER = """Storms on the coast

The lighthouse keepers on the western cape record the wind every hour of the day and night.
In winter, gales from the north-west can blow for a week and close the harbours to every ship.
Fog comes in summer, thick and cold, and the foghorns sound from dusk until the morning sun.
"""
HARBOUR = """The harbour of Skellig

The harbour master keeps a ledger of every ship that enters, its cargo and its crew.
"""
QUESTION = "Who rules the northern isles?"
PASSAGE = "Queen Maren rules the northern isles"

step_started = time.monotonic()


def step(text):
    global step_started
    now = time.monotonic()
    print(f"  [{now - step_started:5.1f} s] {text}", flush=True)


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def is_problem(message):
    """A console error, except Chromium's note on each 4xx answer (the test asks for some)."""
    return message.type == "error" and not re.match(
        r"Failed to load resource: the server responded with a status of 4\d\d", message.text
    )


def alert(page):
    return page.locator("#alert")


def main():
    origin = BASE
    requests = []
    problems = []
    files = Path(tempfile.mkdtemp())
    (files / "isles.md").write_text(ISLES)
    (files / "weather.txt").write_text(WEATHER)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=not HEADED)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.on("request", lambda r: requests.append(r.url))
        page = context.new_page()
        page.on("console", lambda m: problems.append(f"console: {m.text}") if is_problem(m) else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        expect.set_options(timeout=15_000)

        # The page: `/console` leads to `/console/`, with a strict CSP; no token is needed.
        response = page.goto(f"{BASE}/console")
        assert page.url == f"{BASE}/console/", page.url
        csp = response.headers.get("content-security-policy", "")
        for directive in ["default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "script-src 'self'"]:
            assert directive in csp, f"CSP lacks {directive}: {csp!r}"
        assert "unsafe-inline" not in csp, csp
        expect(page.get_by_role("heading", name="Welcome")).to_be_visible()
        expect(page.get_by_label("Bearer token")).to_be_focused()
        step("the page answers with its CSP, and asks for a token")

        # A wrong token: a clear message, and nothing else shown.
        page.get_by_label("Bearer token").fill("not-a-valid-token")
        page.get_by_role("button", name="Use token").click()
        expect(alert(page)).to_contain_text("The token was not accepted")
        expect(alert(page)).to_contain_text("unauthorized")
        expect(alert(page)).to_contain_text("HTTP 401")
        assert page.evaluate("sessionStorage.getItem('quarry.token')") is None
        shot(page, "01-wrong-token")
        step("a wrong token is refused with the API's message")

        # The right token, entered with the keyboard.
        page.get_by_label("Bearer token").fill(TOKEN)
        page.get_by_label("Bearer token").press("Enter")
        expect(page.get_by_role("heading", name="Worlds", exact=True)).to_be_visible()
        expect(page.get_by_text("No worlds yet")).to_be_visible()
        expect(alert(page)).to_be_empty()
        models = page.get_by_label("Embedding model")
        expect(models.locator("option", has_text=FP32_MODEL)).to_have_count(1)
        expect(models.locator("option", has_text="local / all-MiniLM-L6-v2-int8")).to_have_count(1)
        step("the token is accepted; the worlds page lists the models")

        # An API 4xx shows the API's own message: a chunk size the model cannot take.
        page.get_by_label("Name").fill(WORLD)
        models.select_option(label=models.locator("option", has_text=FP32_MODEL).inner_text())
        page.get_by_label("Chunk size (tokens)").fill("100000")
        page.get_by_role("button", name="Create world").click()
        expect(alert(page)).to_contain_text("invalid_chunking_profile")
        expect(alert(page)).to_contain_text("HTTP 400")
        shot(page, "02-worlds-api-error")
        step("an API 400 shows its code and message")

        # Create the world on the local model, in small chunks so that a citation is a span.
        page.get_by_label("Chunk size (tokens)").fill("48")
        page.get_by_label("Chunk overlap (tokens)").fill("0")
        page.get_by_role("button", name="Create world").click()
        expect(page.get_by_role("heading", name=WORLD, exact=True)).to_be_visible()
        assert re.search(r"#/worlds/[0-9a-f-]{36}$", page.url), page.url
        expect(alert(page)).to_be_empty()
        step("world created; its page is open")

        # A webhook made through the API before the uploads, so that the operations page has a
        # delivery log to show (its receiver is not reachable: the deliveries stay unanswered).
        early = "https://early.hooks.example.com/quarry"
        subscribed = context.request.post(
            f"{BASE}/v1/webhooks",
            headers={"Authorization": f"Bearer {TOKEN}"},
            data={"url": early, "events": ["job.completed"]},
        )
        assert subscribed.status == 201, subscribed.text()

        # Two files at once through the file input; the jobs are followed live, no reload. Every
        # rate line shown beside a bar while they run is recorded (a small job may end before the
        # rate is known, so none is required, but any shown must read "N chunks/s · about …").
        page.evaluate("window.__notReloaded = true")
        page.evaluate(
            """() => {
                window.__rates = [];
                new MutationObserver(() => {
                    for (const el of document.querySelectorAll(".job .rate")) {
                        if (el.textContent) window.__rates.push(el.textContent);
                    }
                }).observe(document.body, { childList: true, subtree: true, characterData: true });
            }"""
        )
        page.get_by_label("Upload files").set_input_files([str(files / "isles.md"), str(files / "weather.txt")])
        expect(page.locator(".uploads li.ok")).to_have_count(2)
        jobs = page.locator(".job")
        expect(jobs).to_have_count(2)
        expect(page.locator(".job [data-status=completed]")).to_have_count(2, timeout=90_000)
        for i in range(2):
            bar = jobs.nth(i).locator("progress")
            assert bar.get_attribute("value") == bar.get_attribute("max"), "a completed job's bar is full"
            expect(jobs.nth(i)).to_contain_text("0 failed")
        assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
        # Finished jobs show no rate; any rate shown while they ran was well formed.
        expect(page.locator(".job .rate")).to_have_count(0)
        rates = page.evaluate("window.__rates")
        for text in rates:
            assert re.fullmatch(r"[\d.,]+ chunks/s · (about \d+ (s|min|h \d+ min) left|almost done)", text), text
        print(f"  (rate lines seen while the jobs ran: {len(set(rates))}, e.g. {rates[-1] if rates else 'none'})")
        assert any(re.search(r"/v1/jobs/[0-9a-f-]{36}/events$", url) for url in requests), "no job event stream was read"
        sources = page.get_by_role("table").filter(has_text="isles.md")
        expect(sources).to_contain_text("weather.txt")
        shot(page, "03-world-jobs-completed")
        step("two uploads embedded; both jobs reached completed live")

        # A third file dropped on the upload box (drag and drop), followed the same way.
        dropped = page.evaluate_handle(
            """([name, text]) => {
                const transfer = new DataTransfer();
                transfer.items.add(new File([text], name, { type: "text/plain" }));
                return transfer;
            }""",
            ["harbour.txt", HARBOUR],
        )
        page.locator(".dropzone").dispatch_event("dragover", {"dataTransfer": dropped})
        page.locator(".dropzone").dispatch_event("drop", {"dataTransfer": dropped})
        expect(page.locator(".uploads li.ok")).to_have_count(3)
        expect(page.locator(".job [data-status=completed]")).to_have_count(3, timeout=90_000)
        expect(sources).to_contain_text("harbour.txt")
        step("a dropped file is uploaded and embedded too")

        # A source's text from the sources table, with as many chunk marks as the API lists.
        auth = {"Authorization": f"Bearer {TOKEN}"}
        world_id = re.search(r"#/worlds/([0-9a-f-]{36})$", page.url).group(1)
        in_world = f"{BASE}/v1/worlds/{world_id}"
        by_name = {
            x["filename"]: x["id"] for x in context.request.get(f"{in_world}/sources", headers=auth).json()["sources"]
        }

        def chunk_total(name):
            listed = context.request.get(f"{in_world}/sources/{by_name[name]}/chunks?limit=1", headers=auth)
            assert listed.status == 200, listed.text()
            return listed.json()["total"]

        page.get_by_role("button", name="Open the text of weather.txt").click()
        expect(page.locator("pre.source-text")).to_contain_text("lighthouse keepers")
        weather_chunks = chunk_total("weather.txt")
        assert weather_chunks >= 2, f"weather.txt has {weather_chunks} chunks; the test wants several"
        chunk_marks = page.locator("pre.source-text span.chunk")
        expect(chunk_marks).to_have_count(weather_chunks)
        expect(chunk_marks.first).to_have_attribute("title", "Chunk 0")
        expect(chunk_marks.first).to_have_class(re.compile(r"\bchunk-a\b"))
        expect(chunk_marks.nth(1)).to_have_class(re.compile(r"\bchunk-b\b"))
        expect(page.locator("pre.source-text")).to_contain_text(WEATHER.strip())
        step(f"a source's text opens with its {weather_chunks} chunks marked")

        # The playground: the expected passage first, its citation highlighted in the source.
        page.get_by_role("link", name="Open the retrieval playground").click()
        expect(page.get_by_role("heading", name=f"Retrieval playground: {WORLD}")).to_be_visible()
        page.get_by_label("Question").fill(QUESTION)
        page.get_by_label("Mode").select_option("dense")
        page.get_by_label("Results (top_k)").fill("3")
        page.get_by_label("Expand").select_option("none")
        page.get_by_label("Context budget (tokens)").fill("400")
        page.get_by_label("Question").press("Control+Enter")
        results = page.locator("ol.results > li")
        expect(results.first).to_contain_text("isles.md")
        expect(results.first.locator(".chunk-text")).to_contain_text(PASSAGE)
        expect(page.locator(".timing")).to_contain_text("ms")
        expect(page.locator("pre.context-text")).to_contain_text(f"[1] ")
        expect(page.locator("pre.context-text")).to_contain_text(PASSAGE)
        step("the expected passage comes first, in the context too")

        page.locator(".citations button").first.click()
        mark = page.locator("pre.source-text mark")
        expect(mark).to_contain_text(PASSAGE)
        expect(mark).to_be_in_viewport()
        whole = page.locator("pre.source-text").inner_text()
        cited = mark.inner_text()
        assert len(cited) < len(whole), "the highlight is a span of the text, not all of it"
        assert whole.count(cited) >= 1
        # The citation's mark sits inside the chunk marks, which are as many as isles.md's chunks.
        expect(chunk_marks).to_have_count(chunk_total("isles.md"))
        expect(page.locator("pre.source-text span.chunk mark#cited-span")).to_have_count(1)
        shot(page, "04-playground-citation")
        step("its citation opens the source with the cited span highlighted")

        # Explained, and held to one source: each hit shows its dense standing.
        page.get_by_label("Source", exact=True).select_option(label="3. harbour.txt")
        page.get_by_label("Explain").check()
        page.get_by_role("button", name="Retrieve").click()
        expect(results.first).to_contain_text("harbour.txt")
        # Its standing in the whole dense ranking (the explanation ranks without the filter).
        expect(results.first.locator(".explain")).to_contain_text(re.compile(r"dense #\d+ \(0\.\d{3}\) · BM25"))
        for i in range(results.count()):
            expect(results.nth(i).locator(".result-head")).to_contain_text("harbour.txt")
        shot(page, "04b-playground-explain")
        step("explained and held to one source, each hit shows its dense and BM25 standing")

        # Operations (the bootstrap token may read them all): a provider key disabled and
        # enabled again; a webhook made, its delivery log read, and deleted after a confirmation.
        added = context.request.post(
            f"{BASE}/v1/provider-keys",
            headers={"Authorization": f"Bearer {TOKEN}"},
            data={"provider": "google", "secret": "console-test-key-0001", "label": "console key"},
        )
        assert added.status == 201, added.text()
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Operations").click()
        expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
        expect(page.locator("main")).to_contain_text("This replica")
        expect(page.get_by_role("heading", name="Key scheduler")).to_be_visible()
        keys = page.get_by_role("table", name="Provider keys")
        expect(keys.locator("[data-state=enabled]")).to_have_count(1)
        page.get_by_role("button", name="Disable key console key").click()
        expect(keys.locator("[data-state=disabled]")).to_have_count(1)
        expect(keys).to_contain_text("disabled")
        page.get_by_role("button", name="Enable key console key").click()
        expect(keys.locator("[data-state=enabled]")).to_have_count(1)
        hook = "https://hooks.example.com/quarry"
        page.get_by_label("Receiver URL").fill(hook)
        page.get_by_label("job.waiting").uncheck()
        page.get_by_role("button", name="Create webhook").click()
        expect(page.locator("#status")).to_contain_text("Webhook created")
        hooks = page.get_by_role("table", name="Webhook subscriptions")
        expect(hooks).to_contain_text(hook)
        expect(hooks).to_contain_text("job.held")
        expect(hooks).not_to_contain_text("job.waiting")
        expect(page.locator(".secret code")).to_contain_text("whsec_")
        page.get_by_role("button", name=f"Deliveries of {hook}").click()
        expect(page.get_by_role("heading", name=f"Deliveries to {hook}")).to_be_visible()
        expect(page.locator(".deliveries")).to_contain_text("No deliveries yet")
        page.get_by_role("button", name=f"Deliveries of {early}").click()
        expect(page.get_by_role("heading", name=f"Deliveries to {early}")).to_be_visible()
        deliveries = page.get_by_role("table", name="Deliveries, newest first")
        expect(deliveries.locator("tbody tr")).to_have_count(3)
        expect(deliveries).to_contain_text("job.completed")
        shot(page, "05-operations")
        page.get_by_role("button", name=f"Delete webhook {hook}").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete webhook").click()
        expect(page.locator("#status")).to_contain_text("Webhook deleted")
        expect(hooks).not_to_contain_text(hook)
        expect(hooks).to_contain_text(early)
        step("the operations page: a key disabled and enabled, a webhook made, read and deleted")

        # A token that may only read: the operations it may not see show the API's 403.
        made = context.request.post(
            f"{BASE}/v1/tokens",
            headers={"Authorization": f"Bearer {TOKEN}"},
            data={"name": "console reader", "scopes": ["read"]},
        )
        assert made.status == 201, made.text()
        page.get_by_role("button", name="Forget").click()
        page.get_by_label("Bearer token").fill(made.json()["secret"])
        page.get_by_role("button", name="Use token").click()
        expect(page.locator("#status")).to_contain_text("Token accepted")
        # It is told what it may not do, and sees no control that needs more than `read`.
        expect(page.locator("#scope-note")).to_contain_text("Read-only token (console reader)")
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Worlds").click()
        expect(page.get_by_role("link", name=WORLD)).to_be_visible()
        expect(page.get_by_role("heading", name="Create a world")).to_have_count(0)
        expect(page.get_by_role("button", name=f"Delete {WORLD}")).to_have_count(0)
        page.get_by_role("link", name=WORLD).click()
        expect(page.get_by_role("button", name="Open the text of weather.txt")).to_be_visible()
        expect(page.locator(".dropzone")).to_have_count(0)
        expect(page.get_by_role("button", name=re.compile(r"^Delete "))).to_have_count(0)
        expect(page.locator(".job button")).to_have_count(0)
        shot(page, "05a-world-read-token")
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Operations").click()
        expect(page.locator("main .error")).to_have_count(4)
        expect(page.get_by_role("button", name="Create webhook")).to_have_count(0)
        expect(page.locator("main .error").first).to_contain_text("insufficient_scope, HTTP 403")
        expect(page.locator("main .error").first).to_contain_text("`admin` scope")
        shot(page, "05b-operations-read-token")
        page.get_by_role("button", name="Forget").click()
        page.get_by_label("Bearer token").fill(TOKEN)
        page.get_by_role("button", name="Use token").click()
        expect(page.locator("#status")).to_contain_text("Token accepted")
        step("a read token sees no upload box, no delete buttons, and the API's 403 where it lacks the scope")

        # A world's evaluation runs: a test set and two runs made through the API, shown as a
        # table and a chart on the world page.
        isles = by_name["isles.md"]
        made = context.request.post(
            f"{in_world}/evals",
            headers=auth,
            data={
                "name": "Isles questions",
                "items": [
                    {"query": QUESTION, "expected": {"sources": [isles], "answer": PASSAGE}},
                    {"query": "What do the islanders trade?",
                     "expected": {"answer": "The islanders trade salted fish, wool and whale oil"}},
                ],
            },
        )
        assert made.status == 201, made.text()
        eval_id = made.json()["eval_id"]
        runs = []
        for body in [{}, {"settings": [{"mode": "dense", "top_k": 3}, {"mode": "dense", "top_k": 1}], "budgets": [400]}]:
            started = context.request.post(f"{in_world}/evals/{eval_id}/runs", headers=auth, data=body)
            assert started.status in (201, 202), started.text()
            runs.append(started.json()["run_id"])
        deadline = time.monotonic() + 60
        for run in runs:
            while True:
                status = context.request.get(f"{in_world}/evals/{eval_id}/runs/{run}", headers=auth).json()["status"]
                if status == "completed":
                    break
                assert status in ("queued", "running"), status
                assert time.monotonic() < deadline, "the evaluation runs did not complete within 60 s"
                time.sleep(0.2)

        # A gated re-ingest that its gate really holds. A set whose item names the passage's
        # chunk: chunk ids are new in every run, so the re-ingest's run cannot hit it (hit@1
        # falls from 1 to 0) and the gate holds, whatever the model makes of the text.
        best = context.request.post(
            f"{in_world}/retrieve", headers=auth, data={"query": QUESTION, "mode": "dense", "top_k": 1}
        ).json()["results"][0]
        assert PASSAGE in best["chunk_text"], best
        pinned = context.request.post(
            f"{in_world}/evals",
            headers=auth,
            data={"name": "Pinned chunk", "items": [{"query": QUESTION, "expected": {"chunks": [best["chunk_id"]]}}]},
        )
        assert pinned.status == 201, pinned.text()
        reingest = context.request.post(
            f"{in_world}/reingest",
            headers=auth,
            data={
                "chunking": {"overlap_tokens": 0},
                "gate": {"eval_id": pinned.json()["eval_id"], "settings": {"mode": "dense", "top_k": 1},
                         "metric": "hit_at_1"},
            },
        )
        assert reingest.status == 202, reingest.text()
        job_id = reingest.json()["id"]
        deadline = time.monotonic() + 60
        while True:
            job = context.request.get(f"{BASE}/v1/jobs/{job_id}", headers=auth).json()
            if job["status"] == "held":
                break
            assert job["gate"]["state"] in ("waiting", "evaluating"), job
            assert time.monotonic() < deadline, f"the gate did not hold within 60 s: {job}"
            time.sleep(0.2)
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Worlds").click()
        page.get_by_role("link", name=WORLD).click()
        gate = page.locator(".job .gate")
        expect(page.locator(".job [data-status=held]")).to_have_count(1)
        expect(gate).to_contain_text("Gate held")
        expect(gate).to_contain_text("100.0 %")
        expect(gate).to_contain_text("0.0 %")
        expect(gate).to_contain_text("more than the tolerance")
        evals = page.get_by_role("region", name="Evaluation runs")
        expect(evals.get_by_label("Test set")).to_contain_text("Isles questions (2 items)")
        expect(evals.locator("tr.run [data-status=completed]")).to_have_count(2)
        expect(evals.locator("svg.chart polyline")).to_have_count(2)
        expect(evals.locator("svg.chart circle")).to_have_count(4)
        expect(evals.locator("tbody")).to_contain_text("100.0 %")
        shot(page, "05c-world-gate-and-evals")
        page.get_by_role("button", name=re.compile(r"^Discard reingest job")).click()
        page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
        page.get_by_role("button", name=re.compile(r"^Promote reingest job")).click()
        expect(page.locator("#status")).to_contain_text("promoted")
        expect(gate).to_contain_text("Gate promoted")
        expect(page.locator(".job [data-status=held]")).to_have_count(0)
        job = context.request.get(f"{BASE}/v1/jobs/{job_id}", headers=auth).json()
        assert (job["status"], job["gate"]["state"]) == ("completed", "promoted"), job
        step("a held re-ingest shows its gate and is promoted; the evaluation runs as a table and a chart")

        # The keyboard alone. The worlds page, freshly loaded: Tab reaches every link, button and
        # field in document order, each with a visible focus outline.
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Worlds").click()
        expect(page.get_by_role("link", name=WORLD)).to_be_visible()
        page.reload()
        expect(page.get_by_role("link", name=WORLD)).to_be_visible()
        expect(page.get_by_label("Embedding model").locator("option", has_text=FP32_MODEL)).to_have_count(1)
        focusable = page.evaluate(
            """() => [...document.querySelectorAll(
                    "a[href], button, input, select, textarea, summary, [tabindex]")]
                .filter((e) => e.tabIndex >= 0 && !e.disabled && e.type !== "hidden"
                    && e.getClientRects().length && getComputedStyle(e).visibility !== "hidden")
                .map((e, i) => { e.dataset.tabCheck = String(i);
                    return e.getAttribute("aria-label") || e.textContent.trim() || e.id || e.tagName; })"""
        )
        assert len(focusable) >= 10, focusable
        for i, name in enumerate(focusable):
            page.keyboard.press("Tab")
            got = page.evaluate(
                """() => { const e = document.activeElement; const s = getComputedStyle(e);
                    return [e.dataset.tabCheck ?? null, s.outlineStyle, s.outlineWidth]; }"""
            )
            assert got[0] == str(i), f"Tab {i + 1} should reach {name!r}, got element {got[0]}"
            assert got[1] != "none" and got[2] != "0px", f"{name!r} shows no focus outline: {got}"
        # One action by keyboard: back to the world's link, into its playground, Tab from the
        # breadcrumbs to the question box, type, Ctrl+Enter, and the results.
        for _ in range(len(focusable)):
            if page.evaluate("document.activeElement.textContent") == WORLD:
                break
            page.keyboard.press("Shift+Tab")
        expect(page.get_by_role("link", name=WORLD)).to_be_focused()
        page.keyboard.press("Enter")
        playground = page.get_by_role("link", name="Open the retrieval playground")
        expect(playground).to_be_visible()
        # A page change moves the focus to the main region once the page is drawn.
        expect(page.locator("#main")).to_be_focused()
        for _ in range(20):
            if page.evaluate("document.activeElement.textContent") == "Open the retrieval playground":
                break
            page.keyboard.press("Tab")
        expect(playground).to_be_focused()
        page.keyboard.press("Enter")
        question = page.get_by_label("Question")
        expect(page.get_by_role("heading", name=f"Retrieval playground: {WORLD}")).to_be_visible()
        expect(page.locator("#main")).to_be_focused()
        for _ in range(10):
            if page.evaluate("document.activeElement.id") == "query":
                break
            page.keyboard.press("Tab")
        expect(question).to_be_focused()
        page.keyboard.type(QUESTION)
        page.keyboard.press("Control+Enter")
        # The defaults (mode auto: the whole corpus of so small a world) answer with the context.
        expect(page.get_by_role("heading", name=re.compile(r"^Results \("))).to_be_visible()
        expect(page.locator(".timing")).to_contain_text("ms")
        expect(page.locator("pre.context-text")).to_contain_text(PASSAGE)
        step(f"by keyboard: Tab reaches all {len(focusable)} controls of the worlds page with a visible outline; "
             "a question asked from the nav with Tab, typing and Ctrl+Enter")

        # A phone's width: nothing scrolls sideways on the main pages.
        page.set_viewport_size({"width": 375, "height": 800})
        nav = page.get_by_role("navigation", name="Sections")
        nav.get_by_role("link", name="Worlds").click()
        expect(page.get_by_role("heading", name="Worlds", exact=True)).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the worlds page is {width} px wide at 375 px"
        shot(page, "06-phone-worlds")
        world_link = page.get_by_role("link", name=WORLD)
        world_link.click()
        # The three uploads and the promoted re-ingest.
        expect(page.locator(".job [data-status=completed]")).to_have_count(4)
        shot(page, "07-phone-world")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the world page is {width} px wide at 375 px"
        page.get_by_role("link", name="Open the retrieval playground").click()
        expect(page.get_by_label("Question")).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the playground is {width} px wide at 375 px"
        shot(page, "08-phone-playground")
        nav.get_by_role("link", name="Operations").click()
        expect(page.get_by_role("button", name="Create webhook")).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the operations page is {width} px wide at 375 px"
        shot(page, "08b-phone-operations")
        page.set_viewport_size({"width": 1280, "height": 900})
        step("at 375 px nothing scrolls sideways")

        # A longer upload, so that its job runs long enough to show its rate and ETA beside the
        # bar: "N chunks/s · about … left" from the progress events, gone once it completes.
        ledger = files / "ledger.txt"
        cargoes = ["salted fish", "wool", "whale oil", "grain", "timber", "rope", "tar", "honey"]
        ledger.write_text("\n".join(
            f"Entry {i}: the ship number {i * 7 % 101} brought {cargoes[i % 8]} and {cargoes[(i * 3) % 8]} "
            f"to Skellig on day {i % 365} of the year, with a crew of {i % 40 + 3}."
            for i in range(int(os.environ.get("QUARRY_LEDGER_LINES", "1200")))
        ))
        nav.get_by_role("link", name="Worlds").click()
        page.get_by_role("link", name=WORLD).click()
        page.get_by_label("Upload files").set_input_files([str(ledger)])
        running = page.locator(".job").filter(has=page.locator("[data-status=running]"))
        rate = running.locator(".rate")
        expect(rate).to_have_text(
            re.compile(r"^[\d.,]+ chunks/s · (about \d+ (s|min|h \d+ min) left|almost done)$"), timeout=60_000
        )
        shown = rate.inner_text()
        shot(page, "08c-world-job-rate")
        expect(page.locator(".job [data-status=completed]")).to_have_count(5, timeout=120_000)
        expect(page.locator(".job .rate")).to_have_count(0)
        step(f"a longer job shows its rate and ETA while it runs ({shown!r}), none once completed")

        # Delete the world, after a confirmation (cancelled once).
        nav.get_by_role("link", name="Worlds").click()
        page.get_by_role("button", name=f"Delete {WORLD}").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text(f"Delete the world “{WORLD}”?")
        shot(page, "09-delete-confirmation")
        dialog.get_by_role("button", name="Cancel").click()
        expect(page.get_by_role("link", name=WORLD)).to_be_visible()
        page.get_by_role("button", name=f"Delete {WORLD}").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete world").click()
        expect(page.get_by_text("No worlds yet")).to_be_visible()
        expect(page.locator("#status")).to_contain_text("deleted")
        shot(page, "10-world-deleted")
        step("the world is deleted after a confirmation")

        browser.close()

    strays = [url for url in requests if not (url == origin or url.startswith(origin + "/"))]
    assert not strays, f"requests left for another origin: {strays}"
    assert not problems, "the page logged errors:\n" + "\n".join(problems)
    print(f"  {len(requests)} requests, all to {origin}; no page errors")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as err:
        print(f"console_test: FAILED: {err}", file=sys.stderr)
        raise
