//! Retrieval quality on real questions: the Python FAQ (Debian package `python3-doc`), the Debian
//! FAQ (`debian-faq`) — both HTML — and the Vim FAQ (`vim-doc`, plain text), read from the files
//! those packages install. Every FAQ question is a query and its answer the target; the pages
//! are uploaded whole, as a user would (`--headless` takes the HTML pages' headings out, so that
//! a question is found only through its answer: the tables before 2026-11-28).
//!
//! quarry runs in-process as in `bench.rs` (SQLite and qdrant-edge in a temporary directory), on
//! the built-in `local` model (all-MiniLM-L6-v2; `scripts/fetch-model` installs it), with one
//! hybrid world per corpus on the default chunking. Each question is asked of every
//! configuration in [`configurations`] at each context budget of [`BUDGETS`], over HTTP.
//!
//! ```text
//! make bench-quality                                        # three corpora, every question, the peer
//! cargo +nightly run --release --example bench_quality -- --only python --limit 50
//! cargo +nightly test --release --example bench_quality     # the page readers' tests
//! ```
//!
//! Measures, per configuration (results are `top_k` 10 but for `defaults`):
//! - hit@1, hit@5: the share of questions with a result among the first 1 or 5 that overlaps
//!   the answer's char span in its source;
//! - MRR@10: the mean of 1 / rank of the first such result (0 when none of the 10 is);
//! - cov@B: with `max_context_tokens` B, the share of the answer's chars inside the spans the
//!   context cites (`context.citations`), averaged over the questions;
//! - full@B: the share of questions whose answer is fully in `context.text` ([`answer_share`]
//!   at least [`FULLY`]), the measure the peer — LangChain's `ParentDocumentRetriever` on the
//!   same model, pages and questions (`--peer`, `scripts/bench-langchain.py`) — gets too.
//!
//! The same figures are split by whether the question carries literal terms
//! (`quarry::service::retrieval::has_literal_terms`, what `hybrid` with fusion `auto` decides by),
//! and each configuration is compared with the first (`dense`) question by question: how many
//! answers it ranks higher and how many lower. Each corpus also reports how many of its
//! questions quarry's section detection finds.

#[path = "quality/faq.rs"]
mod faq;
#[path = "quality/text_faq.rs"]
mod text_faq;
// The harness also serves bench.rs; this example uses the server, client and table parts.
#[allow(dead_code)]
#[path = "bench/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use faq::{Page, Spec};
use harness::{Quarry, Result, Table};

const HELP: &str = "\
usage: bench_quality [options]
  --only LIST        corpora to run: python,debian,vim (default: all three)
  --configurations LIST  only these rows, by name, comma-separated (e.g. dense,defaults;
                     default: every row)
  --limit N          ask at most N questions per corpus, spread evenly over it (default: all)
  --model-dir DIR    the local model (default: models/all-minilm-l6-v2 of the repository)
  --model NAME       the local model id the worlds are on: all-MiniLM-L6-v2 (default) or
                     all-MiniLM-L6-v2-int8 (run once with each to compare them)
  --python-faq DIR   the Python FAQ's HTML (default: /usr/share/doc/python3-doc/html/faq)
  --debian-faq DIR   the Debian FAQ's HTML (default: /usr/share/doc/debian/FAQ)
  --vim-faq FILE     the Vim FAQ (default: /usr/share/doc/vim/FAQ.gz)
  --dump DIR         write each corpus's page texts and its pairs (pairs.tsv) under DIR/<corpus>/,
                     and stop there, without starting quarry
  --ranks DIR        write DIR/<corpus>-ranks.tsv: per question, the rank of the first result that
                     overlaps its answer under each configuration (- when none of the 10 does)
  --headless         upload the pages without their headings, so that a question is found only
                     through its answer (default: whole pages, as a user would upload them)
  --context-prefix   also load each corpus into a second world with chunking.context_prefix and
                     ask it as `dense`, `defaults` and `hybrid auto` do (rows marked `, prefix`)
  --peer PYTHON      also run LangChain's ParentDocumentRetriever on the same pages, questions and
                     model (scripts/bench-langchain.py with this Python; scripts/bench-langchain-setup
                     makes it: target/bench-langchain/bin/python)
";

/// Results asked for: the depth of MRR@10.
const TOP_K: u64 = 10;

