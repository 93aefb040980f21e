//! The `quarry` binary: parse the command line, load configuration, set up logging, then run
//! the chosen command. The client subcommands are [`cli`], a module of the binary (it talks to
//! quarry over HTTP, as any client does); everything else lives in the library.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use quarry::app::{App, shutdown_signal};
use quarry::config::Settings;
use quarry::telemetry::{self, LogFormat};
use secrecy::ExposeSecret;

#[derive(Parser)]
#[command(name = "quarry", version, about = "Retrieval-augmented generation service")]
struct Cli {
    /// Configuration file (default: quarry.toml in the working directory, if present).
    #[arg(long, env = "QUARRY_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Log output format.
    #[arg(long, value_enum, default_value = "pretty", global = true)]
    log_format: LogFormat,
    /// The quarry server the client commands talk to.
    #[arg(long, env = "QUARRY_URL", default_value = "http://127.0.0.1:8080", global = true)]
    url: String,
    /// The bearer token for the client commands.
    #[arg(long, env = "QUARRY_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Client commands: JSON lines instead of human output (the default when piped).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (the default).
    Serve,
    /// Apply the store migrations and exit.
    Migrate,
    /// Manage the master key that seals provider keys and webhook secrets.
    Keys {
        #[command(subcommand)]
        action: KeysCommand,
    },
    /// Print the OpenAPI document and exit.
    Openapi,
    /// Compare the vector collections with `[vectors.collection]`, or apply it.
    Vectors {
        #[command(subcommand)]
        action: VectorsCommand,
    },
    /// List the worlds (client: talks to --url).
    Worlds,
    /// List a world's sources (client).
    Sources {
        /// The world's name or id.
        world: String,
    },
    /// List a world's jobs (client); --watch repeats until none is queued or running.
    Jobs {
        world: String,
        #[arg(long)]
        watch: bool,
    },
    /// Ask a world a question (client): the context and its citations.
    Retrieve {
        world: String,
        query: String,
        #[command(flatten)]
        options: crate::cli::RetrieveOptions,
    },
    /// Upload files and folders to a world and follow the embedding (client).
    Ingest(crate::cli::IngestOptions),
    /// Make a world mirror a folder (client): add new files, replace changed ones, and with
    /// --delete delete the sources whose files are gone; --dry-run prints the plan only.
    Sync(crate::cli::SyncOptions),
    /// Score a world's retrieval on a test set (client): make the set from a JSON Lines file
    /// (--set) or take one (--eval), run it under --settings and --budgets and print the scores;
    /// --compare A B prints how run B differs from run A.
    Eval(crate::cli::EvalOptions),
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Re-seal every secret (provider keys, webhook signing secrets) under a new master key, in
    /// one transaction, and check the result; afterwards the old key is refused at startup.
    /// Reads the current key from the configuration. Stop the service first, then restart it
    /// (every replica) with the new key.
    RotateMaster {
        /// A file holding the new key (base64 of 32 bytes, e.g. `openssl rand -base64 32`).
        #[arg(long)]
        new_key_file: PathBuf,
    },
}

