//! The structural-schema walks of [`admit`](super::admit): unknown fields, defaults, OpenAPI, list types, CEL.

use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value};

use super::{cached_regex, rules, FieldError};

// ---------------------------------------------------------------------------------------------
// helpers: paths and value formatting in the API server's style

/// A field path in the API server's notation (`spec.rules[0].name`), written out only for the
/// messages that name it: most of the fields walked have none.
#[derive(Clone, Copy)]
pub(super) enum FieldPath<'a> {
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
pub(super) fn go_quote(s: &str) -> String {
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
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
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

pub(super) struct Err {
    pub(super) error: FieldError,
    pub(super) blocking: bool,
}

pub(super) fn push(errs: &mut Vec<Err>, path: impl fmt::Display, message: String, blocking: bool) {
    errs.push(Err {
        error: FieldError {
            path: path.to_string(),
            message,
        },
        blocking,
    });
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

pub(super) fn unknown_fields(
    v: &Value,
    schema: &Value,
    path: &FieldPath<'_>,
    out: &mut Vec<String>,
) {
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
// 3. nulls and defaults

pub(super) fn prune_nulls_and_default(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            let Some(p) = props(schema) else { return };
            let nulls: Vec<String> = m
                .iter()
                .filter(|(_, x)| x.is_null())
                .map(|(k, _)| k.clone())
                .collect();
            for k in nulls {
                let nullable =
                    p.get(&k).and_then(|s| s.get("nullable")) == Some(&Value::Bool(true));
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

pub(super) fn validate_schema(
    v: &Value,
    schema: &Value,
    path: &FieldPath<'_>,
    errs: &mut Vec<Err>,
) {
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
            push(
                errs,
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    show(v),
                    list.join(", ")
                ),
                true,
            );
        }
    }
    match v {
        Value::String(s) => validate_string(s, schema, path, errs),
        Value::Number(num) => validate_number(v, num, schema, path, errs),
        Value::Array(items) => validate_array(items, schema, path, errs),
        Value::Object(m) => validate_object(m, schema, path, errs),
        _ => {}
    }
}

fn validate_string(s: &str, schema: &Value, path: &FieldPath<'_>, errs: &mut Vec<Err>) {
    // kube-openapi stops at the first failing string check: maxLength, minLength, pattern.
    let n = s.chars().count();
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if n as u64 > max {
            push(
                errs,
                path,
                format!("Too long: may not be more than {max} bytes"),
                true,
            );
            return;
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if (n as u64) < min {
            push(
                errs,
                path,
                format!(
                    "Invalid value: {}: {path} in body should be at least {min} chars long",
                    go_quote(s)
                ),
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
                format!(
                    "Invalid value: {}: {path} in body should match '{p}'",
                    go_quote(s)
                ),
                false,
            ),
        }
    }
}

fn validate_number(
    v: &Value,
    num: &serde_json::Number,
    schema: &Value,
    path: &FieldPath<'_>,
    errs: &mut Vec<Err>,
) {
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

fn validate_array(items: &[Value], schema: &Value, path: &FieldPath<'_>, errs: &mut Vec<Err>) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if items.len() as u64 > max {
            push(
                errs,
                path,
                format!("Too many: {}: must have at most {max} items", items.len()),
                true,
            );
        }
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if (items.len() as u64) < min {
            push(
                errs,
                path,
                format!(
                    "Invalid value: {}: {path} in body should have at least {min} items",
                    items.len()
                ),
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

fn validate_object(
    m: &Map<String, Value>,
    schema: &Value,
    path: &FieldPath<'_>,
    errs: &mut Vec<Err>,
) {
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
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

/// `x-kubernetes-list-type: set` and `map` uniqueness.
pub(super) fn validate_list_types(
    v: &Value,
    schema: &Value,
    path: &FieldPath<'_>,
    errs: &mut Vec<Err>,
) {
    match v {
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for i in repeated(items.iter().map(Hashed)) {
                        push(
                            errs,
                            path.index(i),
                            format!("Duplicate value: {}", show(&items[i])),
                            false,
                        );
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
                    let key_of = |item: &Value| -> Value {
                        Value::Object(
                            keys.iter()
                                .filter_map(|k| item.get(*k).map(|x| (k.to_string(), x.clone())))
                                .collect(),
                        )
                    };
                    let item_keys: Vec<Value> = items.iter().map(key_of).collect();
                    for i in repeated(item_keys.iter().map(Hashed)) {
                        push(
                            errs,
                            path.index(i),
                            format!("Duplicate value: {}", item_keys[i]),
                            false,
                        );
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

/// The positions of the keys equal to an earlier one, in order. Each key is looked up once in a
/// hash set: comparing each item with every one before it took minutes on a long list (which
/// `maxItems` refuses, but only beside this check).
pub(super) fn repeated<K: Hash + Eq>(keys: impl IntoIterator<Item = K>) -> Vec<usize> {
    let mut seen = HashSet::new();
    keys.into_iter()
        .enumerate()
        .filter_map(|(i, key)| (!seen.insert(key)).then_some(i))
        .collect()
}

/// A JSON value hashed consistently with `Value`'s equality.
struct Hashed<'a>(&'a Value);

impl PartialEq for Hashed<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Hashed<'_> {}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_value(self.0, state);
    }
}

fn hash_value<H: Hasher>(v: &Value, state: &mut H) {
    std::mem::discriminant(v).hash(state);
    match v {
        Value::Null => {}
        Value::Bool(b) => b.hash(state),
        // 0.0 and -0.0 are equal: they hash alike (1 and 1.0, which are not, may too).
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            (if f == 0.0 { 0.0f64 } else { f }).to_bits().hash(state)
        }
        Value::String(s) => s.hash(state),
        Value::Array(items) => {
            items.len().hash(state);
            items.iter().for_each(|x| hash_value(x, state));
        }
        // Entries are combined in any order: maps with the same entries are equal whatever order
        // the map keeps them in.
        Value::Object(m) => {
            m.len().hash(state);
            let mut sum = 0u64;
            for (k, x) in m {
                let mut entry = std::collections::hash_map::DefaultHasher::new();
                k.hash(&mut entry);
                hash_value(x, &mut entry);
                sum = sum.wrapping_add(entry.finish());
            }
            sum.hash(state);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 5. CEL rules

/// `this` is `v` as a CEL value when an ancestor with rules converted it already: each object is
/// converted once, at the outermost node with rules, and its descendants share the parts.
pub(super) fn validate_rules(
    v: &Value,
    this: Option<&rules::Value>,
    schema: &Value,
    path: &FieldPath<'_>,
    out: &mut Vec<FieldError>,
) {
    if path.is_metadata() {
        return;
    }
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array);
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
fn eval_rules(
    node_rules: &[Value],
    this: &rules::Value,
    path: &FieldPath<'_>,
    out: &mut Vec<FieldError>,
) {
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
                message: format!("Invalid value: rule did not evaluate to a bool ({other:?}) evaluating rule: {message}"),
            }),
            Err(e) => {
                out.push(FieldError { path: path.to_string(), message: format!("Invalid value: {e} evaluating rule: {message}") })
            }
        }
    }
}
