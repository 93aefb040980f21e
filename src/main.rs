//! The `quarry` binary: parse the command line, load configuration, set up logging, then run
//! the chosen command. Everything else lives in the library.

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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (the default).
    Serve,
    /// Apply the store migrations and exit.
    Migrate,
    /// Print the OpenAPI document and exit.
    Openapi,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Openapi) = cli.command {
        print!("{}", quarry::api::openapi::document());
        return ExitCode::SUCCESS;
    }
    telemetry::init(cli.log_format);
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
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
    let result = runtime.block_on(async move {
        match cli.command {
            Some(Command::Migrate) => {
                let store = quarry::store::connect(settings.store.url.expose_secret()).await?;
                store.close().await;
                tracing::info!("migrations applied");
                Ok(())
            }
            Some(Command::Serve) | None => {
                let app = App::build(settings).await?;
                app.run_until(shutdown_signal()).await?;
                Ok(())
            }
            Some(Command::Openapi) => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let err: Box<dyn std::error::Error> = err;
            eprintln!("quarry: {}", quarry::telemetry::error_chain(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}
