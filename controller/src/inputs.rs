//! Reading `-f PATH...` inputs: files or folders of multi-document YAML, as kubectl does.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One YAML document, untyped, with where it came from (for error messages).
#[derive(Clone, Debug)]
pub struct RawObject {
    pub file: PathBuf,
    /// 0-based index of the document within its file.
    pub doc: usize,
    pub value: Value,
}

impl RawObject {
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or("")
    }
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(Value::as_str).unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
    }
    /// `metadata.namespace`, or `default_ns` when it is absent.
    pub fn namespace<'a>(&'a self, default_ns: &'a str) -> &'a str {
        self.value.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(default_ns)
    }
    /// `file#doc` for messages.
    pub fn origin(&self) -> String {
        format!("{}#{}", self.file.display(), self.doc)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Could not read a file or folder: a usage/I/O error (exit 2).
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// A document is not valid YAML: invalid input (exit 1).
    #[error("{path}: document {doc}: YAML syntax error: {message}")]
    Syntax { path: PathBuf, doc: usize, message: String },
}

/// Loads every document of every file. A folder contributes its `.yaml`, `.yml` and `.json` files,
/// recursively, in name order. Empty documents and `kind: List` wrappers are flattened away.
pub fn load(paths: &[PathBuf]) -> Result<Vec<RawObject>, InputError> {
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| InputError::Io { path: file.clone(), source })?;
        for (doc, de) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let value: Value = serde::Deserialize::deserialize(de).map_err(|e| InputError::Syntax {
                path: file.clone(),
                doc,
                message: e.to_string(),
            })?;
            push_flattened(&file, doc, value, &mut out);
        }
    }
    Ok(out)
}

fn push_flattened(file: &Path, doc: usize, value: Value, out: &mut Vec<RawObject>) {
    match value {
        Value::Null => {}
        Value::Object(ref m) if m.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")) => {
            if let Some(Value::Array(items)) = m.get("items") {
                for item in items.clone() {
                    push_flattened(file, doc, item, out);
                }
            }
        }
        value => out.push(RawObject { file: file.to_path_buf(), doc, value }),
    }
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let meta = std::fs::metadata(path).map_err(|source| InputError::Io { path: path.to_path_buf(), source })?;
    if !meta.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|source| InputError::Io { path: path.to_path_buf(), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, files)?;
        } else if matches!(entry.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
            files.push(entry);
        }
    }
    Ok(())
}
