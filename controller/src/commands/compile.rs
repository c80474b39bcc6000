//! `toolgate compile`: each listener's plan and `status.json`.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::{self, Failure, InputArgs, PlanArgs};
use crate::topology::{self, Topology};

#[derive(Args, Debug)]
pub struct CompileArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Output folder.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
}

pub fn run(args: &CompileArgs) -> Result<(), Failure> {
    let inv = cli::load_inventory(&args.input)?;
    let topo = cli::build_topology(&inv, &args.plan, false)?;
    std::fs::create_dir_all(&args.output).map_err(|e| {
        eprintln!("error: {}: {e}", args.output.display());
        Failure::Usage
    })?;
    // With thousands of policies, freeing the inventory and serialising status.json take as long as
    // writing the plans: done on other cores meanwhile.
    std::thread::scope(|s| {
        s.spawn(move || drop(inv));
        let status =
            s.spawn(|| serde_json::to_vec_pretty(&topo.statuses).expect("status serialises"));
        write_plans(&topo, &args.output)?;
        let status = status
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        cli::write_file(&args.output.join("status.json"), &status)
    })
}

fn write_plans(topo: &Topology, output: &Path) -> Result<(), Failure> {
    for gw in &topo.gateways {
        for l in &gw.listeners {
            let path = output.join(topology::plan_file_name(&gw.gateway, &l.listener));
            let json = serde_json::to_vec_pretty(&l.plan).expect("plans serialise");
            cli::write_file(&path, &json)?;
            println!(
                "{}: {} ({} gateway-level, {} backend-level policies)",
                path.display(),
                l.plan.hash,
                l.plan.gateway.allow.len(),
                l.plan
                    .backends
                    .values()
                    .map(|b| b.allow.len())
                    .sum::<usize>()
            );
        }
    }
    Ok(())
}
