//! The `quarry` client commands, run as the real binary against a real server: a folder in, a
//! world out, a retrieve answered, a re-run that uploads nothing; and each failure's exit code.

use std::process::Output;

use serde_json::Value;

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TOKEN, TestApp, on_fake_google, spawn_app_with};

/// Runs `quarry ARGS --url APP --token TOKEN --json`.
async fn quarry(app: &TestApp, token: &str, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_quarry"));
    command
        .args(args)
        .args(["--url", &app.url(""), "--token", token, "--json"])
        .env_remove("QUARRY_URL")
        .env_remove("QUARRY_TOKEN");
    command.output().await.expect("the quarry binary runs")
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// `COMMAND FOLDER` into the world `Isles`, made on the fake Google provider if missing.
fn into_isles<'a>(command: &'a str, folder: &'a str) -> Vec<&'a str> {
    vec![
        command,
        folder,
        "--world",
        "Isles",
        "--create",
        "--provider",
        "google",
        "--model",
        "gemini-embedding-001",
    ]
}

fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == kind).collect()
}

#[tokio::test]
async fn a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("lighthouse.md"),
        "# The lighthouse\n\nThe keeper climbs the tower every evening.",
    )
    .unwrap();
    std::fs::write(
        root.join("seals.txt"),
        "Seals have their young on the skerries in autumn.",
    )
    .unwrap();
    std::fs::create_dir(root.join("council")).unwrap();
    std::fs::write(
        root.join("council/index.html"),
        "<html><head><title>The council</title></head><body><nav>Home · About</nav><main><h1>The council</h1>\
         <p>Harbour masters are chosen by lot every spring.</p></main></body></html>",
    )
    .unwrap();
    std::fs::write(root.join("notes.log"), "not a document").unwrap();
    std::fs::write(root.join("secret.md"), "left out by .gitignore").unwrap();
    std::fs::write(root.join(".gitignore"), "secret.md\n").unwrap();
    let folder = root.to_str().unwrap();
    let args = into_isles("ingest", folder);

    let first = quarry(&app, TOKEN, &args).await;
    assert!(first.status.success(), "{first:?}");
    let out = lines(&first);
    let uploaded: Vec<&str> = events(&out, "uploaded")
        .iter()
        .map(|l| l["file"].as_str().unwrap())
        .collect();
    assert_eq!(uploaded.len(), 3, "{uploaded:?}");
    assert!(
        uploaded
            .iter()
            .all(|f| !f.ends_with("secret.md") && !f.ends_with("notes.log"))
    );
    let done = events(&out, "done");
    assert_eq!(done.len(), 1, "{out:?}");
    assert!(done[0]["total"].as_u64().unwrap() > 0);
    assert_eq!(done[0]["embedded"], done[0]["total"], "followed to the end: {out:?}");
    assert!(!events(&out, "progress").is_empty(), "the jobs' events were followed");

    let sources = quarry(&app, TOKEN, &["sources", "Isles"]).await;
    assert!(sources.status.success());
    let sources = lines(&sources);
    assert_eq!(sources.len(), 3);
    let council = sources.iter().find(|s| s["filename"] == "index.html").unwrap();
    assert_eq!(council["title"], "The council", "the page's title names it");

    let answer = quarry(
        &app,
        TOKEN,
        &["retrieve", "Isles", "who climbs the tower", "--top-k", "1"],
    )
    .await;
    assert!(answer.status.success(), "{answer:?}");
    let answer = &lines(&answer)[0];
    assert!(
        answer["context"]["text"]
            .as_str()
            .unwrap()
            .contains("The keeper climbs the tower"),
        "{answer}"
    );

    // Again: every file is already there.
    let again = quarry(&app, TOKEN, &args).await;
    assert!(again.status.success(), "{again:?}");
    let out = lines(&again);
    assert!(events(&out, "uploaded").is_empty(), "{out:?}");
    assert_eq!(events(&out, "skipped").len(), 3);
    let worlds = lines(&quarry(&app, TOKEN, &["worlds"]).await);
    assert_eq!(worlds.len(), 1, "no second world: {worlds:?}");
    assert_eq!(worlds[0]["stats"]["sources"], 3);

    // README's `--exclude 'drafts/**'`: a new draft is left out, then taken without it.
    std::fs::create_dir(root.join("drafts")).unwrap();
    std::fs::write(
        root.join("drafts/next.md"),
        "The next chapter tells of the northern fleet.",
    )
    .unwrap();
    let mut excluding = args.to_vec();
    excluding.extend(["--exclude", "drafts/**"]);
    let out = lines(&quarry(&app, TOKEN, &excluding).await);
    assert!(events(&out, "uploaded").is_empty(), "{out:?}");
    let out = lines(&quarry(&app, TOKEN, &args).await);
    assert_eq!(events(&out, "uploaded").len(), 1, "{out:?}");

    // `quarry jobs Isles --watch` returns once no job is queued or running.
    let watched = quarry(&app, TOKEN, &["jobs", "Isles", "--watch"]).await;
    assert!(watched.status.success(), "{watched:?}");
    let jobs = lines(&watched);
    assert_eq!(jobs.len(), 4, "{jobs:?}");
    assert!(jobs.iter().all(|j| j["status"] == "completed"), "{jobs:?}");
}

