//! `quarry sync PATH --world W`: make a world mirror a folder. Every file's key is its path
//! relative to PATH (with `--prefix` before it); a file whose key the world lacks is added, a
//! changed one replaced (a new version: the old one serves until it is embedded), an unchanged
//! one skipped without reading the server twice, and — only with `--delete` — a keyed source
//! whose file is gone is deleted. The plan is printed first (deletions first of all);
//! `--dry-run` stops there. Writes are conditional (`If-None-Match: *` to add, `If-Match` with
//! the version the plan saw to replace or delete), so a source another client changed since the
//! plan is reported as a conflict, never overwritten.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{
    Client, Exit, Found, Result, Upload, WalkArgs, WorldArgs, failed, files, follow_or_interrupt, open_world,
    read_file, upload_form,
};

/// What `quarry sync` is told.
#[derive(Debug, Default, clap::Args)]
pub struct SyncOptions {
    /// The folder to mirror (or a single file).
    pub path: PathBuf,
    #[command(flatten)]
    pub target: WorldArgs,
    /// Delete the world's sources whose key (under --prefix) names no file under PATH any
    /// more. Without it they are listed and kept.
    #[arg(long, alias = "prune")]
    pub delete: bool,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Put before every key (e.g. `guides/`), so several folders can mirror into one world:
    /// only keys that start with it are compared, replaced or deleted.
    #[arg(long, default_value = "")]
    pub prefix: String,
    #[command(flatten)]
    pub walk: WalkArgs,
}

/// A source of the world under the prefix.
struct Remote {
    version: u64,
    /// The sha256 of the file it was uploaded from (`metadata.file_sha256`), and of its text.
    file_sha256: Option<String>,
    text_sha256: Option<String>,
}

/// A file and what to do with it.
struct Local {
    found: Found,
    key: String,
    /// The version a replace writes over.
    over: Option<u64>,
}

/// What a sync will do.
#[derive(Default)]
struct Plan {
    add: Vec<Local>,
    replace: Vec<Local>,
    unchanged: Vec<String>,
    /// Keys (and versions) of sources whose file is gone.
    gone: Vec<(String, u64)>,
    /// Files that can have no key, and why.
    skipped: Vec<(String, String)>,
}

/// `quarry sync PATH --world W`
pub async fn sync(client: &Client, options: SyncOptions) -> Result<Exit> {
    if !options.path.exists() {
        return Err(failed(
            Exit::Usage,
            format!("{} does not exist", options.path.display()),
        ));
    }
    let found = files(std::slice::from_ref(&options.path), &options.walk)?;
    let world = open_world(client, &options.target).await?;
    let world_id = world["id"].as_str().unwrap_or_default().to_owned();
    let mut remote = HashMap::new();
    for s in client.all(&format!("/v1/worlds/{world_id}/sources"), "sources").await? {
        let Some(key) = s["key"].as_str().filter(|k| k.starts_with(&options.prefix)) else {
            continue;
        };
        let text = |v: &Value| v.as_str().map(str::to_owned);
        remote.insert(
            key.to_owned(),
            Remote {
                version: s["version"].as_u64().unwrap_or(1),
                file_sha256: text(&s["metadata"]["file_sha256"]),
                text_sha256: text(&s["sha256"]),
            },
        );
    }
    let plan = plan(found, remote, &options.prefix)?;
    show(client, &plan, &options);
    if options.dry_run {
        return Ok(Exit::Ok);
    }
    let mut uploads = Vec::new();
    let mut conflicts = 0usize;
    let mut tally: HashMap<&str, usize> = HashMap::new();
    for (local, adding) in plan
        .add
        .iter()
        .map(|l| (l, true))
        .chain(plan.replace.iter().map(|l| (l, false)))
    {
        let name = local.found.path.display().to_string();
        let form = upload_form(&local.found.path, read_file(&local.found.path)?, None);
        let mut request = client
            .request(reqwest::Method::PUT, &by_key(&world_id, &local.key))
            .multipart(form);
        request = match local.over {
            Some(version) if !adding => request.header("If-Match", format!("\"{version}\"")),
            _ => request.header("If-None-Match", "*"),
        };
        let accepted = match client.send(request).await {
            Ok(accepted) => accepted,
            Err(f) if f.exit == Exit::Usage => {
                conflicts += 1;
                report_file(client, &name, &local.key, "failed", &json!({"message": f.message}));
                continue;
            }
            Err(f) => return Err(failed(f.exit, format!("{name}: {}", f.message))),
        };
        let event = match accepted["outcome"].as_str() {
            Some("unchanged") => "unchanged",
            Some("created") => "added",
            _ => "replaced",
        };
        *tally.entry(event).or_default() += 1;
        report_file(
            client,
            &name,
            &local.key,
            event,
            &json!({"source": accepted["source"]["id"], "job": accepted["job"]["id"]}),
        );
        if let Some(job) = accepted["job"]["id"].as_str() {
            uploads.push(Upload {
                name,
                job: job.to_owned(),
                total: accepted["job"]["counts"]["total"].as_u64().unwrap_or(0),
            });
        }
    }
    if options.delete {
        for (key, version) in &plan.gone {
            let request = client
                .request(reqwest::Method::DELETE, &by_key(&world_id, key))
                .header("If-Match", format!("\"{version}\""));
            match client.send(request).await {
                Ok(_) => {
                    *tally.entry("deleted").or_default() += 1;
                    report_file(client, "", key, "deleted", &json!({}));
                }
                // Already gone (another client deleted it): what the sync wanted.
                Err(f) if f.exit == Exit::NotFound => report_file(client, "", key, "deleted", &json!({})),
                Err(f) if f.exit == Exit::Usage => {
                    conflicts += 1;
                    report_file(client, "", key, "failed", &json!({"message": f.message}));
                }
                Err(f) => return Err(failed(f.exit, format!("deleting {key}: {}", f.message))),
            }
        }
    }
    let count = |event: &str| tally.get(event).copied().unwrap_or(0);
    let summary = json!({"event": "synced", "added": count("added"), "replaced": count("replaced"),
        "unchanged": plan.unchanged.len() + count("unchanged"), "deleted": count("deleted"),
        "failed": conflicts, "kept": if options.delete { 0 } else { plan.gone.len() }});
    if client.json {
        client.line(&summary);
    } else {
        eprintln!(
            "synced world {}: {} added, {} replaced, {} unchanged, {} deleted, {} failed",
            world["name"].as_str().unwrap_or_default(),
            summary["added"],
            summary["replaced"],
            summary["unchanged"],
            summary["deleted"],
            summary["failed"]
        );
    }
    let exit = follow_or_interrupt(client, &uploads, &world_id).await?;
    Ok(if exit == Exit::Ok && conflicts > 0 {
        Exit::Incomplete
    } else {
        exit
    })
}

