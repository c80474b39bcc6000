//! `toolgate`: validate, compile and render XAccessPolicy resources for Envoy; run the controller.

mod inputs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "toolgate", version, about = "Authorization for MCP tool calls, enforced inside Envoy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions (XAccessPolicy, XBackend).
    Crds,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds => ExitCode::SUCCESS,
    }
}
