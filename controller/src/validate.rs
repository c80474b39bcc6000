//! `toolgate validate`: the API server's checks, offline.
//!
//! For every `XAccessPolicy` and `XBackend` object this runs what `kubectl create` would make the API
//! server run, against the very schema of the generated CRDs ([`crate::crds`]), and reports the same
//! messages at the same field paths:
//!
//! 1. strict decoding: unknown fields (`unknown field "spec.foo"`); when there are any, nothing else is
//!    checked (the server stops there too);
//! 2. metadata: `metadata.name` (DNS subdomain) and the namespace (DNS label);
//! 3. pruning of `null`s and defaulting (`mcpBaseProtocolMethodsOption`, XBackend `path`, ...);
//! 4. the OpenAPI schema (types, required, enums, lengths, patterns, bounds, item counts) and the
//!    `x-kubernetes-list-type` set/map uniqueness;
//! 5. the `x-kubernetes-validations` CEL rules, unless step 2 or 4 found a "blocking" error (a wrong
//!    type, a missing required field, an unsupported enum value, a too long string or too many items), in
//!    which case the server reports that some rules were not checked, and so do we.
//!
//! [`validate_objects`] returns [`Problem`]s; later stages (compile-time checks, topology warnings)
//! append theirs to the same list. This is per-object admission, below the model (which admits each
//! object through [`admit`]); the command, which also needs the topology, is `crate::validate_cmd`.

pub mod rules;

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::crds;
use crate::inputs::RawObject;

/// How bad a problem is: errors make `validate` exit 1, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One finding about one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `file#doc` of the object.
    pub origin: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Field path in the API server's notation (`spec.rules[0].source.spiffe`); empty for the object.
    pub path: String,
    pub message: String,
    pub severity: Severity,
}

impl fmt::Display for Problem {
    /// `<origin> <Kind> <ns>/<name>: <field path>: <message>` (warnings start with `warning: `).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.severity == Severity::Warning {
            write!(f, "warning: ")?;
        }
        write!(f, "{} {} {}/{}: ", self.origin, self.kind, self.namespace, self.name)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)
    }
}

/// A field error as the API server reports it: the path and the message (`Required value`,
/// `Invalid value: "x": ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// The note the API server adds when blocking errors kept it from evaluating the CEL rules.
pub const RULES_NOT_CHECKED: &str =
    "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
/// The field path the API server gives that note.
pub const RULES_NOT_CHECKED_PATH: &str = "<nil>";

/// Runs the API server's checks on every object of ours (XAccessPolicy, XBackend); other objects
/// are left to later stages.
pub fn validate_objects(objects: &[RawObject], default_namespace: &str) -> Vec<Problem> {
    crate::par::map(objects, |o| validate_object(o, default_namespace)).into_iter().flatten().collect()
}

/// Runs the API server's checks on one object. Empty for valid objects and for objects that are not ours.
fn validate_object(obj: &RawObject, default_namespace: &str) -> Vec<Problem> {
    let Admission::Refused(errors) = admit(&obj.value, default_namespace) else { return Vec::new() };
    errors
        .into_iter()
        .map(|e| Problem {
            origin: obj.origin(),
            kind: obj.kind().to_string(),
            namespace: obj.namespace(default_namespace).to_string(),
            name: obj.name().to_string(),
            path: e.path,
            message: e.message,
            severity: Severity::Error,
        })
        .collect()
}

/// Whether `value` is an object of one of our CRDs' groups.
fn is_ours(value: &Value) -> bool {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    api_version.split_once('/').is_some_and(|(g, _)| g == crds::GROUP)
}

/// What the API server makes of an object on create.
#[derive(Debug)]
pub enum Admission {
    /// Not an object of our CRDs' group: none of these checks apply.
    NotOurs,
    /// Valid; the object as the server stores it: defaults applied, non-nullable `null`s removed,
    /// `status` dropped (the server resets it on create).
    Stored(Value),
    /// Invalid: the server's field errors (never empty).
    Refused(Vec<FieldError>),
}

