//! Reading `-f PATH...` inputs: files or folders of multi-document YAML, as kubectl does.
//!
//! Every document must be an object the commands read: one without `apiVersion` or `kind` (a
//! misspelt key), of a kind Toolgate does not read (a misspelt kind or group), or larger than the
//! API server would take is an error naming its file and line, never a document silently left
//! out: a policy left out that way would leave its tools unguarded.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::api::GATEWAY_GROUP;

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
        self.value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// `metadata.namespace`, or `default_ns` when it is absent.
    pub fn namespace<'a>(&'a self, default_ns: &'a str) -> &'a str {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(default_ns)
    }
    /// `file#doc` for messages.
    pub fn origin(&self) -> String {
        format!("{}#{}", self.file.display(), self.doc)
    }
}

/// The kinds the commands read, by the first part of `apiVersion` (the group; `v1` for the core
/// group) and `kind`: the ones `model::Inventory` types (a test in `cli` keeps the two in step).
pub const KINDS_READ: &[(&str, &str)] = &[
    (crate::crds::GROUP, "XAccessPolicy"),
    (crate::crds::GROUP, "XBackend"),
    (GATEWAY_GROUP, "Gateway"),
    (GATEWAY_GROUP, "HTTPRoute"),
    (GATEWAY_GROUP, "ReferenceGrant"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("v1", "Namespace"),
    ("security.istio.io", "RequestAuthentication"),
];

/// The API server's limit on a request body, so on an object as `kubectl` sends it (JSON): a
/// larger object can never be created, and checking one would only cost time.
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;

/// What to do with a document of a kind the commands do not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OtherKinds {
    /// An error (the default): a misspelt kind or group is no policy.
    #[default]
    Refuse,
    /// Left out and listed (`--ignore-unknown-kinds`), for manifests that mix in other objects.
    Skip,
}

/// What [`load`] read.
#[derive(Debug, Default)]
pub struct Loaded {
    pub objects: Vec<RawObject>,
    /// Documents of other kinds, left out with [`OtherKinds::Skip`].
    pub skipped: Vec<Unreadable>,
}

/// A document the commands do not read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    /// 0-based index of the document within its file.
    pub doc: usize,
    /// Where in a `kind: List` document (item indexes, outermost first); empty for the document.
    pub items: Vec<usize>,
    /// 1-based line of the document's first node, when the parser tells.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Unreadable {
    /// `file:line: document N: message` (`, List item I` after N within a List).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": document {}", self.doc)?;
        if !self.items.is_empty() {
            let items: Vec<String> = self.items.iter().map(usize::to_string).collect();
            write!(f, ", List item {}", items.join("."))?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Could not read a file or folder: a usage/I/O error (exit 2).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A document is not valid YAML: invalid input (exit 1).
    #[error("{path}: document {doc}: YAML syntax error: {message}")]
    Syntax {
        path: PathBuf,
        doc: usize,
        message: String,
    },
    /// Documents that are not objects the commands read: invalid input (exit 1). Never empty.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Unreadable(Vec<Unreadable>),
}