#[tokio::test]
async fn each_failure_has_its_exit_code() {
    let app = spawn_app_with(|_| {}).await;
    let code = |output: Output| output.status.code();
    // 3: the token is not accepted.
    assert_eq!(code(quarry(&app, "wrong-token", &["worlds"]).await), Some(3));
    // 4: no such world.
    assert_eq!(code(quarry(&app, TOKEN, &["sources", "Atlantis"]).await), Some(4));
    let missing = quarry(&app, TOKEN, &["retrieve", "Atlantis", "where"]).await;
    assert_eq!(code(missing.clone()), Some(4));
    let error = &lines(&missing)[0];
    assert!(
        error["error"]["message"].as_str().unwrap().contains("Atlantis"),
        "{error}"
    );
    // 2: bad arguments, locally or as the server judges them.
    assert_eq!(
        code(quarry(&app, TOKEN, &["ingest", "/no/such/path", "--world", "Isles"]).await),
        Some(2)
    );
    assert_eq!(
        code(quarry(&app, TOKEN, &["retrieve"]).await),
        Some(2),
        "clap's usage error"
    );
    let world = app.create_local_world("Isles").await;
    let too_many = quarry(
        &app,
        TOKEN,
        &["retrieve", world["id"].as_str().unwrap(), "x", "--top-k", "5000"],
    )
    .await;
    assert_eq!(code(too_many), Some(2));
    // 1: nothing listens there.
    let mut dead = tokio::process::Command::new(env!("CARGO_BIN_EXE_quarry"));
    dead.args(["worlds", "--url", "http://127.0.0.1:9", "--token", TOKEN, "--json"]);
    assert_eq!(dead.output().await.unwrap().status.code(), Some(1));
}

/// A symbolic link planted in the folder cannot send a file from outside it: `ingest` skips
/// links out of the tree (naming them) unless told `--follow-links`; a link inside the tree is
/// read.
#[tokio::test]
async fn ingest_does_not_follow_links_out_of_the_tree_unless_told() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.txt"), "The vault code is 4711.").unwrap();
    std::fs::create_dir(outside.path().join("elsewhere")).unwrap();
    std::fs::write(outside.path().join("elsewhere/more.md"), "More from elsewhere.").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("harbour.md"), "The harbour opens at dawn.").unwrap();
    std::os::unix::fs::symlink(outside.path().join("private.txt"), root.join("notes.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("elsewhere"), root.join("linked")).unwrap();
    std::os::unix::fs::symlink(root.join("harbour.md"), root.join("same.txt")).unwrap();
    let folder = root.to_str().unwrap();
    let args = into_isles("ingest", folder);
    let first = quarry(&app, TOKEN, &args).await;
    assert!(first.status.success(), "{first:?}");
    let out = lines(&first);
    let mut uploaded: Vec<&str> = events(&out, "uploaded")
        .iter()
        .map(|l| l["file"].as_str().unwrap())
        .collect();
    uploaded.sort_unstable();
    assert!(
        uploaded
            .iter()
            .all(|f| !f.ends_with("notes.md") && !f.ends_with("more.md")),
        "{uploaded:?}"
    );
    assert!(uploaded.iter().any(|f| f.ends_with("harbour.md")), "{uploaded:?}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("notes.md") && stderr.contains("--follow-links"),
        "{stderr}"
    );

    let mut following = args.to_vec();
    following.push("--follow-links");
    let out = lines(&quarry(&app, TOKEN, &following).await);
    let uploaded: Vec<&str> = events(&out, "uploaded")
        .iter()
        .map(|l| l["file"].as_str().unwrap())
        .collect();
    assert!(uploaded.iter().any(|f| f.ends_with("notes.md")), "{out:?}");
    assert!(uploaded.iter().any(|f| f.ends_with("more.md")), "{out:?}");
}

/// The keys of a world's sources (by `quarry sources`), sorted, with their versions.
async fn keyed_sources(app: &TestApp, world: &str) -> Vec<(String, u64)> {
    let out = quarry(app, TOKEN, &["sources", world]).await;
    assert!(out.status.success(), "{out:?}");
    let mut keys: Vec<(String, u64)> = lines(&out)
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap_or("<none>").to_owned(),
                s["version"].as_u64().unwrap(),
            )
        })
        .collect();
    keys.sort();
    keys
}