/// Context budgets (`max_context_tokens`) at which coverage is measured.
const BUDGETS: [u32; 3] = [512, 1024, 2048];

/// One way of asking: a name for the tables and the settings added to every request.
struct Configuration {
    name: &'static str,
    settings: Value,
    /// Asked of the world whose chunks were embedded with a context prefix.
    prefixed: bool,
}

/// What is measured, in table order. To measure another setting, add a row here.
fn configurations(context_prefix: bool) -> Vec<Configuration> {
    let row = |name, settings| Configuration {
        name,
        settings,
        prefixed: false,
    };
    let prefixed = |name, settings| Configuration {
        name,
        settings,
        prefixed: true,
    };
    let mut rows = vec![
        row("dense", json!({"mode": "dense", "expand": "none"})),
        // What a request without settings gets (its own top_k too).
        row("defaults", json!({})),
        row("hybrid auto", json!({"mode": "hybrid", "expand": "none"})),
        row(
            "hybrid rrf 1:1",
            json!({"mode": "hybrid", "fusion": {"method": "rrf"}, "expand": "none"}),
        ),
        row(
            "hybrid dbsf",
            json!({"mode": "hybrid", "fusion": {"method": "dbsf"}, "expand": "none"}),
        ),
        row("dense + neighbors", json!({"mode": "dense", "expand": "neighbors"})),
        row("dense + parent", json!({"mode": "dense", "expand": "parent"})),
        row(
            "dense + parent, top_k 3",
            json!({"mode": "dense", "expand": "parent", "top_k": 3}),
        ),
        row("hybrid auto + parent", json!({"mode": "hybrid", "expand": "parent"})),
    ];
    if context_prefix {
        rows.extend([
            prefixed("dense, prefix", json!({"mode": "dense", "expand": "none"})),
            prefixed("defaults, prefix", json!({})),
            prefixed("hybrid auto, prefix", json!({"mode": "hybrid", "expand": "none"})),
        ]);
    }
    rows
}

#[derive(Debug)]
struct Options {
    corpora: Vec<String>,
    limit: Option<usize>,
    model_dir: PathBuf,
    /// The local model id every world is created with.
    model: String,
    /// Rows of [`configurations`] to ask, by name (`None`: all).
    only_configurations: Option<Vec<String>>,
    python_faq: Option<PathBuf>,
    debian_faq: Option<PathBuf>,
    vim_faq: Option<PathBuf>,
    dump: Option<PathBuf>,
    ranks: Option<PathBuf>,
    /// Pages without their headings (the tables before 2026-11-28): a question is found only
    /// through its answer.
    headless: bool,
    /// The Python of `scripts/bench-langchain-setup`'s environment: run the LangChain peer.
    peer: Option<PathBuf>,
    /// Also measure worlds whose chunks are embedded with a context prefix.
    context_prefix: bool,
}