/// Loads every document of every file. A folder contributes its `.yaml`, `.yml` and `.json` files,
/// recursively, in name order. Empty documents are skipped and `kind: List` wrappers flattened
/// away; every other document must be an object of [`KINDS_READ`] (others are skipped with
/// [`OtherKinds::Skip`]) of at most [`MAX_OBJECT_BYTES`].
pub fn load(paths: &[PathBuf], other_kinds: OtherKinds) -> Result<Loaded, InputError> {
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    let texts: Vec<std::io::Result<String>> = files.iter().map(std::fs::read_to_string).collect();
    let parsed = parse_in_pieces(&texts);
    // Errors as reading and parsing file after file would meet them: the first file's.
    let mut loaded = Loaded::default();
    let mut unreadable = Vec::new();
    for ((file, text), documents) in files.into_iter().zip(texts).zip(parsed) {
        let text = text.map_err(|source| InputError::Io {
            path: file.clone(),
            source,
        })?;
        // A piece that does not parse alone: the whole file, for the error as it reads in context
        // (line, document index).
        let documents = match documents {
            Some(documents) => documents,
            None => parse_whole(&file, &text)?,
        };
        let mut bad = Vec::new();
        let mut skipped = Vec::new();
        for (doc, value) in documents.into_iter().enumerate() {
            let mut at = Place {
                file: &file,
                doc,
                items: Vec::new(),
            };
            push_checked(
                &mut at,
                value,
                other_kinds,
                &mut loaded.objects,
                &mut bad,
                &mut skipped,
            );
        }
        // Positions cost another parse of the file: only for files with documents to point at.
        if !bad.is_empty() || !skipped.is_empty() {
            locate(&text, bad.iter_mut().chain(skipped.iter_mut()));
        }
        unreadable.extend(bad);
        loaded.skipped.extend(skipped);
    }
    if unreadable.is_empty() {
        Ok(loaded)
    } else {
        Err(InputError::Unreadable(unreadable))
    }
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
        .flat_map(|(i, text)| {
            split_documents(text)
                .into_iter()
                .map(move |piece| (i, piece))
        })
        .collect();
    let parsed = crate::par::map(&pieces, |&(_, piece)| {
        yaml_serde::Deserializer::from_str(piece)
            .map(Value::deserialize)
            .collect::<Result<Vec<_>, _>>()
            .ok()
    });
    let mut out: Vec<Option<Vec<Value>>> = texts
        .iter()
        .map(|t| t.as_ref().ok().map(|_| Vec::new()))
        .collect();
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
        text[at..].starts_with("---")
            && matches!(
                text.as_bytes().get(at + 3),
                None | Some(b' ' | b'\t' | b'\r' | b'\n')
            )
    };
    let markers = text
        .match_indices("\n---")
        .map(|(i, _)| i + 1)
        .filter(|&at| is_marker(at));
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
            Value::deserialize(de).map_err(|e| InputError::Syntax {
                path: file.to_path_buf(),
                doc,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Where a document (or an item of a `kind: List` document) is.
struct Place<'a> {
    file: &'a Path,
    doc: usize,
    items: Vec<usize>,
}

impl Place<'_> {
    fn unreadable(&self, message: String) -> Unreadable {
        Unreadable {
            path: self.file.to_path_buf(),
            doc: self.doc,
            items: self.items.clone(),
            line: None,
            message,
        }
    }
}

/// `value` into `out` when it is an object the commands read, its items when it is a `kind: List`;
/// nothing for an empty document; otherwise why not into `bad` (or `skipped`, for another kind
/// with [`OtherKinds::Skip`]).
fn push_checked(
    at: &mut Place<'_>,
    value: Value,
    other_kinds: OtherKinds,
    out: &mut Vec<RawObject>,
    bad: &mut Vec<Unreadable>,
    skipped: &mut Vec<Unreadable>,
) {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    let value = match value {
        Value::Object(mut list) if is_list && list.contains_key("items") => {
            let Some(Value::Array(items)) = list.remove("items") else {
                bad.push(at.unreadable("a List whose items are not a list".into()));
                return;
            };
            for (i, item) in items.into_iter().enumerate() {
                at.items.push(i);
                push_checked(at, item, other_kinds, out, bad, skipped);
                at.items.pop();
            }
            return;
        }
        value => value,
    };
    match check(&value) {
        Ok(()) => out.push(RawObject {
            file: at.file.to_path_buf(),
            doc: at.doc,
            value,
        }),
        Err(Refusal::Empty) => {}
        Err(Refusal::OtherKind(message)) if other_kinds == OtherKinds::Skip => {
            skipped.push(at.unreadable(message))
        }
        Err(Refusal::OtherKind(message)) => {
            let read: Vec<String> = KINDS_READ
                .iter()
                .map(|(group, kind)| format!("{group} {kind}"))
                .collect();
            let message = format!(
                "{message} (it reads {}; --ignore-unknown-kinds skips other kinds)",
                read.join(", ")
            );
            bad.push(at.unreadable(message))
        }
        Err(Refusal::Unreadable(message)) => bad.push(at.unreadable(message)),
    }
}

