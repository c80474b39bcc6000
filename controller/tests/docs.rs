//! The documentation against what it describes, where that is cheap to check: the README is a short
//! page, docs/layout.md's layout table against the tree and the CLI, `docs/semantics.md §N` citations against its sections, paths
//! the docs name against the files, docs/security.md's fuzzing table against `fuzz/`, `make help`
//! against the Makefile's targets, and the
//! generated docs against their generators' inputs. (The CRDs' test is in `src/crds.rs`; the bypass
//! table's in `tests/bypass/test_reference_table.py`.)
//!
//! The generated docs, and what is checked of them here (a measurement is only as current as its last
//! run: rerunning one takes minutes, so each says at which commit it was measured, and what can be
//! compared without measuring is):
//! - `crds/` (`toolgate crds`): byte for byte against the generator (`src/crds.rs`);
//! - docs/benchmarks.md (`make bench`, bench/report.py): ends with bench/how-to-read.md, names its commit;
//! - docs/wasm-size.md (`make wasm-size`): built with `.cargo/config.toml`'s time zones, names its commit;
//! - docs/controller.md (`make measure-controller`): names its commit.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("controller/ is in the repository")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Names of the entries of a folder of the repository (no hidden ones, no caches, no build outputs).
fn entries(rel: &str) -> BTreeSet<String> {
    std::fs::read_dir(repo().join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !n.starts_with('.')
                && !["__pycache__", "target", "dist", "dist.tmp"].contains(&n.as_str())
        })
        .collect()
}

/// The rows of the markdown table whose header line starts with `header`.
fn table_rows<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no table headed {header:?}");
    lines.skip(1).take_while(|l| l.starts_with('|')).collect()
}

/// The first cell of a table row, and the `backticked` words in a text.
fn first_cell(row: &str) -> &str {
    row.split('|').nth(1).unwrap_or_default()
}

fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn the_readme_is_a_short_page() {
    // The README is a newcomer's page; the rest is in docs/. No commit hashes: a word of 7 to 40
    // lower-case hex digits with both a digit and a letter in it.
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines, more than 200: move the detail to a page of docs/"
    );
    let hashes: Vec<&str> = readme
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            (7..=40).contains(&w.len())
                && w.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        })
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .collect();
    assert!(
        hashes.is_empty(),
        "README.md names commits (the docs that are generated say theirs): {hashes:?}"
    );
}