fn parse_args(args: &[String]) -> std::result::Result<Options, String> {
    let mut o = Options {
        corpora: vec!["python".into(), "debian".into(), "vim".into()],
        limit: None,
        model_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-minilm-l6-v2"),
        model: quarry::providers::local::MODEL_NAME.into(),
        only_configurations: None,
        python_faq: None,
        debian_faq: None,
        vim_faq: None,
        dump: None,
        ranks: None,
        headless: false,
        peer: None,
        context_prefix: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(HELP.into());
        }
        if flag == "--headless" {
            o.headless = true;
            continue;
        }
        if flag == "--context-prefix" {
            o.context_prefix = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n\n{HELP}"))?;
        match flag.as_str() {
            "--only" => {
                o.corpora = value.split(',').map(|c| c.trim().to_owned()).collect();
                if let Some(bad) = o
                    .corpora
                    .iter()
                    .find(|c| !["python", "debian", "vim"].contains(&c.as_str()))
                {
                    return Err(format!("--only: unknown corpus `{bad}` (python, debian or vim)"));
                }
            }
            "--limit" => match value.parse::<usize>() {
                Ok(n) if n > 0 => o.limit = Some(n),
                _ => return Err(format!("--limit: `{value}` is not a positive number")),
            },
            "--model-dir" => o.model_dir = value.into(),
            "--configurations" => {
                let names: Vec<String> = value.split(',').map(str::to_owned).collect();
                let known = configurations(true);
                if let Some(bad) = names.iter().find(|n| !known.iter().any(|c| c.name == n.as_str())) {
                    return Err(format!("--configurations: unknown row `{bad}`"));
                }
                o.only_configurations = Some(names);
            }
            "--model" => match quarry::providers::local::LocalModel::from_name(value) {
                Some(model) => o.model = model.name().into(),
                None => return Err(format!("--model: `{value}` is not a local model id")),
            },
            "--python-faq" => o.python_faq = Some(value.into()),
            "--debian-faq" => o.debian_faq = Some(value.into()),
            "--vim-faq" => o.vim_faq = Some(value.into()),
            "--dump" => o.dump = Some(value.into()),
            "--ranks" => o.ranks = Some(value.into()),
            "--peer" => o.peer = Some(value.into()),
            _ => return Err(format!("unknown option {flag}\n\n{HELP}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("{message}");
            return if args.iter().any(|a| a == "--help" || a == "-h") {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("bench_quality: cannot start tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_quality: {err}");
            ExitCode::FAILURE
        }
    }
}

fn progress(message: impl AsRef<str>) {
    eprintln!("[bench_quality] {}", message.as_ref());
}

async fn run(o: Options) -> Result<()> {
    let started = Instant::now();
    // Every corpus is read before quarry starts, so a missing package fails at once.
    let mut corpora = Vec::new();
    for name in &o.corpora {
        let corpus = match name.as_str() {
            "vim" => {
                let spec = text_faq::TextSpec::vim(o.vim_faq.clone());
                // Plain text has no headings to take out: always whole.
                let pages = text_faq::load(&spec)?;
                Corpus {
                    name: spec.name,
                    package: spec.package,
                    pages,
                }
            }
            _ => {
                let spec = match name.as_str() {
                    "python" => Spec::python(o.python_faq.clone()),
                    _ => Spec::debian(o.debian_faq.clone()),
                };
                let pages = faq::load(&spec, o.headless)?;
                Corpus {
                    name: spec.name,
                    package: spec.package,
                    pages,
                }
            }
        };
        corpora.push(corpus);
    }
    if let Some(dir) = &o.dump {
        for corpus in &corpora {
            dump(&dir.join(corpus.name), &corpus.pages)?;
        }
        println!("wrote the page texts and pairs under {}", dir.display());
        return Ok(());
    }
    if !o.model_dir.join("model.onnx").is_file() {
        return Err(format!(
            "the local model is not in {}; run scripts/fetch-model",
            o.model_dir.display()
        )
        .into());
    }

    let command = std::iter::once("bench_quality".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    println!("# quarry retrieval quality");
    println!();
    println!("command: {command}");
    println!("date:    {}", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    println!("machine: {}", harness::machine());
    println!(
        "model:   local {}; worlds hybrid, default chunking; top_k {TOP_K}; budgets {BUDGETS:?}",
        o.model
    );

    let model_dir = o.model_dir.clone();
    // No OpenAI-compatible server is used: every world is on the local model.
    let quarry = Quarry::start("http://127.0.0.1:9/v1", &[], |s| {
        s.providers.local.model_dir = model_dir;
    })
    .await?;
    let mut took = Vec::new();
    for corpus in &corpora {
        let t = Instant::now();
        evaluate(&quarry, corpus, &o).await?;
        took.push(format!("{} {:.0} s", corpus.name, t.elapsed().as_secs_f64()));
    }
    quarry.stop().await?;
    println!();
    println!(
        "total {:.0} s ({}); load average at the end {}",
        started.elapsed().as_secs_f64(),
        took.join(", "),
        harness::load_average()
    );
    Ok(())
}

/// Writes each page's text and a `pairs.tsv`: question, whether it has literal terms, page, span
/// and the answer's start.
fn dump(dir: &std::path::Path, pages: &[Page]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tsv = String::from("question\tliteral terms\tpage\tstart\tend\tanswer begins\n");
    for page in pages {
        std::fs::write(dir.join(&page.filename), &page.text)?;
        for pair in &page.pairs {
            let begins: String = page.text.chars().skip(pair.start).take(80).collect();
            tsv.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                pair.question,
                quarry::service::retrieval::has_literal_terms(&pair.question),
                page.filename,
                pair.start,
                pair.end,
                begins.replace(['\t', '\n'], " ")
            ));
        }
    }
    std::fs::write(dir.join("pairs.tsv"), tsv)?;
    Ok(())
}

/// Runs `scripts/bench-langchain.py` with `python` on the pages and the questions asked (dumped
/// under `target/bench-quality/<corpus>`), and returns its share of questions fully answered
/// in the context at each of [`BUDGETS`].
fn run_peer(
    python: &std::path::Path,
    corpus: &Corpus,
    questions: &[Question],
    model_dir: &std::path::Path,
) -> Result<[f64; BUDGETS.len()]> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-quality").join(corpus.name);
    let asked: Vec<Page> = corpus
        .pages
        .iter()
        .enumerate()
        .map(|(index, page)| {
            let mut page = page.clone();
            page.pairs.retain(|pair| {
                questions
                    .iter()
                    .any(|q| q.page == index && q.start == pair.start as u64 && q.text == pair.question)
            });
            page
        })
        .collect();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    dump(&dir, &asked)?;
    progress(format!("{}: running the LangChain peer", corpus.name));
    let budgets = BUDGETS.map(|b| b.to_string()).join(",");
    let output = std::process::Command::new(python)
        .arg(root.join("scripts/bench-langchain.py"))
        .arg(&dir)
        .arg(model_dir)
        .args(["--budgets", &budgets])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !output.status.success() {
        return Err(format!("the LangChain peer failed ({})", output.status).into());
    }
    let line: Value = serde_json::from_slice(&output.stdout)?;
    if line["questions"].as_u64() != Some(questions.len() as u64) {
        return Err(format!(
            "the peer asked {} questions, not {}",
            line["questions"],
            questions.len()
        )
        .into());
    }
    let mut fully = [0.0; BUDGETS.len()];
    for (f, budget) in fully.iter_mut().zip(BUDGETS) {
        *f = line["budgets"][budget.to_string()]["fully"]
            .as_f64()
            .ok_or("the peer's answer has no `fully`")?;
    }
    Ok(fully)
}

/// A question as asked: the source and char span its answer has in that source's stored text.
#[derive(Clone)]
struct Question {
    text: String,
    source_id: String,
    start: u64,
    end: u64,
    /// The answer's text (the span of its page).
    answer: String,
    /// The page's index.
    page: usize,
    literal: bool,
}

/// Sums over the questions asked of one configuration.
#[derive(Default, Clone)]
struct Tally {
    questions: usize,
    hit1: usize,
    hit5: usize,
    reciprocal_ranks: f64,
    coverage: [f64; BUDGETS.len()],
    /// Questions whose answer is fully in the context text ([`FULLY`]), per budget.
    fully: [usize; BUDGETS.len()],
}

impl Tally {
    fn add(&mut self, rank: Option<usize>, coverage: &[f64; BUDGETS.len()], shares: &[f64; BUDGETS.len()]) {
        self.questions += 1;
        if let Some(rank) = rank {
            self.hit1 += usize::from(rank == 1);
            self.hit5 += usize::from(rank <= 5);
            self.reciprocal_ranks += 1.0 / rank as f64;
        }
        for (sum, c) in self.coverage.iter_mut().zip(coverage) {
            *sum += c;
        }
        for (count, share) in self.fully.iter_mut().zip(shares) {
            *count += usize::from(*share >= FULLY);
        }
    }

    fn share(&self, count: f64) -> String {
        if self.questions == 0 {
            "–".into()
        } else {
            format!("{:.3}", count / self.questions as f64)
        }
    }

    /// hit@1, hit@5, MRR@10.
    fn ranking(&self) -> Vec<String> {
        vec![
            self.share(self.hit1 as f64),
            self.share(self.hit5 as f64),
            self.share(self.reciprocal_ranks),
        ]
    }
}

/// One configuration's figures: over all questions, and split by literal terms.
#[derive(Default)]
struct Figures {
    all: Tally,
    literal: Tally,
    plain: Tally,
    /// How often each search ran (`mode_used`, with the fusion's method for hybrid).
    searches: BTreeMap<String, usize>,
    /// Rank of the first hit, per question in order.
    ranks: Vec<Option<usize>>,
}

impl Figures {
    /// `better/worse`: questions whose answer this configuration ranks higher / lower than
    /// `base` does (missing from the 10 counts as below them), among those `which` picks.
    fn versus(&self, base: &Figures, questions: &[Question], which: impl Fn(&Question) -> bool) -> String {
        if std::ptr::eq(self, base) {
            return "–".into();
        }
        let depth = |rank: Option<usize>| rank.unwrap_or(usize::MAX);
        let (mut better, mut worse) = (0, 0);
        for ((mine, theirs), question) in self.ranks.iter().zip(&base.ranks).zip(questions) {
            if which(question) {
                better += usize::from(depth(*mine) < depth(*theirs));
                worse += usize::from(depth(*mine) > depth(*theirs));
            }
        }
        format!("{better}/{worse}")
    }
}

/// How quarry's section detection (`quarry::chunking::section_starts`, by each page's format)
/// meets the questions: how many open a section (a section starts between the previous answer's
/// end and the answer's start, where the question is), and how many sections start elsewhere.
fn section_detection(pages: &[Page]) -> String {
    let (mut found, mut questions, mut elsewhere) = (0, 0, 0);
    for page in pages {
        let format = quarry::domain::SourceFormat::of(page.content_type).unwrap_or(quarry::domain::SourceFormat::Plain);
        let starts = quarry::chunking::section_starts(&page.text, format);
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        let mut previous_end = 0u64;
        for pair in &page.pairs {
            gaps.push((previous_end, pair.start as u64));
            previous_end = pair.end as u64;
        }
        questions += gaps.len();
        found += gaps
            .iter()
            .filter(|(a, b)| starts.iter().any(|s| s >= a && s < b))
            .count();
        elsewhere += starts
            .iter()
            .filter(|s| !gaps.iter().any(|(a, b)| *s >= a && *s < b))
            .count();
    }
    format!(
        "sections found: {found} of {questions} questions open one; {elsewhere} sections start elsewhere \
         (headings that are not questions, and false starts)"
    )
}

/// A corpus, read: its name, the Debian package it comes from, its pages.
struct Corpus {
    name: &'static str,
    package: &'static str,
    pages: Vec<Page>,
}

async fn evaluate(quarry: &Quarry, corpus: &Corpus, o: &Options) -> Result<()> {
    let (name, package, pages) = (corpus.name, corpus.package, &corpus.pages[..]);
    let pairs: usize = pages.iter().map(|p| p.pairs.len()).sum();
    let short: usize = pages.iter().map(|p| p.short).sum();
    let chars: usize = pages.iter().map(|p| p.text.chars().count()).sum();
    // Questions that the stored text repeats word for word (cross-references quote them).
    let quoted = pages
        .iter()
        .flat_map(|p| &p.pairs)
        .filter(|q| pages.iter().any(|p| p.text.contains(&q.question)))
        .count();
    progress(format!(
        "{}: {} pages, {pairs} pairs ({short} answers under {} chars skipped), {chars} chars",
        name,
        pages.len(),
        faq::MIN_ANSWER_CHARS
    ));

    let ingest_started = Instant::now();
    let (world_id, source_ids, chunks) = load(quarry, &o.model, name, pages, false).await?;
    let ingest_seconds = ingest_started.elapsed().as_secs_f64();
    let mut configurations = configurations(o.context_prefix);
    if let Some(names) = &o.only_configurations {
        configurations.retain(|c| names.iter().any(|n| n == c.name));
    }
    // The same pages in a world whose chunks carry a context prefix, for the `, prefix` rows.
    let prefixed = match configurations.iter().any(|c| c.prefixed) {
        true => Some(load(quarry, &o.model, name, pages, true).await?),
        false => None,
    };

    let mut questions: Vec<Question> = pages
        .iter()
        .zip(&source_ids)
        .enumerate()
        .flat_map(|(index, (page, source_id))| {
            page.pairs.iter().map(move |pair| Question {
                page: index,
                text: pair.question.clone(),
                source_id: source_id.clone(),
                start: pair.start as u64,
                end: pair.end as u64,
                answer: page.text.chars().skip(pair.start).take(pair.end - pair.start).collect(),
                literal: quarry::service::retrieval::has_literal_terms(&pair.question),
            })
        })
        .collect();
    if let Some(limit) = o.limit.filter(|&l| l < questions.len()) {
        let n = questions.len();
        let keep: Vec<usize> = (0..limit).map(|i| i * n / limit).collect();
        questions = questions
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep.binary_search(i).is_ok())
            .map(|(_, q)| q)
            .collect();
    }
    let literal = questions.iter().filter(|q| q.literal).count();
    let sections = section_detection(pages);
    let peer = match &o.peer {
        Some(python) => Some(run_peer(python, corpus, &questions, &o.model_dir)?),
        None => None,
    };

    let mut figures: Vec<Figures> = configurations.iter().map(|_| Figures::default()).collect();
    let eval_started = Instant::now();
    let mut requests = 0usize;
    // One line per question: the question, whether it has literal terms, a rank per configuration.
    let mut ranks = vec![
        ["question", "literal terms"]
            .into_iter()
            .chain(configurations.iter().map(|c| c.name))
            .collect::<Vec<_>>()
            .join("\t"),
    ];
    for (qi, question) in questions.iter().enumerate() {
        let mut line = vec![question.text.clone(), question.literal.to_string()];
        for (configuration, figures) in configurations.iter().zip(figures.iter_mut()) {
            // The prefixed world holds the same pages under other source ids.
            let (world_id, asked) = match (&prefixed, configuration.prefixed) {
                (Some((world, sources, _)), true) => (
                    world,
                    Question {
                        source_id: sources[question.page].clone(),
                        ..question.clone()
                    },
                ),
                _ => (&world_id, question.clone()),
            };
            let question = &asked;
            let mut rank = None;
            let mut coverage = [0.0; BUDGETS.len()];
            let mut shares = [0.0; BUDGETS.len()];
            for (bi, budget) in BUDGETS.iter().enumerate() {
                let mut body = json!({"query": question.text, "max_context_tokens": budget});
                // `defaults` asks as a request without settings does (top_k 8).
                if configuration.name != "defaults" {
                    body["top_k"] = json!(TOP_K);
                }
                if let (Some(body), Some(settings)) = (body.as_object_mut(), configuration.settings.as_object()) {
                    body.extend(settings.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                let answer = quarry
                    .post(&format!("/v1/worlds/{world_id}/retrieve"), &body, 200)
                    .await?;
                requests += 1;
                // A configuration that silently fell back would measure something else.
                if let Some(warning) = answer["warnings"].as_array().and_then(|w| {
                    w.iter()
                        .find(|w| w["code"] == "rerank_unavailable" || w["code"] == "filter_matched_nothing")
                }) {
                    return Err(format!("{}: {warning}", configuration.name).into());
                }
                if bi == 0 {
                    rank = first_hit(&answer, question);
                    *figures.searches.entry(search_used(&answer)).or_default() += 1;
                }
                coverage[bi] = covered(&answer, question);
                shares[bi] = answer_share(&question.answer, answer["context"]["text"].as_str().unwrap_or(""));
            }
            line.push(rank.map_or("-".into(), |r| r.to_string()));
            figures.ranks.push(rank);
            figures.all.add(rank, &coverage, &shares);
            let side = if question.literal {
                &mut figures.literal
            } else {
                &mut figures.plain
            };
            side.add(rank, &coverage, &shares);
        }
        ranks.push(line.join("\t"));
        if (qi + 1) % 25 == 0 {
            progress(format!(
                "{}: {} of {} questions asked, {:.0} s",
                name,
                qi + 1,
                questions.len(),
                eval_started.elapsed().as_secs_f64()
            ));
        }
    }
    let eval_seconds = eval_started.elapsed().as_secs_f64();
    if let Some(dir) = &o.ranks {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("{}-ranks.tsv", name)), ranks.join("\n") + "\n")?;
    }

    println!();
    println!(
        "## {} FAQ ({}): {} pages, {chars} chars, {chunks} chunks; {pairs} question–answer pairs \
         ({short} with answers under {} chars left out), {} asked ({literal} with literal terms, {} without)",
        name,
        package,
        pages.len(),
        faq::MIN_ANSWER_CHARS,
        questions.len(),
        questions.len() - literal
    );
    println!(
        "ingest {ingest_seconds:.0} s ({:.1} chunks/s); {requests} retrievals in {eval_seconds:.0} s \
         ({:.1} ms each); {quoted} of the questions appear word for word in the stored text",
        chunks as f64 / ingest_seconds,
        eval_seconds * 1000.0 / requests.max(1) as f64
    );
    println!("{sections}");
    println!();
    // The first configuration is the one the others are compared with, question by question.
    let base = &figures[0];
    let versus = format!("vs {}", configurations[0].name);
    let mut headers = vec!["configuration", "hit@1", "hit@5", "MRR@10"];
    let budget_headers: Vec<String> = BUDGETS
        .iter()
        .map(|b| format!("cov@{b}"))
        .chain(BUDGETS.iter().map(|b| format!("full@{b}")))
        .collect();
    headers.extend(budget_headers.iter().map(String::as_str));
    headers.push(&versus);
    let mut table = Table::new(&headers);
    for (configuration, f) in configurations.iter().zip(&figures) {
        let mut row = vec![configuration.name.to_owned()];
        row.extend(f.all.ranking());
        row.extend(f.all.coverage.iter().map(|&c| f.all.share(c)));
        row.extend(f.all.fully.iter().map(|&n| f.all.share(n as f64)));
        row.push(f.versus(base, &questions, |_| true));
        table.row(row);
    }
    if let Some(peer) = &peer {
        let mut row = vec!["LangChain ParentDocumentRetriever (peer)".to_owned()];
        row.extend(std::iter::repeat_n("–".to_owned(), 3 + BUDGETS.len()));
        row.extend(peer.iter().map(|f| format!("{f:.3}")));
        row.push("–".into());
        table.row(row);
    }
    table.print();
    println!();
    println!(
        "By literal terms in the question ({literal} with, {} without):",
        questions.len() - literal
    );
    println!();
    let (literal_versus, plain_versus) = (format!("literal {versus}"), format!("plain {versus}"));
    let mut split = Table::new(&[
        "configuration",
        "literal hit@1",
        "literal hit@5",
        "literal MRR@10",
        &literal_versus,
        "plain hit@1",
        "plain hit@5",
        "plain MRR@10",
        &plain_versus,
    ]);
    for (configuration, f) in configurations.iter().zip(&figures) {
        let mut row = vec![configuration.name.to_owned()];
        row.extend(f.literal.ranking());
        row.push(f.versus(base, &questions, |q| q.literal));
        row.extend(f.plain.ranking());
        row.push(f.versus(base, &questions, |q| !q.literal));
        split.row(row);
    }
    split.print();
    println!();
    println!(
        "{versus}: questions whose answer the configuration ranks higher / lower than {} does (first \
         overlapping result; not in the 10 counts as lowest)",
        configurations[0].name
    );
    for (configuration, f) in configurations.iter().zip(&figures) {
        let ran: Vec<String> = f.searches.iter().map(|(s, n)| format!("{s} {n}")).collect();
        println!("{} ran: {}", configuration.name, ran.join(", "));
    }
    Ok(())
}

/// Creates a hybrid world on the local model (with `chunking.context_prefix` when `prefix`) and
/// uploads `pages` into it; returns its id, the pages' source ids and its chunk count once
/// every page is embedded.
async fn load(
    quarry: &Quarry,
    model: &str,
    name: &str,
    pages: &[Page],
    prefix: bool,
) -> Result<(String, Vec<String>, u64)> {
    let world = quarry
        .post(
            "/v1/worlds",
            &json!({
                "name": format!("{} FAQ{}", name, if prefix { ", prefixed" } else { "" }),
                "embedding": {"provider": "local", "model": model},
                "chunking": {"context_prefix": prefix},
                "hybrid": true,
            }),
            201,
        )
        .await?;
    let world_id = world["id"].as_str().ok_or("world without id")?.to_owned();
    let mut source_ids = Vec::with_capacity(pages.len());
    let mut jobs = Vec::with_capacity(pages.len());
    for page in pages {
        let answer = quarry
            .post(
                &format!("/v1/worlds/{world_id}/sources"),
                &json!({"filename": page.filename, "text": page.text, "content_type": page.content_type}),
                202,
            )
            .await?;
        let source_id = answer["source"]["id"].as_str().ok_or("source without id")?.to_owned();
        // Spans count chars of the stored text: it must be the text sent, unchanged.
        let stored = quarry
            .get(&format!("/v1/worlds/{world_id}/sources/{source_id}/text"))
            .await?;
        if stored.as_str() != Some(page.text.as_str()) {
            return Err(format!("{}: quarry stored another text than the one sent", page.filename).into());
        }
        source_ids.push(source_id);
        jobs.push(answer["job"]["id"].as_str().ok_or("upload without job id")?.to_owned());
    }
    let chunks = wait_for_jobs(quarry, &world_id, &jobs).await?;
    Ok((world_id, source_ids, chunks))
}

/// Waits until every job has completed; returns the world's chunk count.
async fn wait_for_jobs(quarry: &Quarry, world_id: &str, jobs: &[String]) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut last_report = Instant::now();
    let mut pending: Vec<&String> = jobs.iter().collect();
    while !pending.is_empty() {
        let mut still = Vec::with_capacity(pending.len());
        for job in pending {
            let answer = quarry.get(&format!("/v1/jobs/{job}")).await?;
            match answer["status"].as_str() {
                Some("completed") => {}
                Some("running" | "paused") => still.push(job),
                _ => return Err(format!("ingest job {job} did not complete: {answer}").into()),
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err("ingestion did not finish within an hour".into());
        }
        if last_report.elapsed() >= Duration::from_secs(15) {
            let world = quarry.get(&format!("/v1/worlds/{world_id}")).await?;
            progress(format!(
                "  embedded {} of {} chunks",
                world["stats"]["embedded"], world["stats"]["chunks"]
            ));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let world = quarry.get(&format!("/v1/worlds/{world_id}")).await?;
    world["stats"]["chunks"]
        .as_u64()
        .ok_or_else(|| format!("world without a chunk count: {world}").into())
}

/// Rank (from 1) of the first result overlapping the answer.
fn first_hit(answer: &Value, question: &Question) -> Option<usize> {
    let results = answer["results"].as_array()?;
    results
        .iter()
        .position(|r| {
            r["source_id"].as_str() == Some(question.source_id.as_str())
                && overlaps(&r["char_start"], &r["char_end"], question)
        })
        .map(|i| i + 1)
}

fn overlaps(start: &Value, end: &Value, question: &Question) -> bool {
    match (start.as_u64(), end.as_u64()) {
        (Some(s), Some(e)) => s < question.end && question.start < e,
        _ => false,
    }
}

/// Share of the answer's chars inside the spans the context cites.
fn covered(answer: &Value, question: &Question) -> f64 {
    let mut spans: Vec<(u64, u64)> = answer["context"]["citations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["source_id"].as_str() == Some(question.source_id.as_str()))
        .filter_map(|c| {
            let s = c["char_start"].as_u64()?.max(question.start);
            let e = c["char_end"].as_u64()?.min(question.end);
            (s < e).then_some((s, e))
        })
        .collect();
    spans.sort_unstable();
    let mut inside = 0;
    let mut reached = question.start;
    for (s, e) in spans {
        let s = s.max(reached);
        if e > s {
            inside += e - s;
            reached = e;
        }
    }
    inside as f64 / (question.end - question.start) as f64
}

/// An answer held this share of its word 4-grams in the context counts as fully there.
const FULLY: f64 = 0.8;

/// The share of `answer`'s distinct word 4-grams found in `context` (of its n-grams of all its
/// words, when it has fewer than four): words are maximal runs of alphanumeric chars,
/// lower-cased. `scripts/bench-langchain.py` scores its peer the same way.
fn answer_share(answer: &str, context: &str) -> f64 {
    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    }
    let answer = words(answer);
    if answer.is_empty() {
        return 1.0;
    }
    let n = answer.len().min(4);
    let wanted: std::collections::HashSet<&[String]> = answer.windows(n).collect();
    let context = words(context);
    let present: std::collections::HashSet<&[String]> = context.windows(n).collect();
    wanted.iter().filter(|g| present.contains(*g)).count() as f64 / wanted.len() as f64
}

/// `dense`, `hybrid rrf 1:1`, `hybrid dbsf`… as the answer says it searched.
fn search_used(answer: &Value) -> String {
    let mode = answer["mode_used"].as_str().unwrap_or("none");
    let fusion = &answer["fusion_used"];
    match fusion["method"].as_str() {
        Some("rrf") => format!(
            "{mode} rrf {}:{}",
            fusion["dense_weight"].as_f64().unwrap_or(f64::NAN),
            fusion["sparse_weight"].as_f64().unwrap_or(f64::NAN)
        ),
        Some(method) => format!("{mode} {method}"),
        None => mode.to_owned(),
    }
}