enum Refusal {
    /// An empty document (`---` alone, or only comments): nothing to read.
    Empty,
    /// A well-formed object of a kind the commands do not read.
    OtherKind(String),
    Unreadable(String),
}

/// Whether `value` is an object the commands read.
fn check(value: &Value) -> Result<(), Refusal> {
    let object = match value {
        Value::Null => return Err(Refusal::Empty),
        Value::Object(object) => object,
        other => {
            let what = match other {
                Value::Array(_) => "a list",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "a boolean",
            };
            return Err(Refusal::Unreadable(format!(
                "not an object but {what}: expected a Kubernetes object"
            )));
        }
    };
    let missing: Vec<String> = ["apiVersion", "kind"]
        .into_iter()
        .filter(|key| {
            object
                .get(*key)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        })
        .map(|key| {
            // A key spelt with other capitals is the likely mistake: name it.
            match object
                .keys()
                .find(|k| k.as_str() != key && k.eq_ignore_ascii_case(key))
            {
                Some(typo) => {
                    format!("no `{key}` (`{typo}` is another key: keys are case-sensitive)")
                }
                None if object.contains_key(key) => format!("`{key}` is not a non-empty string"),
                None => format!("no `{key}`"),
            }
        })
        .collect();
    if !missing.is_empty() {
        return Err(Refusal::Unreadable(format!(
            "not a Kubernetes object: {}",
            missing.join(", ")
        )));
    }
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let group = api_version.split('/').next().unwrap_or("");
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !KINDS_READ.contains(&(group, kind)) {
        return Err(Refusal::OtherKind(format!(
            "{api_version} {kind} {name:?}: not a kind Toolgate reads"
        )));
    }
    if json_longer_than(value, MAX_OBJECT_BYTES) {
        return Err(Refusal::Unreadable(format!(
            "{api_version} {kind} {name:?}: the object is more than {MAX_OBJECT_BYTES} bytes (3 MiB) as JSON, the most the API \
             server takes"
        )));
    }
    Ok(())
}

/// Whether `value` as compact JSON is longer than `limit` (the writing stops past it).
fn json_longer_than(value: &Value, limit: usize) -> bool {
    struct Count {
        bytes: usize,
        limit: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes += buf.len();
            if self.bytes > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Count { bytes: 0, limit }, value).is_err()
}