/// The path of the source with key `key` (percent-encoded into the query).
fn by_key(world_id: &str, key: &str) -> String {
    let key: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
    format!("/v1/worlds/{world_id}/sources/by-key?key={key}")
}

/// Compares the folder's files with the world's keyed sources.
fn plan(found: Vec<Found>, mut remote: HashMap<String, Remote>, prefix: &str) -> Result<Plan> {
    let mut plan = Plan::default();
    for found in found {
        let key = match &found.key {
            Ok(key) => format!("{prefix}{key}"),
            Err(why) => {
                plan.skipped.push((found.path.display().to_string(), why.clone()));
                continue;
            }
        };
        if let Err(why) = quarry::domain::SourceKey::parse(&key) {
            plan.skipped.push((found.path.display().to_string(), why));
            continue;
        }
        match remote.remove(&key) {
            None => plan.add.push(Local { found, key, over: None }),
            Some(source) => {
                let (_, sha) = read_file(&found.path)?;
                let same = [&source.file_sha256, &source.text_sha256]
                    .into_iter()
                    .any(|had| had.as_deref() == Some(sha.as_str()));
                if same {
                    plan.unchanged.push(key);
                } else {
                    plan.replace.push(Local {
                        found,
                        key,
                        over: Some(source.version),
                    });
                }
            }
        }
    }
    plan.gone = remote.into_iter().map(|(key, s)| (key, s.version)).collect();
    plan.gone.sort();
    Ok(plan)
}

/// Prints the plan: deletions first, then additions and replacements, counts last.
fn show(client: &Client, plan: &Plan, options: &SyncOptions) {
    let keys = |files: &[Local]| files.iter().map(|l| l.key.clone()).collect::<Vec<_>>();
    let gone: Vec<&str> = plan.gone.iter().map(|(k, _)| k.as_str()).collect();
    if client.json {
        let skipped: Vec<Value> = plan
            .skipped
            .iter()
            .map(|(file, why)| json!({"file": file, "reason": why}))
            .collect();
        let (delete, kept) = if options.delete {
            (gone.clone(), Vec::new())
        } else {
            (Vec::new(), gone.clone())
        };
        client.line(
            &json!({"event": "plan", "dry_run": options.dry_run, "delete": delete, "kept": kept,
            "add": keys(&plan.add), "replace": keys(&plan.replace), "unchanged": plan.unchanged.len(),
            "skipped": skipped}),
        );
        return;
    }
    let verb = if options.dry_run { "would" } else { "will" };
    for key in &gone {
        if options.delete {
            eprintln!("  delete   {key}");
        } else {
            eprintln!("  gone     {key} (kept: pass --delete to delete)");
        }
    }
    for local in &plan.add {
        eprintln!("  add      {}", local.key);
    }
    for local in &plan.replace {
        eprintln!("  replace  {}", local.key);
    }
    for (file, why) in &plan.skipped {
        eprintln!("  skip     {file}: {why}");
    }
    eprintln!(
        "sync {verb} add {}, replace {}, delete {}, keep {} unchanged{}",
        plan.add.len(),
        plan.replace.len(),
        if options.delete { gone.len() } else { 0 },
        plan.unchanged.len(),
        if !options.delete && !gone.is_empty() {
            format!(" ({} gone from the folder, kept)", gone.len())
        } else {
            String::new()
        }
    );
}

/// One file's outcome, as a JSON line (human output shows the plan and the bars instead).
fn report_file(client: &Client, file: &str, key: &str, event: &str, extra: &Value) {
    if client.json {
        let mut line = json!({"file": file, "key": key, "event": event});
        if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
            line.extend(extra.clone());
        }
        client.line(&line);
    } else if event == "failed" {
        eprintln!("{key}: {}", extra["message"].as_str().unwrap_or_default());
    }
}