fn keys<'a>(plan: &'a Value, field: &str) -> Vec<&'a str> {
    plan[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect()
}

/// `quarry sync` on a temporary folder: the first run adds everything under relative-path keys;
/// after an edit, a rename (delete + add) and a deletion, `--dry-run` prints that plan and
/// changes nothing, a run without `--delete` adds and replaces but keeps the gone files' sources
/// (listed as kept), and `--delete` removes them; the edited file answers with its new text only.
#[tokio::test]
async fn sync_mirrors_a_folder_adding_replacing_and_deleting_only_when_told() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("guides")).unwrap();
    std::fs::write(root.join("ferry.md"), "The ferry leaves at nine from the north pier.").unwrap();
    std::fs::write(
        root.join("tides.txt"),
        "Spring tides come two days after the full moon.",
    )
    .unwrap();
    std::fs::write(
        root.join("guides/birds.md"),
        "Puffins nest on the western cliffs in May.",
    )
    .unwrap();
    std::fs::write(root.join("guides/draft.md"), "Not ready yet.").unwrap();
    std::fs::write(root.join(".gitignore"), "guides/draft.md\n").unwrap();
    let folder = root.to_str().unwrap();
    let sync = |extra: &'static [&'static str]| {
        let mut args = into_isles("sync", folder);
        args.extend_from_slice(extra);
        args
    };

    let first = quarry(&app, TOKEN, &sync(&[])).await;
    assert!(first.status.success(), "{first:?}");
    let out = lines(&first);
    let plan = events(&out, "plan")[0];
    assert_eq!(
        keys(plan, "add"),
        ["ferry.md", "guides/birds.md", "tides.txt"],
        "{plan}"
    );
    assert_eq!(events(&out, "added").len(), 3, "{out:?}");
    assert_eq!(events(&out, "done")[0]["embedded"], events(&out, "done")[0]["total"]);
    assert_eq!(
        keyed_sources(&app, "Isles").await,
        [
            ("ferry.md".into(), 1),
            ("guides/birds.md".into(), 1),
            ("tides.txt".into(), 1)
        ]
    );

    // Edit one, rename one, delete one.
    std::fs::write(root.join("ferry.md"), "The ferry leaves at ten from the south pier.").unwrap();
    std::fs::rename(root.join("tides.txt"), root.join("tide-tables.txt")).unwrap();
    std::fs::remove_file(root.join("guides/birds.md")).unwrap();

    let dry = quarry(&app, TOKEN, &sync(&["--dry-run", "--delete"])).await;
    assert!(dry.status.success(), "{dry:?}");
    let out = lines(&dry);
    assert_eq!(out.len(), 1, "a dry run prints the plan only: {out:?}");
    let plan = &out[0];
    assert_eq!(keys(plan, "delete"), ["guides/birds.md", "tides.txt"], "{plan}");
    assert_eq!(keys(plan, "add"), ["tide-tables.txt"]);
    assert_eq!(keys(plan, "replace"), ["ferry.md"]);
    assert_eq!(plan["unchanged"], 0);
    assert_eq!(
        keyed_sources(&app, "Isles").await,
        [
            ("ferry.md".into(), 1),
            ("guides/birds.md".into(), 1),
            ("tides.txt".into(), 1)
        ],
        "a dry run changes nothing"
    );

    let kept = quarry(&app, TOKEN, &sync(&[])).await;
    assert!(kept.status.success(), "{kept:?}");
    let out = lines(&kept);
    let plan = events(&out, "plan")[0];
    assert_eq!(keys(plan, "kept"), ["guides/birds.md", "tides.txt"], "{plan}");
    assert!(keys(plan, "delete").is_empty());
    let synced = events(&out, "synced")[0];
    assert_eq!(
        (
            &synced["added"],
            &synced["replaced"],
            &synced["deleted"],
            &synced["kept"]
        ),
        (&1.into(), &1.into(), &0.into(), &2.into()),
        "{synced}"
    );
    assert_eq!(events(&out, "done")[0]["embedded"], events(&out, "done")[0]["total"]);
    assert_eq!(
        keyed_sources(&app, "Isles").await,
        [
            ("ferry.md".into(), 2),
            ("guides/birds.md".into(), 1),
            ("tide-tables.txt".into(), 1),
            ("tides.txt".into(), 1)
        ]
    );

    let pruned = quarry(&app, TOKEN, &sync(&["--delete"])).await;
    assert!(pruned.status.success(), "{pruned:?}");
    let out = lines(&pruned);
    assert_eq!(events(&out, "deleted").len(), 2, "{out:?}");
    let synced = events(&out, "synced")[0];
    assert_eq!(
        (&synced["unchanged"], &synced["deleted"]),
        (&2.into(), &2.into()),
        "{synced}"
    );
    assert_eq!(
        keyed_sources(&app, "Isles").await,
        [("ferry.md".into(), 2), ("tide-tables.txt".into(), 1)]
    );

    let answer = quarry(
        &app,
        TOKEN,
        &["retrieve", "Isles", "when does the ferry leave", "--top-k", "3"],
    )
    .await;
    let text = lines(&answer)[0]["context"]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("at ten from the south pier"), "{text}");
    assert!(!text.contains("at nine"), "the old version is gone: {text}");

    // A run with nothing to do changes nothing and says so.
    let idle = lines(&quarry(&app, TOKEN, &sync(&["--delete"])).await);
    let plan = events(&idle, "plan")[0];
    assert_eq!(plan["unchanged"], 2, "{plan}");
    assert!(keys(plan, "add").is_empty() && keys(plan, "replace").is_empty() && keys(plan, "delete").is_empty());
}

