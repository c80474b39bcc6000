//! The subcommands of `toolgate`, one file each: their arguments, what they print and their exit
//! codes. What they compute is in the modules below them: the steps they share in `cli` (reading
//! the inputs into the model, the topology), and `validate`, `topology`, `render`, `explain`, `crds`
//! and `runtime` (the controller).

mod compile;
mod controller;
mod crds;
mod explain;
mod render;
mod validate;

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::{self, Failure};

#[derive(Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions (XAccessPolicy, XBackend) as multi-document YAML.
    Crds(crds::CrdsArgs),
    /// Run every CRD validation (OpenAPI limits, CEL rules) offline; exit 1 when any object is invalid
    /// or any document is not an object Toolgate reads.
    Validate(cli::InputArgs),
    /// Write each Gateway listener's compiled plan and status.json.
    Compile(compile::CompileArgs),
    /// Write a runnable Envoy configuration per Gateway.
    Render(render::RenderArgs),
    /// Print the decision for a described request, and why; exit 0 when it is ALLOW, 1 when not, 2
    /// on errors (as `kubectl auth can-i`).
    Explain(explain::ExplainArgs),
    /// Run in a cluster: watch the resources, write Istio WasmPlugins (or TrafficExtensions) and
    /// policy status (KUBECONFIG or the in-cluster service account).
    Controller(crate::runtime::ControllerArgs),
}

impl Command {
    /// Runs the command; its exit code.
    pub fn run(self) -> ExitCode {
        match self {
            Command::Crds(args) => crds::run(&args),
            Command::Validate(args) => ExitCode::from(validate::run(&args)),
            Command::Compile(args) => exit(compile::run(&args)),
            Command::Render(args) => exit(render::run(&args)),
            Command::Explain(args) => {
                ExitCode::from(explain::Verdict::exit_code(explain::run(&args)))
            }
            Command::Controller(args) => controller::run(&args),
        }
    }
}

/// The exit code of a command that writes files: 0 done, 1 invalid input, 2 usage or I/O error.
fn exit(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid) => ExitCode::from(1),
        Err(Failure::Usage) => ExitCode::from(2),
    }
}
