//! Every command README shows — in its shell blocks and in its inline code — is run somewhere:
//! by a test (named here), or by CI (`.ci/run`). A command added to README without a line here
//! fails this test, so the list stays the truth.

/// A command (its start) and where it is run.
const EXERCISED: &[(&str, &str)] = &[
    (
        "make run",
        "binary::the_readme_walkthrough_finds_the_right_passages_with_the_local_model starts `quarry serve` on the embedded defaults, as make run does (make run adds a release build and the token dev-token)",
    ),
    ("make test", ".ci/run"),
    (
        "quarry vectors check",
        "collection_layout::a_collection_made_under_other_settings_is_reported_and_changed_only_by_the_command",
    ),
    (
        "quarry vectors apply-settings",
        "collection_layout::a_collection_made_under_other_settings_is_reported_and_changed_only_by_the_command",
    ),
    (
        "make openapi",
        "binary::openapi_subcommand_prints_the_committed_document (what make openapi writes)",
    ),
    (
        "export Q=",
        "binary::the_readme_walkthrough_finds_the_right_passages_with_the_local_model",
    ),
    (
        "curl -s -H \"$AUTH\"",
        "binary::the_readme_walkthrough_finds_the_right_passages_with_the_local_model (the same requests)",
    ),
    (
        "WORLD=",
        "binary::the_readme_walkthrough_finds_the_right_passages_with_the_local_model",
    ),
    (
        "JOB=",
        "binary::the_readme_walkthrough_finds_the_right_passages_with_the_local_model",
    ),
    (
        "QUARRY__AUTH__TOKENS=secret",
        "cluster::replicas_on_one_store_see_each_other_and_a_stopped_one_leaves (PostgreSQL); the Qdrant server is the server conformance suite (QUARRY_TEST_QDRANT_URL)",
    ),
    ("pip install openapi-python-client", ".ci/run (scripts/sdk-check)"),
    ("openapi-python-client generate", ".ci/run (scripts/sdk-check)"),
    ("npx openapi-typescript", ".ci/run (scripts/sdk-check)"),
    (
        "export QUARRY_TOKEN=",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry ingest",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry sync",
        "cli::sync_mirrors_a_folder_adding_replacing_and_deleting_only_when_told",
    ),
    (
        "QUARRY_TOKEN=dev-token quarry sync",
        "cli::sync_mirrors_a_folder_adding_replacing_and_deleting_only_when_told",
    ),
    (
        "quarry eval",
        "cli::eval_scores_a_test_set_from_a_file_and_compares_two_runs",
    ),
    (
        "quarry keys rotate-master",
        "keys::a_rotated_master_key_serves_every_secret_and_the_old_one_is_refused",
    ),
    (
        "quarry worlds",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry sources",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry jobs",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry retrieve",
        "cli::a_folder_goes_in_a_world_comes_out_and_a_rerun_uploads_nothing",
    ),
    (
        "quarry migrate",
        "binary::migrate_creates_the_database_without_needing_tokens",
    ),
    (
        "quarry openapi",
        "binary::openapi_subcommand_prints_the_committed_document",
    ),
    (
        "claude mcp add",
        "mcp::the_documented_mcp_configuration_connects_as_written (its URL and header, against docs/mcp.md's configuration; the Claude Code CLI is not on the machine)",
    ),
    (
        "curl -s -X POST localhost:8080/v1/webhooks",
        "webhooks::a_finished_job_is_delivered_once_signed_so_that_the_receiver_verifies_it (the same request)",
    ),
    (
        "docker compose up --build",
        ".ci/run (docker-compose config: the file is read and checked; no Docker engine to run it)",
    ),
    (
        "docker run -v quarry-data:/var/lib/quarry/data",
        "not run: no Docker engine here; the Dockerfile creates and owns the volume's folder",
    ),
    (
        "sqlite3 data/quarry.db",
        "binary::the_readme_operations_commands_work_as_written",
    ),
    (
        "openssl rand -base64 32",
        "binary::the_readme_operations_commands_work_as_written",
    ),
    (
        "pg_dump --format=custom",
        "operations::a_postgres_store_backed_up_with_pg_dump_and_restored_answers_as_before",
    ),
    (
        "pg_restore --no-owner",
        "operations::a_postgres_store_backed_up_with_pg_dump_and_restored_answers_as_before",
    ),
    (
        "curl -N",
        "jobs events tests (GET /v1/jobs/{job_id}/events as server-sent events)",
    ),
];

/// Programs whose inline code spans are commands.
const PROGRAMS: &[&str] = &[
    "make ",
    "curl ",
    "quarry ",
    "docker ",
    "pg_dump",
    "pg_restore",
    "sqlite3 ",
    "openssl ",
    "claude ",
    "npx ",
    "pip ",
];

/// The commands of README's `sh` blocks (continuation lines joined, comments and blank lines
/// left out) and its inline code spans that start with a program.
fn commands(readme: &str) -> Vec<String> {
    let mut found = Vec::new();
    for block in readme.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let mut current = String::new();
        for line in block.lines() {
            let line = line.trim();
            if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
                continue;
            }
            let (part, continues) = match line.strip_suffix('\\') {
                Some(part) => (part.trim_end(), true),
                None => (line, false),
            };
            current.push_str(part);
            if continues {
                current.push(' ');
            } else {
                found.push(std::mem::take(&mut current));
            }
        }
    }
    for (i, span) in readme.split('`').enumerate() {
        if i % 2 == 1 && PROGRAMS.iter().any(|p| span.starts_with(p)) {
            found.push(span.to_owned());
        }
    }
    found
}

#[test]
fn every_command_in_the_readme_is_exercised() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let commands = commands(&readme);
    assert!(commands.len() > 20, "{commands:#?}");
    let unlisted: Vec<&String> = commands
        .iter()
        .filter(|c| !EXERCISED.iter().any(|(start, _)| c.starts_with(start)))
        .collect();
    assert!(
        unlisted.is_empty(),
        "README commands no test or CI step is listed for (add one to EXERCISED in tests/api/readme.rs): {unlisted:#?}"
    );
    // And every line here still names a command README shows.
    let stale: Vec<&str> = EXERCISED
        .iter()
        .map(|(start, _)| *start)
        .filter(|start| !commands.iter().any(|c| c.starts_with(start)))
        .collect();
    assert!(stale.is_empty(), "listed but no longer in README: {stale:?}");
}