/// `ingest` of a file whose key (its path under the folder named) the world has replaces that
/// source with a new version instead of adding a second source.
#[tokio::test]
async fn ingest_replaces_a_file_it_has_under_the_same_key() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ferry.md"), "The ferry leaves at nine.").unwrap();
    let folder = dir.path().to_str().unwrap();
    let args = into_isles("ingest", folder);
    let first = quarry(&app, TOKEN, &args).await;
    assert!(first.status.success(), "{first:?}");
    std::fs::write(dir.path().join("ferry.md"), "The ferry leaves at ten.").unwrap();
    let second = quarry(&app, TOKEN, &args).await;
    assert!(second.status.success(), "{second:?}");
    let out = lines(&second);
    assert_eq!(events(&out, "replaced").len(), 1, "{out:?}");
    assert_eq!(events(&out, "done")[0]["embedded"], events(&out, "done")[0]["total"]);
    assert_eq!(keyed_sources(&app, "Isles").await, [("ferry.md".into(), 2)]);
}

/// What `sync` refuses before it changes anything: a path that does not exist (2), a world
/// that does not exist without `--create` (4).
#[tokio::test]
async fn sync_refuses_a_missing_folder_or_world() {
    let app = spawn_app_with(|_| {}).await;
    let code = |output: Output| output.status.code();
    assert_eq!(
        code(quarry(&app, TOKEN, &["sync", "/no/such/folder", "--world", "Isles"]).await),
        Some(2)
    );
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    assert_eq!(
        code(quarry(&app, TOKEN, &["sync", folder, "--world", "Atlantis"]).await),
        Some(4)
    );
    assert!(lines(&quarry(&app, TOKEN, &["worlds"]).await).is_empty());
}

/// A `read` token retrieves and lists through the CLI; ingesting with it exits 3 and names the
/// scope it lacks, and leaves the world as it was.
#[tokio::test]
async fn a_read_token_retrieves_but_cannot_ingest() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lighthouse.md"),
        "The keeper climbs the tower every evening.",
    )
    .unwrap();
    let folder = dir.path().to_str().unwrap();
    assert!(
        quarry(&app, TOKEN, &into_isles("ingest", folder))
            .await
            .status
            .success()
    );
    let (status, made) = app
        .post("/v1/tokens", serde_json::json!({"name": "reader", "scopes": ["read"]}))
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{made}");
    let reader = made["secret"].as_str().unwrap();

    let answer = quarry(&app, reader, &["retrieve", "Isles", "who climbs the tower"]).await;
    assert!(answer.status.success(), "{answer:?}");
    assert!(
        lines(&answer)[0]["context"]["text"]
            .as_str()
            .unwrap()
            .contains("The keeper climbs"),
    );
    assert!(quarry(&app, reader, &["sources", "Isles"]).await.status.success());

    std::fs::write(dir.path().join("seals.txt"), "Seals have their young in autumn.").unwrap();
    let refused = quarry(&app, reader, &["ingest", folder, "--world", "Isles"]).await;
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stdout).to_string() + &String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("insufficient_scope") && said.contains("`ingest`"),
        "{said}"
    );
    assert_eq!(lines(&quarry(&app, TOKEN, &["sources", "Isles"]).await).len(), 1);
}

