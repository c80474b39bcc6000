//! `toolgate crds`: the CustomResourceDefinitions, printed or written one file per CRD (generated
//! by `crate::crds`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct CrdsArgs {
    /// Write one file per CRD into this folder (as kept in crds/) instead of printing.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
}

pub fn run(args: &CrdsArgs) -> ExitCode {
    match &args.output {
        None => {
            print!("{}", crate::crds::render_all());
            ExitCode::SUCCESS
        }
        Some(dir) => match crate::crds::write_dir(dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolgate crds: {}: {e}", dir.display());
                ExitCode::from(2)
            }
        },
    }
}
