//! The commit `toolgate --version` prints (TOOLGATE_COMMIT in the crate's environment): the variable
//! TOOLGATE_COMMIT when set (a build from a source archive, without .git; or a release build that
//! states it), else `git rev-parse HEAD`, else `unknown`. Never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TOOLGATE_COMMIT");
    let commit = std::env::var("TOOLGATE_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TOOLGATE_COMMIT={commit}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn git_commit() -> Option<String> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let commit = git(&dir, &["rev-parse", "HEAD"])?;
    if !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // Run again when HEAD moves: HEAD itself, the branch it names, packed-refs. Only files that exist
    // (cargo reruns a build script on every build while a path it watches is missing).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in &watched {
        if let Some(path) = git(&dir, &["rev-parse", "--git-path", name]) {
            let path = dir.join(path);
            if path.is_file() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}