/// The API server's checks on `value`, and the object it would store when they pass.
pub fn admit(value: &Value, default_namespace: &str) -> Admission {
    if !is_ours(value) {
        return Admission::NotOurs;
    }
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let version = api_version.split_once('/').map(|(_, v)| v).unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(schema) = schema(kind, version) else {
        return Admission::Refused(vec![FieldError {
            path: String::new(),
            message: format!("no matches for kind {kind:?} in version {api_version:?}"),
        }]);
    };
    let mut errs = Vec::new();

    // 1. strict decoding
    let mut unknown = Vec::new();
    unknown_fields(value, schema, &FieldPath::Root, &mut unknown);
    if !unknown.is_empty() {
        unknown.sort();
        return Admission::Refused(
            unknown.into_iter().map(|p| FieldError { message: format!("unknown field {p:?}"), path: p }).collect(),
        );
    }

    // 2. metadata
    validate_metadata(value, default_namespace, &mut errs);

    // 3. nulls and defaults (status is reset by the server on create: not checked)
    let mut obj = value.clone();
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    prune_nulls_and_default(&mut obj, schema);

    // 4. OpenAPI schema and list types
    let mut schema_errs = Vec::new();
    validate_schema(&obj, schema, &FieldPath::Root, &mut schema_errs);
    validate_list_types(&obj, schema, &FieldPath::Root, &mut schema_errs);
    let blocking = schema_errs.iter().chain(errs.iter()).any(|e| e.blocking);
    errs.extend(schema_errs);

    // 5. CEL rules
    let mut out: Vec<FieldError> = errs.into_iter().map(|e| e.error).collect();
    if blocking {
        out.push(FieldError { path: RULES_NOT_CHECKED_PATH.into(), message: RULES_NOT_CHECKED.into() });
    } else {
        validate_rules(&obj, None, schema, &FieldPath::Root, &mut out);
    }
    if out.is_empty() {
        Admission::Stored(obj)
    } else {
        Admission::Refused(out)
    }
}

thread_local! {
    // The CRDs hold a few dozen patterns and rules; compiling them once per object made validating
    // (and so compiling) thousands of policies spend most of its time in the regex and CEL parsers.
    // (The rules' CEL programs are cached the same way, in [`rules`].)
    static REGEXES: std::cell::RefCell<std::collections::HashMap<String, Option<std::rc::Rc<regex::Regex>>>> =
        Default::default();
}

/// `pattern` compiled once per thread (None when it does not compile).
fn cached_regex(pattern: &str) -> Option<std::rc::Rc<regex::Regex>> {
    REGEXES.with(|cache| {
        cache
            .borrow_mut()
            .entry(pattern.to_string())
            .or_insert_with(|| regex::Regex::new(pattern).ok().map(std::rc::Rc::new))
            .clone()
    })
}

fn schema(kind: &str, version: &str) -> Option<&'static Value> {
    static SCHEMAS: OnceLock<Vec<(String, String, Value)>> = OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        let mut out = Vec::new();
        for crd in crds::all() {
            let k = crd.value.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or("").to_string();
            for v in crd.value.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
                let name = v.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                if let Some(s) = v.pointer("/schema/openAPIV3Schema") {
                    out.push((k.clone(), name, s.clone()));
                }
            }
        }
        out
    });
    all.iter().find(|(k, v, _)| k == kind && v == version).map(|(_, _, s)| s)
}

// ---------------------------------------------------------------------------------------------
// helpers: paths and value formatting in the API server's style

