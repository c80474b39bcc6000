//! Shared by the CRD case tests: the cases in `tests/k8s/cases/` and running `toolgate validate`.
//!
//! A case is one YAML object with a header of comments:
//!
//! ```yaml
//! # case: what it is about
//! # expect: accepted | rejected
//! # message: a substring the error must contain (repeatable; rejected cases)
//! # read-as: v1alpha1   (optional: create it for real and read it back through that version)
//! # expect-field: /spec/mcp/path = "/mcp"   (optional, with read-as: a JSON pointer and the JSON value
//! #                                          the server returns there, e.g. a default)
//! ```

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[derive(Debug, Clone)]
pub struct Case {
    pub file: PathBuf,
    pub title: String,
    pub accepted: bool,
    pub messages: Vec<String>,
    pub read_as: Option<String>,
    /// `(JSON pointer, expected value)` on the object read back.
    pub fields: Vec<(String, serde_json::Value)>,
}

impl Case {
    pub fn name(&self) -> String {
        self.file.file_name().unwrap().to_string_lossy().to_string()
    }
}

pub fn cases() -> Vec<Case> {
    let dir = repo_root().join("tests/k8s/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let cases: Vec<Case> = files.into_iter().map(parse_case).collect();
    assert!(
        cases.len() >= 30,
        "expected the CRD cases in {}",
        dir.display()
    );
    cases
}

fn parse_case(file: PathBuf) -> Case {
    let text = std::fs::read_to_string(&file).unwrap();
    let mut case = Case {
        file: file.clone(),
        title: String::new(),
        accepted: false,
        messages: vec![],
        read_as: None,
        fields: vec![],
    };
    let mut expect = None;
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let line = line.trim_start_matches('#').trim();
        if let Some(v) = line.strip_prefix("case:") {
            case.title = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("expect:") {
            expect = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("message:") {
            case.messages.push(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("read-as:") {
            case.read_as = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("expect-field:") {
            let (pointer, value) = v
                .split_once(" = ")
                .unwrap_or_else(|| panic!("{}: expect-field: <pointer> = <json>", file.display()));
            let value = serde_json::from_str(value.trim())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            case.fields.push((pointer.trim().to_string(), value));
        }
    }
    match expect.as_deref() {
        Some("accepted") => case.accepted = true,
        Some("rejected") => assert!(
            !case.messages.is_empty(),
            "{}: a rejected case needs a message",
            file.display()
        ),
        other => panic!(
            "{}: expect must be accepted or rejected, not {other:?}",
            file.display()
        ),
    }
    case
}

pub struct ValidateOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl ValidateOutput {
    /// Each problem as `<field path>: <message>` (the object prefix removed), as the API server words
    /// its causes.
    pub fn causes(&self) -> Vec<String> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| match l.find(": ") {
                Some(i) => l[i + 2..].to_string(),
                None => l.to_string(),
            })
            .collect()
    }
}

pub fn toolgate_validate(file: &Path) -> ValidateOutput {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("validate")
        .arg("-f")
        .arg(file)
        .output()
        .expect("runs toolgate");
    ValidateOutput {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// Checks `toolgate validate` against a case; returns the failures.
pub fn check_validate(case: &Case, out: &ValidateOutput) -> Vec<String> {
    let mut failures = Vec::new();
    if case.accepted {
        if out.code != 0 {
            failures.push(format!(
                "{}: toolgate validate rejected an accepted case (exit {}):\n{}",
                case.name(),
                out.code,
                out.stdout
            ));
        }
    } else {
        if out.code != 1 {
            failures.push(format!(
                "{}: toolgate validate exit {} (want 1):\n{}{}",
                case.name(),
                out.code,
                out.stdout,
                out.stderr
            ));
        }
        for m in &case.messages {
            if !out.stdout.contains(m.as_str()) {
                failures.push(format!(
                    "{}: toolgate validate output lacks {m:?}:\n{}",
                    case.name(),
                    out.stdout
                ));
            }
        }
    }
    failures
}