/// The JSON lines of a run of `quarry`, after checking that it exited 0.
fn succeeded(output: &Output) -> Vec<Value> {
    assert!(output.status.success(), "{output:?}");
    lines(output)
}

/// `quarry eval` on a world ingested by the CLI: a JSON Lines file becomes a test set, a run
/// under two settings at two budgets prints a score line for each pair and a completed run
/// line; a second run of the same set (by `--eval`) compares with the first, the set found
/// from the run id alone or named.
#[tokio::test]
async fn eval_scores_a_test_set_from_a_file_and_compares_two_runs() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("lighthouse.md"), "The keeper climbs the tower every evening.").unwrap();
    std::fs::write(
        docs.join("seals.txt"),
        "Seals have their young on the skerries in autumn.",
    )
    .unwrap();
    let ingested = quarry(&app, TOKEN, &into_isles("ingest", docs.to_str().unwrap())).await;
    let done = succeeded(&ingested);
    let done = events(&done, "done")[0];
    assert_eq!(done["embedded"], done["total"], "{done}");

    let set = dir.path().join("faq.jsonl");
    std::fs::write(
        &set,
        concat!(
            r#"{"query": "who climbs the tower every evening", "expected": {"source_keys": ["lighthouse.md"]}}"#,
            "\n\n",
            r#"{"query": "when do seals have their young", "expected": {"source_keys": ["seals.txt"], "answer": "Seals have their young on the skerries in autumn."}}"#,
            "\n",
            r#"{"query": "the keeper climbs the tower", "expected": {"answer": "The keeper climbs the tower every evening."}}"#,
            "\n",
        ),
    )
    .unwrap();
    let set = set.to_str().unwrap();
    let settings = r#"[{"top_k":2},{"top_k":1}]"#;
    let args = [
        "eval",
        "Isles",
        "--set",
        set,
        "--settings",
        settings,
        "--budgets",
        "256,1024",
    ];
    let first = succeeded(&quarry(&app, TOKEN, &args).await);
    let scores = events(&first, "score");
    let pairs: Vec<(u64, u64)> = (scores.iter())
        .map(|s| (s["setting"].as_u64().unwrap(), s["budget"].as_u64().unwrap()))
        .collect();
    assert_eq!(pairs, [(0, 256), (0, 1024), (1, 256), (1, 1024)], "{first:?}");
    assert_eq!(scores[2]["settings"], serde_json::json!({"top_k": 1}));
    for s in &scores {
        for figure in ["hit_at_1", "hit_at_5", "mrr_at_10", "answer_share", "fully"] {
            let v = s[figure]
                .as_f64()
                .unwrap_or_else(|| panic!("{figure} is a number: {s}"));
            assert!((0.0..=1.0).contains(&v), "{figure}: {s}");
        }
        assert!(s["latency_p50_ms"].as_f64().unwrap() >= 0.0, "{s}");
    }
    let run = first.last().unwrap();
    assert_eq!(
        (&run["event"], &run["status"]),
        (&"run".into(), &"completed".into()),
        "{run}"
    );
    let (a, eval_id) = (run["run_id"].as_str().unwrap(), run["eval_id"].as_str().unwrap());
    let (status, made) = app
        .get(&format!("/v1/worlds/{}/evals/{eval_id}", world_id(&app).await))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{made}");
    assert_eq!(
        (&made["name"], &made["item_count"]),
        (&"faq".into(), &3.into()),
        "named after the file"
    );

    // The same set again (by id), one setting given as an object.
    let second = succeeded(
        &quarry(
            &app,
            TOKEN,
            &[
                "eval",
                "Isles",
                "--eval",
                eval_id,
                "--settings",
                r#"{"top_k":1}"#,
                "--budgets",
                "1024",
            ],
        )
        .await,
    );
    assert_eq!(events(&second, "score").len(), 1, "{second:?}");
    let run = second.last().unwrap();
    assert_eq!(
        (&run["status"], &run["eval_id"]),
        (&"completed".into(), &eval_id.into())
    );
    let b = run["run_id"].as_str().unwrap();

    for extra in [&[][..], &["--eval", eval_id][..]] {
        let mut args = vec!["eval", "Isles", "--compare", a, b];
        args.extend_from_slice(extra);
        let compared = succeeded(&quarry(&app, TOKEN, &args).await);
        let deltas = events(&compared, "delta");
        assert_eq!(deltas.len(), 1, "setting 0 at the budget both measured: {compared:?}");
        assert_eq!((&deltas[0]["setting"], &deltas[0]["budget"]), (&0.into(), &1024.into()));
        let last = compared.last().unwrap();
        assert_eq!(last["event"], "compare", "{compared:?}");
        assert_eq!(last["items_compared"], 3, "{last}");
        let changed = events(&compared, "better").len() + events(&compared, "worse").len();
        assert_eq!(
            changed as u64,
            last["better"].as_u64().unwrap() + last["worse"].as_u64().unwrap(),
            "{compared:?}"
        );
    }
}