/// A field path in the API server's notation (`spec.rules[0].name`), written out only for the
/// messages that name it: most of the fields walked have none.
#[derive(Clone, Copy)]
enum FieldPath<'a> {
    Root,
    Field(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl<'a> FieldPath<'a> {
    fn field(&'a self, key: &'a str) -> Self {
        FieldPath::Field(self, key)
    }

    fn index(&'a self, i: usize) -> Self {
        FieldPath::Index(self, i)
    }

    fn is_metadata(&self) -> bool {
        matches!(self, FieldPath::Field(FieldPath::Root, "metadata"))
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldPath::Root => Ok(()),
            FieldPath::Field(FieldPath::Root, key) => f.write_str(key),
            FieldPath::Field(parent, key) => write!(f, "{parent}.{key}"),
            FieldPath::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Go's `%q` for a string.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as `field.Invalid` prints it.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A schema bound as Go's `%v` of a float64 prints it.
fn show_bound(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e6 => format!("{}", f as i64),
        Some(f) => format!("{f:e}").replace('e', "e+"),
        None => v.to_string(),
    }
}

/// The OpenAPI type name of a JSON value.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct Err {
    error: FieldError,
    blocking: bool,
}

fn push(errs: &mut Vec<Err>, path: impl fmt::Display, message: String, blocking: bool) {
    errs.push(Err { error: FieldError { path: path.to_string(), message }, blocking });
}

fn props(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

// ---------------------------------------------------------------------------------------------
// 1. unknown fields

const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn unknown_fields(v: &Value, schema: &Value, path: &FieldPath, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if path.is_metadata() {
                for k in m.keys() {
                    if !OBJECT_META_FIELDS.contains(&k.as_str()) {
                        out.push(path.field(k).to_string());
                    }
                }
                return;
            }
            if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                return;
            }
            let Some(p) = props(schema) else { return };
            for (k, val) in m {
                match p.get(k) {
                    Some(s) => unknown_fields(val, s, &path.field(k), out),
                    None => out.push(path.field(k).to_string()),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item, s, &path.index(i), out);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// 2. metadata

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn validate_metadata(obj: &Value, default_namespace: &str, errs: &mut Vec<Err>) {
    static SUBDOMAIN: OnceLock<regex::Regex> = OnceLock::new();
    static LABEL: OnceLock<regex::Regex> = OnceLock::new();
    let subdomain = SUBDOMAIN.get_or_init(|| {
        regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").unwrap()
    });
    let label = LABEL.get_or_init(|| regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap());
    let meta = obj.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    let generate_name = meta.and_then(|m| m.get("generateName")).and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            push(errs, "metadata.name", "Required value: name or generateName is required".into(), true);
        }
    } else {
        if name.len() > 253 {
            push(
                errs,
                "metadata.name",
                format!("Invalid value: {}: must be no more than 253 characters", go_quote(name)),
                false,
            );
        }
        if !subdomain.is_match(name) {
            push(errs, "metadata.name", format!("Invalid value: {}: {DNS1123_SUBDOMAIN_MSG}", go_quote(name)), false);
        }
    }
    let ns = meta.and_then(|m| m.get("namespace")).and_then(Value::as_str).unwrap_or(default_namespace);
    if ns.len() > 63 {
        push(
            errs,
            "metadata.namespace",
            format!("Invalid value: {}: must be no more than 63 characters", go_quote(ns)),
            false,
        );
    }
    if !label.is_match(ns) {
        push(errs, "metadata.namespace", format!("Invalid value: {}: {DNS1123_LABEL_MSG}", go_quote(ns)), false);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. nulls and defaults

fn prune_nulls_and_default(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            let Some(p) = props(schema) else { return };
            let nulls: Vec<String> = m.iter().filter(|(_, x)| x.is_null()).map(|(k, _)| k.clone()).collect();
            for k in nulls {
                let nullable = p.get(&k).and_then(|s| s.get("nullable")) == Some(&Value::Bool(true));
                if !nullable {
                    m.remove(&k);
                }
            }
            for (k, s) in p {
                if !m.contains_key(k) {
                    if let Some(d) = s.get("default") {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, val) in m.iter_mut() {
                if let Some(s) = p.get(k) {
                    prune_nulls_and_default(val, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items.iter_mut() {
                    prune_nulls_and_default(item, s);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// 4. OpenAPI schema

fn validate_schema(v: &Value, schema: &Value, path: &FieldPath, errs: &mut Vec<Err>) {
    if path.is_metadata() {
        return; // ObjectMeta is validated by validate_metadata
    }
    let ty = schema.get("type").and_then(Value::as_str);
    if let Some(ty) = ty {
        let actual = type_of(v);
        let ok = actual == ty || (ty == "number" && actual == "integer");
        if !ok {
            push(
                errs,
                path,
                format!(
                    "Invalid value: {}: {path} in body must be of type {ty}: {}",
                    go_quote(actual),
                    go_quote(actual)
                ),
                true,
            );
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(v) {
            let list: Vec<String> = allowed.iter().map(show).collect();
            push(errs, path, format!("Unsupported value: {}: supported values: {}", show(v), list.join(", ")), true);
        }
    }
    match v {
        Value::String(s) => {
            // kube-openapi stops at the first failing string check: maxLength, minLength, pattern.
            let n = s.chars().count();
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                if n as u64 > max {
                    push(errs, path, format!("Too long: may not be more than {max} bytes"), true);
                    return;
                }
            }
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
                if (n as u64) < min {
                    push(
                        errs,
                        path,
                        format!("Invalid value: {}: {path} in body should be at least {min} chars long", go_quote(s)),
                        false,
                    );
                    return;
                }
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
                match cached_regex(p) {
                    Some(re) if re.is_match(s) => {}
                    _ => push(
                        errs,
                        path,
                        format!("Invalid value: {}: {path} in body should match '{p}'", go_quote(s)),
                        false,
                    ),
                }
            }
        }
        Value::Number(num) => {
            let x = num.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum") {
                if min.as_f64().is_some_and(|m| x < m) {
                    push(
                        errs,
                        path,
                        format!(
                            "Invalid value: {}: {path} in body should be greater than or equal to {}",
                            show(v),
                            show_bound(min)
                        ),
                        false,
                    );
                }
            }
            if let Some(max) = schema.get("maximum") {
                if max.as_f64().is_some_and(|m| x > m) {
                    push(
                        errs,
                        path,
                        format!(
                            "Invalid value: {}: {path} in body should be less than or equal to {}",
                            show(v),
                            show_bound(max)
                        ),
                        false,
                    );
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if items.len() as u64 > max {
                    push(errs, path, format!("Too many: {}: must have at most {max} items", items.len()), true);
                }
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    push(
                        errs,
                        path,
                        format!("Invalid value: {}: {path} in body should have at least {min} items", items.len()),
                        false,
                    );
                }
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_schema(item, s, &path.index(i), errs);
                }
            }
        }
        Value::Object(m) => {
            for req in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(r) = req.as_str() {
                    if !m.contains_key(r) {
                        push(errs, path.field(r), "Required value".into(), true);
                    }
                }
            }
            if let Some(p) = props(schema) {
                for (k, val) in m {
                    if let Some(s) = p.get(k) {
                        validate_schema(val, s, &path.field(k), errs);
                    }
                }
            }
        }
        _ => {}
    }
}

/// `x-kubernetes-list-type: set` and `map` uniqueness.
fn validate_list_types(v: &Value, schema: &Value, path: &FieldPath, errs: &mut Vec<Err>) {
    match v {
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            push(errs, path.index(i), format!("Duplicate value: {}", show(item)), false);
                        }
                    }
                }
                Some("map") => {
                    let keys: Vec<&str> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let key_of = |item: &Value| -> Map<String, Value> {
                        keys.iter().filter_map(|k| item.get(*k).map(|x| (k.to_string(), x.clone()))).collect()
                    };
                    for (i, item) in items.iter().enumerate() {
                        let key = key_of(item);
                        if items[..i].iter().any(|prev| key_of(prev) == key) {
                            push(errs, path.index(i), format!("Duplicate value: {}", Value::Object(key)), false);
                        }
                    }
                }
                _ => {}
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_list_types(item, s, &path.index(i), errs);
                }
            }
        }
        Value::Object(m) => {
            if let Some(p) = props(schema) {
                for (k, val) in m {
                    if let Some(s) = p.get(k) {
                        validate_list_types(val, s, &path.field(k), errs);
                    }
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// 5. CEL rules

/// `this` is `v` as a CEL value when an ancestor with rules converted it already: each object is
/// converted once, at the outermost node with rules, and its descendants share the parts.
fn validate_rules(v: &Value, this: Option<&rules::Value>, schema: &Value, path: &FieldPath, out: &mut Vec<FieldError>) {
    if path.is_metadata() {
        return;
    }
    let rules = schema.get("x-kubernetes-validations").and_then(Value::as_array);
    let converted;
    let this = match (this, rules) {
        (None, Some(_)) => {
            converted = rules::to_value(v, schema);
            Some(&converted)
        }
        (this, _) => this,
    };
    if let (Some(rules), Some(this)) = (rules, this) {
        eval_rules(rules, this, path, out);
    }
    match v {
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let item_val = this.and_then(|t| rules::item(t, i));
                    validate_rules(item, item_val, s, &path.index(i), out);
                }
            }
        }
        Value::Object(m) => {
            if let Some(p) = props(schema) {
                for (k, val) in m {
                    if let Some(s) = p.get(k) {
                        let field_val = this.and_then(|t| rules::field(t, k));
                        validate_rules(val, field_val, s, &path.field(k), out);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Evaluates a node's `x-kubernetes-validations` with `self` = `this`.
fn eval_rules(node_rules: &[Value], this: &rules::Value, path: &FieldPath, out: &mut Vec<FieldError>) {
    fn source_of(rule: &Value) -> &str {
        rule.get("rule").and_then(Value::as_str).unwrap_or("")
    }
    let results = rules::eval_all(node_rules.iter().map(source_of), this);
    for (rule, result) in node_rules.iter().zip(results) {
        let source = source_of(rule);
        let message = rule
            .get("message")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(source.trim());
        match result {
            Ok(rules::Value::Bool(true)) => {}
            Ok(rules::Value::Bool(false)) => {
                out.push(FieldError { path: path.to_string(), message: format!("Invalid value: {message}") })
            }
            Ok(other) => out.push(FieldError {
                path: path.to_string(),
                message: format!(
                    "Invalid value: rule did not evaluate to a bool ({other:?}) evaluating rule: {message}"
                ),
            }),
            Err(e) => out.push(FieldError {
                path: path.to_string(),
                message: format!("Invalid value: {e} evaluating rule: {message}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule of every generated CRD compiles with `cel` (the glue in [`rules`]), so a rule the offline
    /// check cannot evaluate cannot reach `crds/` unnoticed.
    #[test]
    fn every_crd_rule_parses() {
        fn walk(v: &Value, bad: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::Array(rules)) = m.get("x-kubernetes-validations") {
                        for r in rules {
                            let src = r.get("rule").and_then(Value::as_str).unwrap_or("");
                            if let Err(e) = rules::compile(src) {
                                bad.push(format!("{src}: {e}"));
                            }
                        }
                    }
                    m.values().for_each(|x| walk(x, bad));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, bad)),
                _ => {}
            }
        }
        let mut bad = Vec::new();
        for crd in crds::all() {
            walk(&crd.value, &mut bad);
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }

    fn errors(yaml: &str) -> Vec<String> {
        let v: Value = yaml_serde::from_str(yaml).unwrap();
        let Admission::Refused(errors) = admit(&v, "default") else { panic!("valid: {yaml}") };
        errors.into_iter().map(|e| format!("{}: {}", e.path, e.message)).collect()
    }

    fn stored(v: &Value) -> Value {
        let Admission::Stored(stored) = admit(v, "default") else { panic!("not valid: {v}") };
        stored
    }

    #[test]
    fn defaults_apply_before_rules() {
        let e = errors(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]\n  action: ExternalAuth\n  externalAuth: {protocol: GRPC, grpc: {}, backendRef: {name: a}}\n",
        );
        assert_eq!(e, vec!["spec.externalAuth.backendRef: Invalid value: Must have port for Service reference"]);
        let v: Value = yaml_serde::from_str(
            "apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: b}\nspec: {mcp: {port: 80, hostname: a}}\n",
        )
        .unwrap();
        assert_eq!(stored(&v).pointer("/spec/mcp/path"), Some(&Value::String("/mcp".into())));
    }

    /// The `expect-field` lines of `tests/k8s/cases/` (what the API server returns after defaulting, checked
    /// against the server by `crd_apiserver.rs`) hold for the object [`admit`] stores too.
    #[test]
    fn defaults_match_the_cases() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/k8s/cases");
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let expected: Vec<(&str, &str)> = text
                .lines()
                .take_while(|l| l.starts_with('#'))
                .filter_map(|l| l.trim_start_matches('#').trim().strip_prefix("expect-field:")?.split_once(" = "))
                .collect();
            if expected.is_empty() {
                continue;
            }
            let d = stored(&yaml_serde::from_str(&text).unwrap());
            for (pointer, want) in expected {
                let want: Value = serde_json::from_str(want.trim()).unwrap();
                assert_eq!(d.pointer(pointer.trim()), Some(&want), "{pointer}");
                checked += 1;
            }
        }
        assert!(checked >= 4);
    }

    #[test]
    fn blocking_errors_skip_rules() {
        let e = errors(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]\n  action: Deny\n",
        );
        assert_eq!(
            e,
            vec![
                "spec.action: Unsupported value: \"Deny\": supported values: \"Allow\", \"ExternalAuth\"".to_string(),
                format!("{RULES_NOT_CHECKED_PATH}: {RULES_NOT_CHECKED}"),
            ]
        );
    }

    #[test]
    fn unknown_fields_are_reported_alone() {
        let e = errors(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, foo: 1}\nspec:\n  targetRefs: []\n  bar: 1\n",
        );
        assert_eq!(e, vec!["metadata.foo: unknown field \"metadata.foo\"", "spec.bar: unknown field \"spec.bar\""]);
    }
}
