//! `toolgate`: validate, compile and render XAccessPolicy resources for Envoy; run the controller.
//!
//! Layers, each importing only those below it:
//! 1. `inputs` (YAML files → raw objects), `par`, `crds`, `hostname` (host-name patterns);
//! 2. per-object admission: `validate` (schema, CEL rules, semantic checks) and `convert` (versions);
//! 3. `model`: the typed inventory of admitted objects;
//! 4. `topology`: inventory → plans and statuses, a pure function shared by the CLI and the controller;
//! 5. the commands (`validate_cmd`, `compile_cmd`, `render`, `explain_cmd`, over `cli`) and `runtime`
//!    (the controller), which differ only in where objects come from and where results go.

#![forbid(unsafe_code)]
mod cli;
mod compile_cmd;
mod convert;
mod crds;
mod explain_cmd;
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
mod validate_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    command: Command,
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

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions (XAccessPolicy, XBackend) as multi-document YAML.
    Crds {
        /// Write one file per CRD into this folder (as kept in crds/) instead of printing.
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: Option<std::path::PathBuf>,
    },
    /// Run every CRD validation (OpenAPI limits, CEL rules) offline; exit 1 when any object is invalid
    /// or any document is not an object Toolgate reads.
    Validate(cli::InputArgs),
    /// Write each Gateway listener's compiled plan and status.json.
    Compile(compile_cmd::CompileArgs),
    /// Write a runnable Envoy configuration per Gateway.
    Render(render::RenderArgs),
    /// Print the decision for a described request, and why; exit 0 when it is ALLOW, 1 when not, 2
    /// on errors (as `kubectl auth can-i`).
    Explain(explain_cmd::ExplainArgs),
    /// Run in a cluster: watch the resources, write Istio WasmPlugins (or TrafficExtensions) and
    /// policy status (KUBECONFIG or the in-cluster service account).
    Controller(runtime::ControllerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Crds { output: None } => {
            print!("{}", crds::render_all());
            ExitCode::SUCCESS
        }
        Command::Crds { output: Some(dir) } => match crds::write_dir(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolgate crds: {}: {e}", dir.display());
                ExitCode::from(2)
            }
        },
        Command::Validate(args) => ExitCode::from(validate_cmd::run(&args)),
        Command::Compile(args) => exit(compile_cmd::run(&args)),
        Command::Render(args) => exit(render::run(&args)),
        Command::Explain(args) => {
            ExitCode::from(explain_cmd::Verdict::exit_code(explain_cmd::run(&args)))
        }
        Command::Controller(args) => runtime::run(&args),
    }
}

fn exit(result: Result<(), cli::Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli::Failure::Invalid) => ExitCode::from(1),
        Err(cli::Failure::Usage) => ExitCode::from(2),
    }
}