#[test]
fn the_layout_table_matches_the_tree_and_the_cli() {
    let layout = read("docs/layout.md");
    let rows = table_rows(&layout, "| crate / folder | job |");
    let row_of = |dir: &str| {
        rows.iter().find(|r| {
            backticked(first_cell(r))
                .iter()
                .any(|w| w.starts_with(&format!("{dir}/")))
        })
    };
    let mut problems = Vec::new();
    for dir in entries(".").into_iter().filter(|d| repo().join(d).is_dir()) {
        if row_of(&dir).is_none() {
            problems.push(format!("the top-level folder {dir}/ has no row"));
        }
    }
    for row in &rows {
        for path in backticked(first_cell(row))
            .into_iter()
            .filter(|w| w.ends_with('/'))
        {
            if !repo().join(path).is_dir() {
                problems.push(format!(
                    "the row of {path} names a folder that does not exist"
                ));
            }
        }
    }
    // Every entry of these folders is named in its row.
    for (dir, keep) in [
        ("docs", (|n: &str| n.ends_with(".md")) as fn(&str) -> bool),
        ("scripts", |_| true),
        ("tests", |_| true),
    ] {
        let Some(row) = row_of(dir) else { continue };
        for name in entries(dir).into_iter().filter(|n| keep(n)) {
            if !row.contains(&format!("`{name}")) && !row.contains(&format!("[`{name}`]")) {
                problems.push(format!("{dir}/{name} is not in the row of {dir}/"));
            }
        }
    }
    // Every command of the CLI is named in the row of controller/.
    let help = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--help")
        .output()
        .expect("toolgate runs");
    let help = String::from_utf8(help.stdout).unwrap();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.contains(&"controller"), "{help}");
    let controller_row = row_of("controller")
        .map(|r| backticked(r))
        .unwrap_or_default();
    for command in commands {
        if !controller_row
            .iter()
            .any(|w| *w == command || *w == format!("toolgate {command}"))
        {
            problems.push(format!(
                "the command `{command}` is not in the row of controller/"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/layout.md's layout table is stale:\n{}",
        problems.join("\n")
    );
}

/// Text files of the repository (sources, scripts, docs), without build outputs and caches.
fn text_files() -> Vec<PathBuf> {
    const SKIP: &[&str] = &[
        "target",
        "node_modules",
        "__pycache__",
        "corpus",
        "thirdparty-crds",
        "testdata",
    ];
    const EXTENSIONS: &[&str] = &["rs", "md", "py", "sh", "toml", "go", "mjs", "yaml"];
    let mut out = Vec::new();
    let mut stack = vec![repo()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let (path, name) = (
                entry.path(),
                entry.file_name().to_string_lossy().into_owned(),
            );
            if name.starts_with('.') || SKIP.contains(&name.as_str()) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if name == "Makefile"
                || path
                    .extension()
                    .is_some_and(|e| EXTENSIONS.contains(&e.to_str().unwrap_or("")))
            {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn every_semantics_citation_names_a_section_of_docs_semantics() {
    let semantics = read("docs/semantics.md");
    // `## 6a. Rollout` is §6a; the numbered items of §9 are §9.N.
    let mut sections: BTreeSet<String> = semantics
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|h| h.split_once(". ").map(|(n, _)| n.to_string()))
        .collect();
    let nine = semantics
        .split("\n## 9. ")
        .nth(1)
        .expect("docs/semantics.md has a section 9");
    sections.extend(
        nine.lines()
            .filter_map(|l| l.split_once(". "))
            .filter_map(|(n, _)| n.parse::<u32>().ok().map(|n| format!("9.{n}"))),
    );
    assert!(
        sections.contains("6b") && sections.contains("9.14"),
        "{sections:?}"
    );
    let mut problems = Vec::new();
    for file in text_files()
        .into_iter()
        .filter(|f| !f.ends_with("controller/tests/docs.rs"))
    {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file.strip_prefix(repo()).unwrap().display().to_string();
        for (i, _) in text.match_indices("semantics.md §") {
            let cited: String = text[i + "semantics.md §".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            let cited = cited.trim_end_matches('.');
            // `§N` is how the docs say "a section number".
            if cited != "N" && !sections.contains(cited) {
                problems.push(format!(
                    "{rel}: docs/semantics.md §{cited} is not a section"
                ));
            }
        }
        // The reference is docs/semantics.md: no citation of a document the repository does not have.
        if text.contains("SPEC §") || text.contains("SPEC.md") {
            problems.push(format!("{rel}: cites SPEC, which is not in the repository (docs/semantics.md is the reference)"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_paths_the_docs_name_exist() {
    let tops: Vec<String> = entries(".")
        .into_iter()
        .filter(|d| repo().join(d).is_dir())
        .collect();
    let mut docs = vec!["README.md".to_string(), "bench/notes.md".to_string()];
    docs.extend(
        entries("docs")
            .into_iter()
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/{n}")),
    );
    docs.extend(
        entries("docs/design")
            .into_iter()
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/design/{n}")),
    );
    docs.extend(
        entries("tests")
            .into_iter()
            .map(|d| format!("tests/{d}/README.md"))
            .filter(|p| repo().join(p).is_file()),
    );
    let mut problems = Vec::new();
    for doc in &docs {
        let text = read(doc);
        let base = repo().join(doc).parent().unwrap().to_path_buf();
        // Words that start with a top-level folder of the repository: `policy/src/re2.rs`, tests/e2e/,
        // docs/semantics.md#3-the-decision (the heading must be there), tests/e2e/test_x.py::test_y
        // (the test too).
        let mut check = |word: &str| {
            let word = word.trim_end_matches([':', '.']);
            let Some((top, _)) = word.split_once('/') else {
                return;
            };
            if !tops.iter().any(|t| t == top) || word.contains(['{', '$']) {
                return;
            }
            let (path, anchor) = word
                .split_once('#')
                .map_or((word, None), |(p, a)| (p, Some(a)));
            let (path, test) = path
                .split_once("::")
                .map_or((path, None), |(p, t)| (p, Some(t)));
            let Some(file) = [repo().join(path), base.join(path)]
                .into_iter()
                .find(|p| p.exists())
            else {
                problems.push(format!("{doc}: {word}"));
                return;
            };
            let text = || std::fs::read_to_string(&file).unwrap_or_default();
            if anchor.is_some_and(|a| {
                !text()
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .any(|h| slug(h) == a)
            }) {
                problems.push(format!("{doc}: {word} (no such heading)"));
            }
            if test.is_some_and(|t| !text().contains(&format!("def {t}("))) {
                problems.push(format!("{doc}: {word} (no such test)"));
            }
        };
        let mut start = 0;
        for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
            if c.is_whitespace() || "`()[]<>\"',;*|".contains(c) {
                if start < i {
                    check(&text[start..i]);
                }
                start = i + c.len_utf8();
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_test_counts_the_docs_give_are_the_files_counts() {
    // "`test_x.py` (3 tests" or "`tests/e2e/test_x.py`, 3 tests": the number of `def test_` in the file.
    let mut docs = vec!["README.md".to_string()];
    docs.extend(
        entries("docs")
            .into_iter()
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/{n}")),
    );
    docs.extend(
        entries("tests")
            .into_iter()
            .map(|d| format!("tests/{d}/README.md"))
            .filter(|p| repo().join(p).is_file()),
    );
    let test_files: Vec<PathBuf> = text_files()
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "py"))
        .collect();
    let mut problems = Vec::new();
    let mut seen = 0;
    for doc in &docs {
        let text = read(doc);
        for (i, _) in text.match_indices(".py`") {
            let name = &text[text[..i].rfind('`').map_or(i, |b| b + 1)..i + 3];
            let after = text[i + 4..].trim_start_matches([' ', '(', ',', '\n']);
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() || !after[digits.len()..].starts_with(" test") {
                continue;
            }
            let Some(file) = test_files.iter().find(|f| f.ends_with(name)) else {
                problems.push(format!("{doc}: {name} not found"));
                continue;
            };
            let source = std::fs::read_to_string(file).unwrap();
            let count = source
                .lines()
                .filter(|l| l.starts_with("def test_") || l.starts_with("async def test_"))
                .count();
            seen += 1;
            if digits.parse::<usize>() != Ok(count) {
                problems.push(format!("{doc}: {name} has {count} tests, not {digits}"));
            }
        }
    }
    assert!(seen > 0, "no test count found: the pattern changed");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The anchor GitHub gives a markdown heading (`## 3. The decision` is `3-the-decision`).
fn slug(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn the_security_doc_lists_every_fuzz_target() {
    let targets: BTreeSet<String> = entries("fuzz/fuzz_targets")
        .into_iter()
        .filter_map(|n| n.strip_suffix(".rs").map(str::to_string))
        .collect();
    let cargo = read("fuzz/Cargo.toml");
    let bins: BTreeSet<String> = cargo
        .split("[[bin]]")
        .skip(1)
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("name = ")))
        .map(|n| n.trim_matches('"').to_string())
        .collect();
    assert_eq!(
        bins, targets,
        "fuzz/Cargo.toml's [[bin]]s and fuzz/fuzz_targets/"
    );
    let security = read("docs/security.md");
    let fuzzing = security
        .split("\n## Fuzzing")
        .nth(1)
        .expect("docs/security.md has a Fuzzing section");
    let fuzzing = fuzzing.split("\n## ").next().unwrap();
    let rows: BTreeSet<String> = table_rows(fuzzing, "| target |")
        .into_iter()
        .filter_map(|r| backticked(first_cell(r)).first().map(|s| s.to_string()))
        .collect();
    assert_eq!(
        rows, targets,
        "docs/security.md's fuzzing table and fuzz/fuzz_targets/"
    );
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let count = WORDS
        .get(targets.len())
        .map_or_else(|| targets.len().to_string(), |w| w.to_string());
    assert!(
        fuzzing.contains(&format!("the {count} libFuzzer targets")),
        "docs/security.md's Fuzzing section should say `the {count} libFuzzer targets`"
    );
}

#[test]
fn the_benchmarks_doc_ends_with_how_to_read_it() {
    // bench/report.py ends the generated report with bench/how-to-read.md, its one hand-written
    // section; an edit of either alone is stale.
    let how = read("bench/how-to-read.md");
    assert!(
        read("docs/benchmarks.md").ends_with(&format!("{}\n", how.trim_end())),
        "docs/benchmarks.md does not end with bench/how-to-read.md: rerun `.venv/bin/python bench/report.py` \
         on the last results"
    );
}

/// The docs a measuring command writes, and the command.
const MEASURED: [(&str, &str); 3] = [
    ("docs/benchmarks.md", "make bench"),
    ("docs/wasm-size.md", "make wasm-size"),
    ("docs/controller.md", "make measure-controller"),
];

#[test]
fn every_measured_doc_names_its_command_and_the_commit_it_measured() {
    // "Toolgate at 449864e;", "on 2026-11-24 at e48d4e8.": the commit, so a reader can tell how old
    // the figures are (`git log <commit>..`), within the doc's first lines.
    let mut problems = Vec::new();
    for (doc, command) in MEASURED {
        let text = read(doc);
        let head: String = text.lines().take(15).collect::<Vec<_>>().join("\n");
        if !head.contains(&format!("Generated by `{command}`")) {
            problems.push(format!(
                "{doc}: does not start with \"Generated by `{command}`\""
            ));
        }
        let commit = head.split(" at ").skip(1).find_map(|rest| {
            let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
            (hex.len() >= 7 && rest[hex.len()..].starts_with(['.', ';', ',', ' ', '\n']))
                .then_some(hex)
        });
        match commit {
            None => problems.push(format!(
                "{doc}: names no commit (\"at <commit>\") in its first lines"
            )),
            // A shallow clone may not have it; a full one must (not a commit of another branch or a rebase).
            Some(c)
                if git(&["rev-parse", "--is-shallow-repository"]).as_deref() == Some("false") =>
            {
                if git(&["cat-file", "-e", &format!("{c}^{{commit}}")]).is_none() {
                    problems.push(format!(
                        "{doc}: measured at {c}, which is not a commit of this repository"
                    ));
                }
            }
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `git`'s output in the repository, or None when it fails (or there is no git).
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn the_wasm_size_doc_was_built_with_the_configured_time_zones() {
    // Every zone adds to the module's size; a changed CHRONO_TZ_TIMEZONE_FILTER makes its sizes stale.
    let config = read(".cargo/config.toml");
    let zones = config
        .lines()
        .find_map(|l| l.strip_prefix("CHRONO_TZ_TIMEZONE_FILTER = "))
        .expect(".cargo/config.toml sets CHRONO_TZ_TIMEZONE_FILTER")
        .trim_matches('"');
    assert!(
        read("docs/wasm-size.md").contains(&format!("`{zones}`")),
        "docs/wasm-size.md was not measured with .cargo/config.toml's CHRONO_TZ_TIMEZONE_FILTER: run `make wasm-size`"
    );
}

/// `make help` names every target of the Makefile (the internal steps of `make test`'s graph aside).
#[test]
fn make_help_names_every_target() {
    let makefile = read("Makefile");
    let help: String = makefile
        .split("\nhelp:\n")
        .nth(1)
        .expect("a help target")
        .lines()
        .take_while(|l| l.starts_with('\t'))
        .collect::<Vec<_>>()
        .join("\n");
    let internal = ["help", "test-graph", "test-unit-build", "test-fuzz-build"];
    let targets: BTreeSet<&str> = makefile
        .lines()
        .filter(|l| !l.starts_with(['\t', '#', '.', ' ']) && !l.contains(":="))
        .filter_map(|l| l.split_once(':').map(|(t, _)| t.trim()))
        .filter(|t| !t.is_empty() && !t.contains(['$', ' ', '%']) && !internal.contains(t))
        .collect();
    assert!(targets.len() > 20, "{targets:?}");
    let named = |t: &str| {
        help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .any(|w| w == t)
    };
    let missing: Vec<&&str> = targets.iter().filter(|t| !named(t)).collect();
    assert!(missing.is_empty(), "make help does not name {missing:?}");
}
