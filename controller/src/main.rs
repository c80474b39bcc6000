//! `toolgate`: validate, compile and render XAccessPolicy resources for Envoy; run the controller.
//!
//! Layers, each importing only those below it and, within a layer, those named before it (`make
//! lint` runs scripts/check-layering.py, which fails on any import circle):
//! 1. `par`, `hostname` (host-name patterns), `crds` (the CRDs), then `inputs` (YAML files → raw
//!    objects);
//! 2. per-object admission: `validate` (schema, CEL rules, semantic checks) and `convert` (versions);
//! 3. `model`: the typed inventory of admitted objects;
//! 4. `grants` (ReferenceGrants), then `topology`: inventory → plans and statuses, a pure function
//!    shared by the CLI and the controller;
//! 5. what the commands do with it: `cli` (the steps they share: inputs → model → topology),
//!    `request_authn` then `render` (Envoy configuration), `explain` (a request through the filter's
//!    lifecycle), and `runtime` (the controller), which differ only in where objects come from and
//!    where results go;
//! 6. `commands`: one file per subcommand (its arguments, what it prints, its exit code).

#![forbid(unsafe_code)]
mod cli;
mod commands;
mod convert;
mod crds;
mod explain;
mod grants;
mod hostname;
mod inputs;
mod model;
mod par;
mod render;
mod request_authn;
mod runtime;
mod topology;
mod validate;

use std::process::ExitCode;

use clap::Parser;

/// `toolgate --version`: the workspace version (Cargo.toml, the one version of a release) and the
/// commit it was built from (build.rs: TOOLGATE_COMMIT, else git, else `unknown`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TOOLGATE_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(name = "toolgate", version = VERSION, about = "Authorization for MCP tool calls, enforced inside Envoy")]
struct Cli {
    /// How log lines are printed on stderr: `text` (one line each) or `json` (one object each).
    /// Levels come from RUST_LOG (e.g. `debug`, `toolgate=debug,kube=info`); default `info`.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: commands::Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs (`tracing` events, so far the controller's) go to stderr through this subscriber. What a
/// command prints as its result (validate's problems, explain's answer, render's and compile's
/// errors and warnings, `error: ...` for bad usage) is output, not logging: printed as it is.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    // RUST_LOG when set (and valid); else info for Toolgate and warnings for the libraries.
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,toolgate=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    cli.command.run()
}
