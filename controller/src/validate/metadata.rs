//! Step 2 of [`admit`](super::admit): `metadata.name` and the namespace as DNS-1123 names, in the server's words.

use std::sync::OnceLock;

use serde_json::Value;

use super::schema::{go_quote, push, Err};

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub(super) fn validate_metadata(obj: &Value, default_namespace: &str, errs: &mut Vec<Err>) {
    static SUBDOMAIN: OnceLock<regex::Regex> = OnceLock::new();
    static LABEL: OnceLock<regex::Regex> = OnceLock::new();
    let subdomain = SUBDOMAIN.get_or_init(|| {
        regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .unwrap()
    });
    let label =
        LABEL.get_or_init(|| regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap());
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let generate_name = meta
        .and_then(|m| m.get("generateName"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            push(
                errs,
                "metadata.name",
                "Required value: name or generateName is required".into(),
                true,
            );
        }
    } else {
        if name.len() > 253 {
            push(
                errs,
                "metadata.name",
                format!(
                    "Invalid value: {}: must be no more than 253 characters",
                    go_quote(name)
                ),
                false,
            );
        }
        if !subdomain.is_match(name) {
            push(
                errs,
                "metadata.name",
                format!("Invalid value: {}: {DNS1123_SUBDOMAIN_MSG}", go_quote(name)),
                false,
            );
        }
    }
    let ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or(default_namespace);
    if ns.len() > 63 {
        push(
            errs,
            "metadata.namespace",
            format!(
                "Invalid value: {}: must be no more than 63 characters",
                go_quote(ns)
            ),
            false,
        );
    }
    if !label.is_match(ns) {
        push(
            errs,
            "metadata.namespace",
            format!("Invalid value: {}: {DNS1123_LABEL_MSG}", go_quote(ns)),
            false,
        );
    }
}
