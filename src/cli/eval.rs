//! `quarry eval WORLD`: measure a world's retrieval on a test set. With `--set FILE.jsonl` the
//! file's items (one `{"query", "expected"}` object a line) become a new test set; with `--eval
//! ID` an existing set is taken. A run of it is started under `--settings` and `--budgets`,
//! read every 500 ms until it ends (a progress bar on a terminal; Ctrl-C stops following, not
//! the run) and its scores printed, one row per setting and budget. `--compare A B` prints how
//! run B differs from run A instead: each figure's change and the items that got better or
//! worse.

use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::{Client, Exit, Failed, Result, failed};

/// How often a run being followed is read.
const POLL: Duration = Duration::from_millis(500);

/// Reads in a row that may find the server unreachable (a restart) before following gives up.
const UNREACHABLE_TRIES: u32 = 30;

/// The worse items a comparison lists on a terminal (`--json` gives them all).
const WORSE_SHOWN: usize = 10;

/// What `quarry eval` is told.
#[derive(Debug, Default, clap::Args)]
pub struct EvalOptions {
    /// The world's name or id.
    pub world: String,
    /// A JSON Lines file, one item a line (`{"query": "…", "expected": {"source_keys": […],
    /// "answer": "…"}}`), to make a new test set of.
    #[arg(
        long,
        value_name = "FILE.jsonl",
        conflicts_with_all = ["eval", "compare"],
        required_unless_present_any = ["eval", "compare"]
    )]
    pub set: Option<PathBuf>,
    /// With --set: the test set's name (default: the file's name without its extension).
    #[arg(long, requires = "set")]
    pub name: Option<String>,
    /// An existing test set to run instead of --set; with --compare, the set both runs belong
    /// to (looked for when left out).
    #[arg(long, value_name = "EVAL_ID")]
    pub eval: Option<String>,
    /// The retrieval settings to score: a JSON array of `/retrieve` bodies without `query`
    /// (`[{"mode":"dense"},{"mode":"hybrid","top_k":5}]`) or one such object (default: the
    /// server's defaults).
    #[arg(long, value_name = "JSON", conflicts_with = "compare")]
    pub settings: Option<String>,
    /// Context budgets in tokens, comma-separated (default: the server's).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = clap::value_parser!(u32).range(1..),
        conflicts_with = "compare"
    )]
    pub budgets: Vec<u32>,
    /// Compare two completed runs of one test set: how run B differs from run A.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<String>>,
}

/// `quarry eval WORLD (--set FILE.jsonl | --eval EVAL_ID) …` or `quarry eval WORLD --compare A B`
pub async fn eval(client: &Client, options: EvalOptions) -> Result<Exit> {
    if let Some([a, b]) = options.compare.as_deref() {
        return compare(client, &options.world, (a, b), options.eval.as_deref()).await;
    }
    // The file and the settings are read before the server is asked anything: a mistake in
    // them is found without a test set half made.
    let set = options
        .set
        .as_deref()
        .map(|path| SetFile::read(path, options.name.as_deref()))
        .transpose()?;
    let settings = options.settings.as_deref().map(parse_settings).transpose()?;
    let world_id = client.world_id(&options.world).await?;
    let eval_id = match (set, options.eval) {
        (Some(set), _) => set.create(client, &world_id).await?,
        (None, Some(eval_id)) => eval_id,
        (None, None) => return Err(failed(Exit::Usage, "--set FILE.jsonl or --eval EVAL_ID is needed")),
    };
    let mut body = json!({});
    if let Some(settings) = settings {
        body["settings"] = settings;
    }
    if !options.budgets.is_empty() {
        body["budgets"] = json!(options.budgets);
    }
    let runs = format!("/v1/worlds/{world_id}/evals/{eval_id}/runs");
    let started = client.post(&runs, &body).await?;
    let run_id = text(&started["run_id"]);
    let path = format!("{runs}/{run_id}");
    let run = tokio::select! {
        run = follow(client, &path, started) => run?,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("\ninterrupted: run {run_id} goes on on the server; read it at GET {path}");
            return Ok(Exit::Interrupted);
        }
    };
    Ok(ended(client, &options.world, &run))
}

/// A test set read from a JSON Lines file.
struct SetFile {
    path: PathBuf,
    name: String,
    items: Vec<Value>,
    /// The line (from 1) each item was read from.
    lines: Vec<usize>,
}