#[derive(Subcommand)]
enum VectorsCommand {
    /// List the collections whose layout differs from the configuration (exit code 1 if any).
    Check,
    /// Change what can change in place (quantization, HNSW, on-disk placement, write
    /// consistency) to match the configuration; list what cannot. Stop an embedded-store
    /// service first (its folder is locked); a Qdrant server may stay in use.
    ApplySettings,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Openapi) = cli.command {
        print!("{}", quarry::api::openapi::document());
        return ExitCode::SUCCESS;
    }
    if matches!(
        cli.command,
        Some(
            Command::Worlds
                | Command::Sources { .. }
                | Command::Jobs { .. }
                | Command::Retrieve { .. }
                | Command::Ingest(_)
                | Command::Sync(_)
                | Command::Eval(_)
        )
    ) {
        return client(cli);
    }
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("quarry: {err}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match telemetry::init_with(cli.log_format, &settings.telemetry) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("quarry: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("quarry: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::Vectors { action }) = &cli.command {
        let apply = matches!(action, VectorsCommand::ApplySettings);
        return runtime.block_on(vectors(settings, apply));
    }
    let result = runtime.block_on(async move {
        match cli.command {
            Some(Command::Migrate) => {
                let store = quarry::store::connect(settings.store.url.expose_secret()).await?;
                store.close().await;
                tracing::info!("migrations applied");
                Ok(())
            }
            Some(Command::Keys {
                action: KeysCommand::RotateMaster { new_key_file },
            }) => rotate_master(&settings, &new_key_file).await,
            Some(Command::Serve) | None => {
                let app = App::build(settings).await?;
                app.run_until(shutdown_signal()).await?;
                Ok(())
            }
            // Answered before the runtime (the document), by `vectors` or by `client` (the client
            // commands).
            Some(
                Command::Openapi
                | Command::Vectors { .. }
                | Command::Worlds
                | Command::Sources { .. }
                | Command::Jobs { .. }
                | Command::Retrieve { .. }
                | Command::Ingest(_)
                | Command::Sync(_)
                | Command::Eval(_),
            ) => Ok(()),
        }
    });
    telemetry.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let err: Box<dyn std::error::Error> = err;
            eprintln!("quarry: {}", quarry::telemetry::error_chain(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// `quarry keys rotate-master --new-key-file F`.
async fn rotate_master(settings: &Settings, new_key_file: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use quarry::crypto::SecretCipher;
    let old = settings
        .master_key()?
        .ok_or("no master key is configured (security.master_key or security.master_key_file): nothing is sealed")?;
    let new = std::fs::read_to_string(new_key_file)
        .map_err(|err| format!("--new-key-file: cannot read {}: {}", new_key_file.display(), err.kind()))?;
    let new = settings
        .master_key_bytes(&secrecy::SecretString::from(new))
        .map_err(|err| format!("{err} (read from --new-key-file {})", new_key_file.display()))?;
    let store = quarry::store::connect(settings.store.url.expose_secret()).await?;
    let rotated =
        quarry::service::master_key::rotate(store.as_ref(), &SecretCipher::new(old), &SecretCipher::new(new)).await;
    store.close().await;
    let rotated = rotated?;
    println!(
        "re-sealed {} provider key(s) and {} webhook secret(s) under the new master key; the old key is refused \
         from now on: set security.master_key_file (or master_key) to the new key and restart every replica",
        rotated.provider_keys, rotated.webhooks
    );
    Ok(())
}

/// `quarry vectors check` and `quarry vectors apply-settings`: one line per setting that
/// differs; exit code 1 while something that could change in place still differs.
async fn vectors(settings: Settings, apply: bool) -> ExitCode {
    let remaining = match quarry::app::vector_settings(&settings, apply).await {
        Ok(remaining) => remaining,
        Err(err) => {
            eprintln!("quarry: {}", quarry::telemetry::error_chain(&err));
            return ExitCode::FAILURE;
        }
    };
    for collection in &remaining {
        for d in &collection.settings {
            println!(
                "{}\t{}\tconfigured {}\tactual {}\t{}",
                collection.collection,
                d.setting,
                d.configured,
                d.actual,
                if d.in_place {
                    "changes in place: quarry vectors apply-settings"
                } else {
                    "fixed at creation: see docs/operations.md"
                }
            );
        }
    }
    let pending = remaining.iter().flat_map(|c| &c.settings).any(|d| d.in_place);
    if remaining.is_empty() {
        println!("every collection in use matches [vectors.collection]");
    } else if apply && !pending {
        println!("applied what can change in place; the settings listed are fixed at creation");
    }
    if pending || (!apply && !remaining.is_empty()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs a client command against `--url`.
fn client(cli: Cli) -> ExitCode {
    use crate::cli::{self, Client, Exit};
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("quarry: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let client = Client::new(&cli.url, cli.token.clone(), cli.json);
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Worlds) => cli::worlds(&client).await.map(|()| Exit::Ok),
            Some(Command::Sources { world }) => cli::sources(&client, &world).await.map(|()| Exit::Ok),
            Some(Command::Jobs { world, watch }) => cli::jobs(&client, &world, watch).await.map(|()| Exit::Ok),
            Some(Command::Retrieve { world, query, options }) => {
                cli::retrieve(&client, &world, &query, options).await.map(|()| Exit::Ok)
            }
            Some(Command::Ingest(options)) => cli::ingest(&client, options).await,
            Some(Command::Sync(options)) => cli::sync(&client, options).await,
            Some(Command::Eval(options)) => cli::eval(&client, options).await,
            _ => Ok(Exit::Usage),
        }
    });
    match result {
        Ok(exit) => exit.into(),
        Err(failure) => cli::report(client.json, &failure),
    }
}
