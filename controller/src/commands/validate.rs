//! `toolgate validate`: the command. Per-object admission (schema, CEL rules, semantic checks) is
//! [`crate::validate`], below the model; the findings that need the whole inventory (targets,
//! limits per target) come from the topology, above it.

use crate::inputs::RawObject;
use crate::validate::{validate_objects, Problem, Severity};

/// `toolgate validate -f PATH... [--namespace NS] [--ignore-unknown-kinds]`: prints each problem;
/// returns the exit code (0 all valid, 1 any invalid, a YAML syntax error or a document that is
/// not an object Toolgate reads, 2 I/O error).
pub fn run(input: &crate::cli::InputArgs) -> u8 {
    let objects = match input.read() {
        Ok(o) => o,
        Err(e @ crate::inputs::InputError::Syntax { .. }) => {
            println!("{e}");
            return 1;
        }
        Err(crate::inputs::InputError::Unreadable(documents)) => {
            for d in &documents {
                println!("{d}");
            }
            eprintln!("{} problem(s) found", documents.len());
            return 1;
        }
        Err(e) => {
            eprintln!("toolgate validate: {e}");
            return 2;
        }
    };
    let count = objects.len();
    let mut problems = validate_objects(&objects, &input.namespace);
    problems.extend(compile_problems(objects, &input.namespace));
    report(&problems, count)
}

/// The checks a schema cannot express (regular expressions, sources, CEL compilation) as errors,
/// and cluster-state findings (`TargetNotFound`, `LimitPerTargetExceeded`) as warnings (docs/semantics.md §7).
/// Objects the schema already refused are not reported twice.
fn compile_problems(objects: Vec<RawObject>, default_namespace: &str) -> Vec<Problem> {
    let (inv, model_errors) = crate::model::Inventory::from_raw(objects, default_namespace);
    let mut problems: Vec<Problem> = model_errors
        .into_iter()
        .filter(|e| !is_ours_kind(&e.kind))
        .map(|e| Problem {
            origin: e.origin,
            kind: e.kind,
            namespace: e.namespace,
            name: e.name,
            path: String::new(),
            message: e.message,
            severity: Severity::Error,
        })
        .collect();
    let topo = crate::topology::build(&inv, &crate::topology::TopologyOptions::default());
    // By key, once: looking each status's policy up among all of them made validate quadratic.
    let policies: std::collections::HashMap<
        String,
        &crate::model::Object<toolgate_policy::api::AccessPolicySpec>,
    > = inv.policies.iter().map(|p| (p.key(), p)).rev().collect();
    for status in &topo.statuses {
        let Some(policy) = policies.get(&status.policy) else {
            continue;
        };
        let mut seen = std::collections::BTreeSet::new();
        for ancestor in &status.ancestors {
            for c in ancestor.conditions.iter().filter(|c| c.status != "True") {
                // Findings that depend on cluster state are warnings; the API would reject neither.
                let severity = match c.reason.as_str() {
                    "TargetNotFound" | "LimitPerTargetExceeded" => Severity::Warning,
                    _ => Severity::Error,
                };
                let message = format!("{}: {}", c.reason, c.message);
                if seen.insert(message.clone()) {
                    problems.push(Problem {
                        origin: policy.origin.clone(),
                        kind: "XAccessPolicy".into(),
                        namespace: policy.namespace.clone(),
                        name: policy.name.clone(),
                        path: String::new(),
                        message,
                        severity,
                    });
                }
            }
        }
    }
    problems
}

fn is_ours_kind(kind: &str) -> bool {
    matches!(kind, "XAccessPolicy" | "XBackend")
}

/// Prints problems (errors on stdout, warnings too) and a summary on stderr; returns the exit code.
pub fn report(problems: &[Problem], object_count: usize) -> u8 {
    for p in problems {
        println!("{p}");
    }
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    if errors == 0 {
        eprintln!("{object_count} object(s) valid");
        0
    } else {
        eprintln!("{errors} problem(s) found");
        1
    }
}