/// Sets the line of each of `unreadable` (documents of `text`, in document order). yaml_serde
/// tells positions only in errors: each document wanted is read with a visitor that refuses
/// every value, and the error carries the position of the document's first node.
fn locate<'a>(text: &str, unreadable: impl Iterator<Item = &'a mut Unreadable>) {
    struct Refuse;
    impl<'de> serde::de::Visitor<'de> for Refuse {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("nothing")
        }
    }
    struct Node;
    impl<'de> Deserialize<'de> for Node {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Refuse).map(|()| Node)
        }
    }
    let mut wanted: Vec<&mut Unreadable> = unreadable.collect();
    wanted.sort_by_key(|u| u.doc);
    let mut wanted = wanted.into_iter().peekable();
    for (doc, de) in yaml_serde::Deserializer::from_str(text).enumerate() {
        if wanted.peek().is_none() {
            break;
        }
        if wanted.peek().is_some_and(|u| u.doc == doc) {
            let line = Node::deserialize(de)
                .err()
                .and_then(|e| e.location())
                .map(|l| l.line());
            while let Some(u) = wanted.next_if(|u| u.doc == doc) {
                u.line = line;
            }
        }
    }
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let meta = std::fs::metadata(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, files)?;
        } else if matches!(
            entry.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
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
                0 => text.push_str(&format!(
                    "---\nkind: A\nmetadata: {{name: a{i}}}\nnote: |\n  ---\n  text\n"
                )),
                1 => text.push_str(&format!(
                    "--- # comment\nkind: B\nlist:\n- --- not a marker\n- {i}\n"
                )),
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
        assert_eq!(
            load(&[file], OtherKinds::Refuse).unwrap_err().to_string(),
            want
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// `text` written to a file of its own, loaded.
    fn load_text(name: &str, text: &str, other_kinds: OtherKinds) -> Result<Loaded, InputError> {
        let dir =
            std::env::temp_dir().join(format!("toolgate-inputs-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("in.yaml");
        std::fs::write(&file, text).unwrap();
        let loaded = load(&[file], other_kinds);
        std::fs::remove_dir_all(dir).unwrap();
        loaded
    }

    /// Each document refused, as `line: document: message`.
    fn refused(result: Result<Loaded, InputError>) -> Vec<String> {
        let Err(InputError::Unreadable(documents)) = result else {
            panic!("read: {result:?}")
        };
        documents
            .iter()
            .map(|d| d.to_string().split_once(":").unwrap().1.to_string())
            .collect()
    }

    const POLICY: &str = "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p}\n";

    /// A misspelt key, a document that is no Kubernetes object or one of a kind no command reads
    /// would leave a policy out unnoticed: each is an error with its file and line.
    #[test]
    fn documents_that_are_not_objects_read_are_errors_with_their_line() {
        let text = format!(
            "# a comment\n---\n---\n{POLICY}---\n{}---\nfoo: bar\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\n---\n- a\n---\n{}---\n# only a comment\n",
            POLICY.replace("apiVersion", "apiversion"),
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n- {apiVersion: v1, kind: Service}\n",
        );
        let errors = refused(load_text("refused", &text, OtherKinds::Refuse));
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert_eq!(
            errors[0],
            "8: document 2: not a Kubernetes object: no `apiVersion` (`apiversion` is another key: keys are case-sensitive)"
        );
        assert_eq!(
            errors[1],
            "12: document 3: not a Kubernetes object: no `apiVersion`, no `kind`"
        );
        assert!(errors[2].starts_with(
            "14: document 4: apps/v1 Deployment \"web\": not a kind Toolgate reads (it reads "
        ));
        assert!(
            errors[2].ends_with("; --ignore-unknown-kinds skips other kinds)"),
            "{}",
            errors[2]
        );
        assert_eq!(
            errors[3],
            "18: document 5: not an object but a list: expected a Kubernetes object"
        );
        assert!(
            errors[4].starts_with(
                "20: document 6, List item 1: v1 Service \"\": not a kind Toolgate reads"
            ),
            "{}",
            errors[4]
        );
        // Skipping other kinds leaves the documents that are no objects errors.
        let errors = refused(load_text("skipped", &text, OtherKinds::Skip));
        assert_eq!(
            errors
                .iter()
                .map(|e| e.split_once(':').unwrap().0)
                .collect::<Vec<_>>(),
            ["8", "12", "18"]
        );
        let loaded = load_text(
            "mixed",
            &format!("{POLICY}---\napiVersion: apps/v1\nkind: Deployment\n"),
            OtherKinds::Skip,
        )
        .unwrap();
        assert_eq!(loaded.objects.len(), 1);
        assert_eq!(loaded.skipped.len(), 1);
        assert!(loaded.skipped[0]
            .to_string()
            .ends_with(":5: document 1: apps/v1 Deployment \"\": not a kind Toolgate reads"));
    }

    /// An object the API server could not take is refused before any check spends time on it.
    #[test]
    fn objects_over_the_api_servers_limit_are_errors() {
        let config_map = |bytes: usize| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata: {{x: {}}}\n",
                "a".repeat(bytes)
            )
        };
        let text = format!(
            "{}---\n{}",
            config_map(MAX_OBJECT_BYTES - 200),
            config_map(MAX_OBJECT_BYTES)
        );
        let errors = refused(load_text("large", &text, OtherKinds::Refuse));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            errors[0],
            "6: document 1: v1 ConfigMap \"c\": the object is more than 3145728 bytes (3 MiB) as JSON, the most the API server takes"
        );
        let value = serde_json::json!({"x": "a".repeat(10)});
        assert!(!json_longer_than(&value, 18) && json_longer_than(&value, 17));
    }
}
