//! Reading `-f PATH...` inputs: files or folders of multi-document YAML, as kubectl does.

use std::path::{Path, PathBuf};

use serde::Deserialize;
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
    let texts: Vec<std::io::Result<String>> = files.iter().map(std::fs::read_to_string).collect();
    let parsed = parse_in_pieces(&texts);
    // Errors as reading and parsing file after file would meet them: the first file's.
    let mut out = Vec::new();
    for ((file, text), documents) in files.into_iter().zip(texts).zip(parsed) {
        let text = text.map_err(|source| InputError::Io { path: file.clone(), source })?;
        // A piece that does not parse alone: the whole file, for the error as it reads in context
        // (line, document index).
        let documents = match documents {
            Some(documents) => documents,
            None => parse_whole(&file, &text)?,
        };
        for (doc, value) in documents.into_iter().enumerate() {
            push_flattened(&file, doc, value, &mut out);
        }
    }
    Ok(out)
}

/// Pieces smaller than this are not cut further (each piece costs a parser).
const PIECE_BYTES: usize = 64 * 1024;

/// The documents of each file read, parsed in pieces on all cores (YAML is the largest part of
/// reading thousands of objects); `None` for a file not read or with a piece that does not parse.
fn parse_in_pieces(texts: &[std::io::Result<String>]) -> Vec<Option<Vec<Value>>> {
    let pieces: Vec<(usize, &str)> = texts
        .iter()
        .enumerate()
        .filter_map(|(i, text)| Some((i, text.as_ref().ok()?)))
        .flat_map(|(i, text)| split_documents(text).into_iter().map(move |piece| (i, piece)))
        .collect();
    let parsed = crate::par::map(&pieces, |&(_, piece)| {
        yaml_serde::Deserializer::from_str(piece).map(Value::deserialize).collect::<Result<Vec<_>, _>>().ok()
    });
    let mut out: Vec<Option<Vec<Value>>> = texts.iter().map(|t| t.as_ref().ok().map(|_| Vec::new())).collect();
    for ((i, _), documents) in pieces.into_iter().zip(parsed) {
        match (documents, &mut out[i]) {
            (Some(documents), Some(all)) => all.extend(documents),
            _ => out[i] = None,
        }
    }
    out
}

/// `text` cut into pieces of whole documents that parse alone to the documents they hold in `text`.
/// Cuts go before lines that start with the document marker `---` and a blank: YAML allows no such
/// line inside a node (libyaml ends plain and block scalars there, and fails on quoted scalars and
/// flow collections, which then fail in their piece too). The first marker is no cut, so that the
/// first piece holds a document (the YAML parser yields a null one for a stream without any) and every
/// other piece starts with one.
fn split_documents(text: &str) -> Vec<&str> {
    let is_marker = |at: usize| {
        text[at..].starts_with("---") && matches!(text.as_bytes().get(at + 3), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
    };
    let markers = text.match_indices("\n---").map(|(i, _)| i + 1).filter(|&at| is_marker(at));
    let mut out = Vec::new();
    let mut start = 0;
    for at in markers.skip(usize::from(!is_marker(0))) {
        if at - start >= PIECE_BYTES {
            out.push(&text[start..at]);
            start = at;
        }
    }
    out.push(&text[start..]);
    out
}

/// Every document of `text`, parsed in one piece.
fn parse_whole(file: &Path, text: &str) -> Result<Vec<Value>, InputError> {
    yaml_serde::Deserializer::from_str(text)
        .enumerate()
        .map(|(doc, de)| {
            Value::deserialize(de).map_err(|e| InputError::Syntax { path: file.to_path_buf(), doc, message: e.to_string() })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Many documents, with lines that resemble markers but are not at the start of a line, block
    /// scalars, comments and empty documents: large enough to be cut.
    fn many_documents() -> String {
        let mut text = String::from("# leading comment\n");
        for i in 0..3000 {
            match i % 4 {
                0 => text.push_str(&format!("---\nkind: A\nmetadata: {{name: a{i}}}\nnote: |\n  ---\n  text\n")),
                1 => text.push_str(&format!("--- # comment\nkind: B\nlist:\n- --- not a marker\n- {i}\n")),
                2 => text.push_str("---\n---\n# an empty document above\n"),
                _ => text.push_str(&format!("---\r\nkind: C\r\nplain: multi\r\n  line {i}\r\n")),
            }
        }
        text
    }

    #[test]
    fn pieces_parse_as_the_whole() {
        let text = many_documents();
        let cut = split_documents(&text);
        assert!(cut.len() > 2, "{} pieces", cut.len());
        assert_eq!(cut.concat(), text);
        let texts = vec![Ok(text.clone())];
        let whole = parse_whole(Path::new("x.yaml"), &text).unwrap();
        assert_eq!(parse_in_pieces(&texts), vec![Some(whole)]);
    }

    #[test]
    fn errors_are_those_of_the_whole_file() {
        let dir = std::env::temp_dir().join(format!("toolgate-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.yaml");
        // An unclosed flow sequence far into the file: its piece fails, and so does the file.
        let text = many_documents().replace("- 2001\n", "- [2001\n");
        std::fs::write(&file, &text).unwrap();
        let want = parse_whole(&file, &text).unwrap_err().to_string();
        assert!(want.contains("document 2501"), "{want}");
        assert_eq!(load(&[file]).unwrap_err().to_string(), want);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