impl SetFile {
    /// Reads `path`: each line that is not blank is one item, a JSON object; the name is
    /// `name` or the file's stem.
    fn read(path: &Path, name: Option<&str>) -> Result<Self> {
        let shown = path.display();
        let content = std::fs::read_to_string(path).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => failed(Exit::Usage, format!("{shown} does not exist")),
            std::io::ErrorKind::InvalidData => failed(Exit::Usage, format!("{shown} is not UTF-8 text")),
            _ => failed(Exit::Failure, format!("reading {shown}: {err}")),
        })?;
        let (mut items, mut lines) = (Vec::new(), Vec::new());
        for (i, line) in content.trim_start_matches('\u{feff}').lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let item: Value = serde_json::from_str(line).map_err(|err| {
                // serde_json ends its message with the place in the line read; the line is
                // named here.
                let message = err.to_string();
                let message = message.split(" at line ").next().unwrap_or_default();
                failed(
                    Exit::Usage,
                    format!("{shown}, line {n}: not valid JSON ({message}, column {})", err.column()),
                )
            })?;
            if !item.is_object() {
                return Err(failed(
                    Exit::Usage,
                    format!("{shown}, line {n}: an item is a JSON object, {{\"query\": …, \"expected\": {{…}}}}"),
                ));
            }
            items.push(item);
            lines.push(n);
        }
        if items.is_empty() {
            return Err(failed(Exit::Usage, format!("{shown} holds no items")));
        }
        let name = match name {
            Some(name) => name.to_owned(),
            None => path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        Ok(Self {
            path: path.to_path_buf(),
            name,
            items,
            lines,
        })
    }

    /// Creates the test set in the world; returns its id. A refused item is named by its line.
    async fn create(self, client: &Client, world_id: &str) -> Result<String> {
        let body = json!({"name": self.name, "items": self.items});
        let made = client
            .post(&format!("/v1/worlds/{world_id}/evals"), &body)
            .await
            .map_err(|failure| self.locate(failure))?;
        let eval_id = text(&made["eval_id"]);
        if !client.json {
            eprintln!(
                "test set {} made from {}: {} item(s), id {eval_id}",
                self.name,
                self.path.display(),
                self.items.len()
            );
        }
        Ok(eval_id)
    }

    /// `failure` with the line of the item its field names (`items[3].query`), when it names
    /// one.
    fn locate(&self, failure: Failed) -> Failed {
        let line = (failure.field.as_deref())
            .and_then(|field| field.strip_prefix("items["))
            .and_then(|rest| rest.split(']').next())
            .and_then(|index| index.parse::<usize>().ok())
            .and_then(|index| self.lines.get(index));
        match (line, &failure.field) {
            (Some(line), Some(field)) => Failed {
                message: format!("{}, line {line}: {} ({field})", self.path.display(), failure.message),
                ..failure
            },
            _ => failure,
        }
    }
}

/// `--settings`: an array of objects, or one object (a run of one setting).
fn parse_settings(sent: &str) -> Result<Value> {
    let refused = |why: String| failed(Exit::Usage, format!("--settings: {why}"));
    let settings: Value = serde_json::from_str(sent).map_err(|err| refused(format!("not valid JSON ({err})")))?;
    let settings = match settings {
        Value::Object(_) => Value::Array(vec![settings]),
        Value::Array(ref each) if each.iter().all(Value::is_object) => settings,
        _ => {
            return Err(refused(
                "a JSON object, or an array of them: /retrieve bodies without `query`".to_owned(),
            ));
        }
    };
    Ok(settings)
}

