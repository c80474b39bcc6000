//! `toolgate controller`: the in-cluster controller (`crate::runtime`, whose `ControllerArgs` are its
//! arguments) on a two-thread runtime; exit 1 when it fails, 2 when it cannot start.

use std::process::ExitCode;

use crate::runtime::{self, ControllerArgs};

pub fn run(args: &ControllerArgs) -> ExitCode {
    let threads = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match threads.block_on(runtime::controller(args.clone())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::from(1)
        }
    }
}
