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
//! object through [`admit`]); the command, which also needs the topology, is `crate::commands::validate`.

mod metadata;
pub mod rules;
mod schema;

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use crate::crds;
use crate::inputs::RawObject;
use metadata::validate_metadata;
use schema::{
    prune_nulls_and_default, unknown_fields, validate_list_types, validate_rules, validate_schema,
    FieldPath,
};

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
        write!(
            f,
            "{} {} {}/{}: ",
            self.origin, self.kind, self.namespace, self.name
        )?;
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
    crate::par::map(objects, |o| validate_object(o, default_namespace))
        .into_iter()
        .flatten()
        .collect()
}

/// Runs the API server's checks on one object. Empty for valid objects and for objects that are not ours.
fn validate_object(obj: &RawObject, default_namespace: &str) -> Vec<Problem> {
    let Admission::Refused(errors) = admit(&obj.value, default_namespace) else {
        return Vec::new();
    };
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
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    api_version
        .split_once('/')
        .is_some_and(|(g, _)| g == crds::GROUP)
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
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
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
            unknown
                .into_iter()
                .map(|p| FieldError {
                    message: format!("unknown field {p:?}"),
                    path: p,
                })
                .collect(),
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
        out.push(FieldError {
            path: RULES_NOT_CHECKED_PATH.into(),
            message: RULES_NOT_CHECKED.into(),
        });
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
            let k = crd
                .value
                .pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            for v in crd
                .value
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = v
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if let Some(s) = v.pointer("/schema/openAPIV3Schema") {
                    out.push((k.clone(), name, s.clone()));
                }
            }
        }
        out
    });
    all.iter()
        .find(|(k, v, _)| k == kind && v == version)
        .map(|(_, _, s)| s)
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
        let Admission::Refused(errors) = admit(&v, "default") else {
            panic!("valid: {yaml}")
        };
        errors
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    }

    fn stored(v: &Value) -> Value {
        let Admission::Stored(stored) = admit(v, "default") else {
            panic!("not valid: {v}")
        };
        stored
    }

    #[test]
    fn defaults_apply_before_rules() {
        let e = errors(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]\n  action: ExternalAuth\n  externalAuth: {protocol: GRPC, grpc: {}, backendRef: {name: a}}\n",
        );
        assert_eq!(
            e,
            vec![
                "spec.externalAuth.backendRef: Invalid value: Must have port for Service reference"
            ]
        );
        let v: Value = yaml_serde::from_str(
            "apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: b}\nspec: {mcp: {port: 80, hostname: a}}\n",
        )
        .unwrap();
        assert_eq!(
            stored(&v).pointer("/spec/mcp/path"),
            Some(&Value::String("/mcp".into()))
        );
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
                .filter_map(|l| {
                    l.trim_start_matches('#')
                        .trim()
                        .strip_prefix("expect-field:")?
                        .split_once(" = ")
                })
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

    /// Set and map lists cost one hash lookup per item: comparing each item with every one before it
    /// took minutes on a long list.
    #[test]
    fn uniqueness_compares_each_item_about_once() {
        use std::cell::Cell;
        thread_local!(static COMPARISONS: Cell<usize> = const { Cell::new(0) });
        struct Counted(usize);
        impl std::hash::Hash for Counted {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }
        impl PartialEq for Counted {
            fn eq(&self, other: &Self) -> bool {
                COMPARISONS.with(|c| c.set(c.get() + 1));
                self.0 == other.0
            }
        }
        impl Eq for Counted {}
        let n = 50_000;
        // Every hundredth item repeats the one before it.
        let repeated =
            schema::repeated((0..n).map(|i| Counted(if i % 100 == 99 { i - 1 } else { i })));
        assert_eq!(
            repeated,
            (0..n).filter(|i| i % 100 == 99).collect::<Vec<_>>()
        );
        let comparisons = COMPARISONS.with(Cell::get);
        assert!(comparisons < n, "{comparisons} comparisons for {n} items");
    }

    #[test]
    fn duplicates_are_reported_at_their_index() {
        let headers: Vec<String> = (0..100).map(|i| format!("h{}", i % 98)).collect();
        let e = errors(&format!(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: p}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: g}}]\n  action: ExternalAuth\n  externalAuth: {{protocol: GRPC, grpc: {{allowedHeaders: [{}]}}, backendRef: {{name: a, port: 9}}}}\n",
            headers.join(", ")
        ));
        let path = "spec.externalAuth.grpc.allowedHeaders";
        assert_eq!(
            e,
            vec![
                format!("{path}: Too many: 100: must have at most 64 items"),
                format!("{path}[98]: Duplicate value: \"h0\""),
                format!("{path}[99]: Duplicate value: \"h1\""),
                format!("{RULES_NOT_CHECKED_PATH}: {RULES_NOT_CHECKED}"),
            ]
        );
        // A map list: items with the same keys are duplicates, whatever else they hold.
        let schema = serde_json::json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type", "n"]});
        let list = serde_json::json!([{"type": "A", "n": 1, "x": 1}, {"type": "A", "n": 2}, {"type": "B"}, {"n": 1, "type": "A", "x": 2}, {"type": "B"}]);
        let mut errs = Vec::new();
        validate_list_types(&list, &schema, &FieldPath::Root, &mut errs);
        let errs: Vec<String> = errs
            .into_iter()
            .map(|e| format!("{}: {}", e.error.path, e.error.message))
            .collect();
        assert_eq!(
            errs,
            [
                r#"[3]: Duplicate value: {"n":1,"type":"A"}"#,
                r#"[4]: Duplicate value: {"type":"B"}"#
            ]
        );
    }

    #[test]
    fn unknown_fields_are_reported_alone() {
        let e = errors(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, foo: 1}\nspec:\n  targetRefs: []\n  bar: 1\n",
        );
        assert_eq!(
            e,
            vec![
                "metadata.foo: unknown field \"metadata.foo\"",
                "spec.bar: unknown field \"spec.bar\""
            ]
        );
    }
}