/// Reads the run at `path` every [`POLL`] until it has ended, with a progress bar on a
/// terminal; returns it as it ended.
async fn follow(client: &Client, path: &str, mut run: Value) -> Result<Value> {
    let bar = if client.json {
        ProgressBar::hidden()
    } else {
        let style = ProgressStyle::with_template("{prefix:>20!} [{bar:30}] {pos}/{len} items, eta {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        ProgressBar::new(0)
            .with_style(style)
            .with_prefix(text(&run["eval_name"]))
    };
    let mut unreachable = 0u32;
    loop {
        let status = text(&run["status"]);
        bar.set_length(run["progress"]["total"].as_u64().unwrap_or(0));
        bar.set_position(run["progress"]["done"].as_u64().unwrap_or(0));
        match status.as_str() {
            // The bar goes: what follows (the scores, or why there are none) says how it ended.
            "completed" | "failed" | "cancelled" => {
                bar.finish_and_clear();
                return Ok(run);
            }
            _ if unreachable == 0 => bar.set_message(status),
            _ => bar.set_message("the server does not answer; trying again"),
        }
        tokio::time::sleep(POLL).await;
        match client.get(path).await {
            Ok(read) => {
                run = read;
                unreachable = 0;
            }
            // A server restarting takes the run up again: wait for it a while.
            Err(failure) if failure.exit == Exit::Failure && unreachable < UNREACHABLE_TRIES => unreachable += 1,
            Err(failure) => {
                bar.finish_and_clear();
                return Err(failure);
            }
        }
    }
}

/// Prints how `run` ended: its scores when it completed, its error when it failed; the exit
/// code says which.
fn ended(client: &Client, world: &str, run: &Value) -> Exit {
    let (run_id, eval_id, status) = (text(&run["run_id"]), text(&run["eval_id"]), text(&run["status"]));
    let completed = status == "completed";
    let scores = if completed { scores(run) } else { Vec::new() };
    if client.json {
        for line in &scores {
            client.line(line);
        }
        client.line(&json!({
            "event": "run", "run_id": run_id, "eval_id": eval_id, "status": status, "error": run["error"],
        }));
    } else if completed {
        print_scores(&scores);
        let measured = &run["measured"];
        println!();
        println!(
            "run {run_id} of test set {} ({eval_id}): {} item(s) on {}/{}",
            text(&run["eval_name"]),
            run["report"]["scored"],
            text(&measured["provider"]),
            text(&measured["model"]),
        );
        println!("compare a later run with: quarry eval {world} --compare {run_id} RUN_ID --eval {eval_id}");
    }
    match status.as_str() {
        "completed" => Exit::Ok,
        "failed" => {
            let error = run["error"].as_str().unwrap_or("no reason given");
            eprintln!("quarry: run {run_id} failed: {error}");
            Exit::Incomplete
        }
        _ => {
            eprintln!("quarry: run {run_id} was {status}");
            Exit::Incomplete
        }
    }
}

/// One `score` line per setting and budget of a run's report.
fn scores(run: &Value) -> Vec<Value> {
    let mut lines = Vec::new();
    for s in run["report"]["settings"].as_array().into_iter().flatten() {
        let settings = (s["setting"].as_u64())
            .and_then(|i| run["settings"].get(i as usize))
            .cloned()
            .unwrap_or_else(|| json!({}));
        for b in s["budgets"].as_array().into_iter().flatten() {
            lines.push(json!({
                "event": "score",
                "setting": s["setting"],
                "settings": settings,
                "budget": b["budget"],
                "hit_items": s["hit_items"],
                "hit_at_1": s["hit_at_1"],
                "hit_at_5": s["hit_at_5"],
                "mrr_at_10": s["mrr_at_10"],
                "answer_items": b["answer_items"],
                "answer_share": b["answer_share"],
                "fully": b["fully"],
                "latency_p50_ms": s["latency_p50_ms"],
                "latency_p95_ms": s["latency_p95_ms"],
            }));
        }
    }
    lines
}

/// The `score` lines as a table.
fn print_scores(scores: &[Value]) {
    let rows: Vec<Vec<String>> = (scores.iter())
        .map(|s| {
            vec![
                setting_label(&s["settings"]),
                s["budget"].to_string(),
                share(&s["hit_at_1"]),
                share(&s["hit_at_5"]),
                decimals(&s["mrr_at_10"], 3),
                share(&s["answer_share"]),
                share(&s["fully"]),
                decimals(&s["latency_p50_ms"], 1),
                decimals(&s["latency_p95_ms"], 1),
            ]
        })
        .collect();
    print_table(
        &[
            "setting", "budget", "hit@1", "hit@5", "MRR@10", "answer", "fully", "p50 ms", "p95 ms",
        ],
        &rows,
    );
}

/// `quarry eval WORLD --compare A B [--eval EVAL_ID]`
async fn compare(client: &Client, world: &str, (a, b): (&str, &str), eval_id: Option<&str>) -> Result<Exit> {
    let world_id = client.world_id(world).await?;
    let eval_id = match eval_id {
        Some(eval_id) => eval_id.to_owned(),
        None => set_of_run(client, &world_id, a).await?.ok_or_else(|| {
            failed(
                Exit::NotFound,
                format!("no test set of world `{world}` has a run `{a}`"),
            )
        })?,
    };
    let cmp = client
        .get(&format!("/v1/worlds/{world_id}/evals/{eval_id}/runs/{a}/compare/{b}"))
        .await?;
    let deltas = deltas(&cmp);
    let count = |kind: &str| cmp[kind].as_array().map_or(0, Vec::len);
    let (better, worse) = (count("better"), count("worse"));
    if client.json {
        for line in &deltas {
            client.line(line);
        }
        for kind in ["better", "worse"] {
            for item in cmp[kind].as_array().into_iter().flatten() {
                client.line(&json!({
                    "event": kind, "query": item["query"], "setting": item["setting"],
                    "before": item["before"], "after": item["after"],
                }));
            }
        }
        client.line(&json!({
            "event": "compare", "a": a, "b": b, "eval_id": eval_id, "items_compared": cmp["items_compared"],
            "better": better, "worse": worse, "mixed": cmp["mixed"],
        }));
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = (deltas.iter())
        .map(|d| {
            vec![
                d["setting"].to_string(),
                if d["budget"].is_null() {
                    "-".to_owned()
                } else {
                    d["budget"].to_string()
                },
                points(&d["hit_at_1"]),
                points(&d["hit_at_5"]),
                signed(&d["mrr_at_10"], 3, ""),
                points(&d["answer_share"]),
                points(&d["fully"]),
                signed(&d["latency_p50_ms"], 1, " ms"),
            ]
        })
        .collect();
    println!("run {b} against run {a} (settings by place; after − before):");
    print_table(
        &[
            "setting", "budget", "hit@1", "hit@5", "MRR@10", "answer", "fully", "p50",
        ],
        &rows,
    );
    println!();
    println!(
        "{} item(s) compared; better: {better}, worse: {worse}, mixed: {}",
        cmp["items_compared"], cmp["mixed"]
    );
    let listed = cmp["worse"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !listed.is_empty() {
        println!("worse:");
    }
    for item in listed.iter().take(WORSE_SHOWN) {
        println!(
            "  {:?} (setting {}): {}",
            text(&item["query"]),
            item["setting"],
            change(&item["before"], &item["after"])
        );
    }
    if listed.len() > WORSE_SHOWN {
        println!("  … and {} more (--json lists them all)", listed.len() - WORSE_SHOWN);
    }
    Ok(Exit::Ok)
}

/// The test set of world `world_id` that has run `run_id`, if any.
async fn set_of_run(client: &Client, world_id: &str, run_id: &str) -> Result<Option<String>> {
    for set in client.all(&format!("/v1/worlds/{world_id}/evals"), "evals").await? {
        let eval_id = text(&set["eval_id"]);
        let runs = client
            .all(&format!("/v1/worlds/{world_id}/evals/{eval_id}/runs"), "runs")
            .await?;
        if runs.iter().any(|run| run["run_id"] == run_id) {
            return Ok(Some(eval_id));
        }
    }
    Ok(None)
}

/// One `delta` line per setting and budget of a comparison (a setting without a budget both
/// runs measured: one line, its budget `null`).
fn deltas(cmp: &Value) -> Vec<Value> {
    let mut lines = Vec::new();
    for s in cmp["settings"].as_array().into_iter().flatten() {
        let budgets = s["budgets"].as_array().cloned().unwrap_or_default();
        let budgets = if budgets.is_empty() {
            vec![json!({"budget": null, "answer_share": null, "fully": null})]
        } else {
            budgets
        };
        for b in budgets {
            lines.push(json!({
                "event": "delta",
                "setting": s["setting"],
                "budget": b["budget"],
                "hit_at_1": s["hit_at_1"],
                "hit_at_5": s["hit_at_5"],
                "mrr_at_10": s["mrr_at_10"],
                "answer_share": b["answer_share"],
                "fully": b["fully"],
                "latency_p50_ms": s["latency_p50_ms"],
            }));
        }
    }
    lines
}

/// An item's outcome before → after: its first hit's rank and its answer's shares, each when
/// either run judged it.
fn change(before: &Value, after: &Value) -> String {
    let rank = |o: &Value| {
        o["first_hit"]
            .as_u64()
            .map_or_else(|| "none".to_owned(), |r| r.to_string())
    };
    let shares = |o: &Value| {
        (o["answer_share"].as_array().into_iter().flatten())
            .map(share)
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let judged_answer = |o: &Value| (o["answer_share"].as_array().into_iter().flatten()).any(|s| !s.is_null());
    let mut parts = Vec::new();
    if !before["first_hit"].is_null() || !after["first_hit"].is_null() {
        parts.push(format!("rank {} → {}", rank(before), rank(after)));
    }
    if judged_answer(before) || judged_answer(after) {
        parts.push(format!("answer {} → {}", shares(before), shares(after)));
    }
    parts.join("; ")
}

/// Prints `rows` in columns under `header`: the first left-aligned, the others right-aligned.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            (rows.iter().map(|row| row[c].chars().count()))
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let print = |cells: &mut dyn Iterator<Item = &str>| {
        let line: Vec<String> = (cells.zip(&widths).enumerate())
            .map(|(c, (cell, &width))| {
                if c == 0 {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        println!("{}", line.join("  ").trim_end());
    };
    print(&mut header.iter().copied());
    for row in rows {
        print(&mut row.iter().map(String::as_str));
    }
}

/// A setting as compact JSON; `{}` is the server's defaults.
fn setting_label(setting: &Value) -> String {
    match setting.as_object() {
        Some(fields) if fields.is_empty() => "defaults".to_owned(),
        _ => setting.to_string(),
    }
}

/// A share or rate as a percentage with one decimal (`66.7%`); `-` for null.
fn share(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// A figure with `places` decimals; `-` for null.
fn decimals(value: &Value, places: usize) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_owned(), |v| format!("{v:.places$}"))
}

/// A change of a share in percentage points (`+16.7 pts`); `-` for null.
fn points(value: &Value) -> String {
    signed(&value.as_f64().map(|v| v * 100.0).into(), 1, " pts")
}

/// A change with its sign and `places` decimals, then `unit`; `-` for null. A change that
/// rounds to nothing is `+0.0`, never `-0.0`.
fn signed(value: &Value, places: usize, unit: &str) -> String {
    let Some(v) = value.as_f64() else {
        return "-".to_owned();
    };
    let shown = format!("{v:.places$}");
    let v = if shown.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        0.0
    } else {
        v
    };
    format!("{v:+.places$}{unit}")
}

/// A JSON string's text; empty for anything else.
fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn figures_are_shown_as_percentages_points_and_signed_decimals() {
        assert_eq!(share(&json!(2.0 / 3.0)), "66.7%");
        assert_eq!(share(&Value::Null), "-");
        assert_eq!(decimals(&json!(0.5), 3), "0.500");
        assert_eq!(points(&json!(1.0 / 6.0)), "+16.7 pts");
        assert_eq!(points(&json!(-0.5)), "-50.0 pts");
        assert_eq!(points(&json!(-1e-12)), "+0.0 pts", "no negative zero");
        assert_eq!(signed(&json!(-1.0 / 12.0), 3, ""), "-0.083");
        assert_eq!(signed(&Value::Null, 1, " ms"), "-");
        assert_eq!(setting_label(&json!({})), "defaults");
        assert_eq!(setting_label(&json!({"top_k": 5})), r#"{"top_k":5}"#);
    }

    #[test]
    fn a_change_names_the_figures_either_run_judged() {
        let before = json!({"first_hit": 2, "answer_share": [null]});
        let after = json!({"first_hit": null, "answer_share": [null]});
        assert_eq!(change(&before, &after), "rank 2 → none");
        let before = json!({"first_hit": null, "answer_share": [1.0, 0.5]});
        let after = json!({"first_hit": null, "answer_share": [0.0, 0.5]});
        assert_eq!(change(&before, &after), "answer 100.0% / 50.0% → 0.0% / 50.0%");
    }

    #[test]
    fn settings_are_an_array_of_objects_or_one_object() {
        assert_eq!(
            parse_settings(r#"{"mode":"dense"}"#).unwrap(),
            json!([{"mode": "dense"}])
        );
        assert_eq!(
            parse_settings("[{}, {\"top_k\": 1}]").unwrap(),
            json!([{}, {"top_k": 1}])
        );
        for refused in ["[1]", "7", "{", "\"dense\""] {
            assert_eq!(parse_settings(refused).unwrap_err().exit, Exit::Usage, "{refused}");
        }
    }

    #[test]
    fn a_line_that_is_not_json_is_named_and_blank_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faq.jsonl");
        std::fs::write(
            &path,
            "{\"query\": \"a\", \"expected\": {\"answer\": \"b\"}}\n\n{\"query\": \n",
        )
        .unwrap();
        let failure = SetFile::read(&path, None).err().unwrap();
        assert_eq!(failure.exit, Exit::Usage);
        assert!(failure.message.contains("faq.jsonl, line 3"), "{}", failure.message);
        std::fs::write(&path, "\n{\"query\": \"a\", \"expected\": {\"answer\": \"b\"}}\n\n").unwrap();
        let set = SetFile::read(&path, None).unwrap();
        assert_eq!((set.name.as_str(), set.lines.as_slice()), ("faq", &[2][..]));
        let refused = Failed {
            field: Some("items[0].expected.answer".to_owned()),
            ..failed(Exit::Usage, "400 invalid_request: blank")
        };
        assert!(set.locate(refused).message.contains("faq.jsonl, line 2: 400"));
    }
}