/// The id of the world `Isles`.
async fn world_id(app: &TestApp) -> String {
    let worlds = lines(&quarry(app, TOKEN, &["worlds"]).await);
    let isles = worlds.iter().find(|w| w["name"] == "Isles").expect("the world Isles");
    isles["id"].as_str().unwrap().to_owned()
}

/// What `quarry eval` refuses, and with which exit code: a line that is not JSON (2, the line
/// named), an item the server refuses (2, its line named), arguments that do not go together
/// (2), a world that does not exist (4), a run to compare that does not exist (4).
#[tokio::test]
async fn eval_refuses_a_bad_file_a_missing_world_or_run_with_their_exit_codes() {
    let app = spawn_app_with(|_| {}).await;
    let world = app.create_local_world("Isles").await;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    std::fs::write(
        &good,
        r#"{"query": "who keeps the tower", "expected": {"answer": "the keeper"}}"#,
    )
    .unwrap();
    let good = good.to_str().unwrap();
    let said = |output: &Output| {
        String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr)
    };

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"query\": \"who keeps the tower\", \"expected\": {\"answer\": \"the keeper\"}}\n{\"query\": \"when\",\n",
    )
    .unwrap();
    let refused = quarry(&app, TOKEN, &["eval", "Isles", "--set", bad.to_str().unwrap()]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(said(&refused).contains("bad.jsonl, line 2"), "{}", said(&refused));

    let blank = dir.path().join("blank.jsonl");
    std::fs::write(
        &blank,
        "{\"query\": \"who keeps the tower\", \"expected\": {\"answer\": \"the keeper\"}}\n\n{\"query\": \" \", \"expected\": {\"answer\": \"x\"}}\n",
    )
    .unwrap();
    let refused = quarry(&app, TOKEN, &["eval", "Isles", "--set", blank.to_str().unwrap()]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let message = said(&refused);
    assert!(
        message.contains("blank.jsonl, line 3") && message.contains("items[1].query"),
        "{message}"
    );
    let (_, sets) = app
        .get(&format!("/v1/worlds/{}/evals", world["id"].as_str().unwrap()))
        .await;
    assert_eq!(sets["evals"], serde_json::json!([]), "nothing was made");

    for args in [
        &["eval", "Isles"][..],
        &["eval", "Isles", "--set", good, "--eval", "x"][..],
        &["eval", "Isles", "--set", good, "--budgets", "0"][..],
        &["eval", "Isles", "--set", good, "--settings", "[1]"][..],
    ] {
        assert_eq!(quarry(&app, TOKEN, args).await.status.code(), Some(2), "{args:?}");
    }

    let missing = quarry(&app, TOKEN, &["eval", "Atlantis", "--set", good]).await;
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");

    let (a, b) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let unknown = quarry(&app, TOKEN, &["eval", "Isles", "--compare", &a, &b]).await;
    assert_eq!(unknown.status.code(), Some(4), "{unknown:?}");
    let (status, set) = app
        .post(
            &format!("/v1/worlds/{}/evals", world["id"].as_str().unwrap()),
            serde_json::json!({"name": "FAQ", "items": [{"query": "q", "expected": {"answer": "a"}}]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{set}");
    let named = quarry(
        &app,
        TOKEN,
        &[
            "eval",
            "Isles",
            "--compare",
            &a,
            &b,
            "--eval",
            set["eval_id"].as_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(named.status.code(), Some(4), "{named:?}");
    assert!(said(&named).contains("eval_run_not_found"), "{}", said(&named));
}
