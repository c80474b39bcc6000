//! The names and marks of the objects the controller writes.
//!
//! Names must be unique per source: two sources sharing a name would write one object in turn
//! forever, and the source that lost last would have no filter. Joining names with `-` is not
//! unique (Gateway `mcp` with listener `public-https` and Gateway `mcp-public` with listener `https`
//! both give `toolgate-mcp-public-https`), and a Gateway name may be 253 characters, where a label
//! value may have 63. So a name is readable only where that reading is unambiguous, and hashed
//! otherwise:
//!
//! - readable, `<prefix><gateway>-<listener>` (or `<prefix><gateway>`), when the listener name has no
//!   `-` (the last `-` then splits the two), the whole is a DNS label of at most 63 characters, and it
//!   does not end as a hashed name does (`-` and 10 hex digits);
//! - hashed otherwise, `<prefix><readable part, cut and made a DNS label>-<hash>`, the hash being the
//!   first 10 hex digits of SHA-256 over `<namespace>/<gateway>[/<listener>]` (`/` occurs in no name).
//!
//! Readable names never end like hashed ones, and readable names split one way only, so two sources
//! share a name only if two hashes collide; the runtime still refuses to write one source's output
//! over another's (`write`). Every name is a DNS label (63 characters at most), valid for any kind.
//!
//! Every object written carries `app.kubernetes.io/managed-by: toolgate` (what the controller
//! watches, adopts and deletes: an object without it is never overwritten) and the annotation
//! `toolgate.dev/source` with the full names of its source; its `toolgate.dev/gateway` label is the
//! Gateway's name where that is a valid label value, else the same bounded form.

use sha2::{Digest, Sha256};

/// The longest name or label value written (a DNS label's limit, and a label value's).
pub const MAX_LEN: usize = 63;
/// The hex digits of the hash in a hashed name.
const HASH_LEN: usize = 10;
/// Annotation: the full names of the object's source (`<ns>/<gateway>` or `<ns>/<gateway>/<listener>`).
pub const SOURCE_ANNOTATION: &str = "toolgate.dev/source";

/// The name of a listener's WasmPlugin (or TrafficExtension).
pub fn plan_output(namespace: &str, gateway: &str, listener: &str) -> String {
    listener_name("toolgate-", namespace, gateway, listener)
}

/// The name of a listener's plan ConfigMap (`--plan-configmaps`).
pub fn plan_configmap(namespace: &str, gateway: &str, listener: &str) -> String {
    listener_name("toolgate-plan-", namespace, gateway, listener)
}

/// The name of a Gateway's EnvoyFilter.
pub fn hold_output(namespace: &str, gateway: &str) -> String {
    bounded(
        "toolgate-",
        gateway,
        true,
        &gateway_source(namespace, gateway),
    )
}

/// The `toolgate.dev/gateway` label value of a Gateway's outputs.
pub fn gateway_label(namespace: &str, gateway: &str) -> String {
    bounded("", gateway, true, &gateway_source(namespace, gateway))
}

/// The `toolgate.dev/source` annotation of a Gateway's EnvoyFilter.
pub fn gateway_source(namespace: &str, gateway: &str) -> String {
    format!("{namespace}/{gateway}")
}

/// The `toolgate.dev/source` annotation of a listener's outputs.
pub fn listener_source(namespace: &str, gateway: &str, listener: &str) -> String {
    format!("{namespace}/{gateway}/{listener}")
}

fn listener_name(prefix: &str, namespace: &str, gateway: &str, listener: &str) -> String {
    let splits_once = !listener.is_empty()
        && listener
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    bounded(
        prefix,
        &format!("{gateway}-{listener}"),
        splits_once,
        &listener_source(namespace, gateway, listener),
    )
}

/// `prefix + readable` where that is unambiguous (`splits_once`) and fits, else hashed.
fn bounded(prefix: &str, readable: &str, splits_once: bool, source: &str) -> String {
    let whole = format!("{prefix}{readable}");
    if splits_once && whole.len() <= MAX_LEN && is_dns_label(&whole) && !looks_hashed(&whole) {
        return whole;
    }
    let hex: String = Sha256::digest(source.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let room = MAX_LEN - prefix.len() - 1 - HASH_LEN;
    let part: String = readable
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(room)
        .collect();
    let part = part.trim_matches('-');
    let hash = hex.get(..HASH_LEN).unwrap_or(&hex);
    match (prefix.is_empty(), part.is_empty()) {
        (true, true) => hash.to_string(),
        (false, true) => format!("{prefix}{hash}"),
        _ => format!("{prefix}{part}-{hash}"),
    }
}

fn is_dns_label(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `s` ends as a hashed name does: `-` and `HASH_LEN` lower-case hex digits.
fn looks_hashed(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > HASH_LEN
        && b[b.len() - HASH_LEN - 1] == b'-'
        && b[b.len() - HASH_LEN..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_s_pair_gets_two_names() {
        let a = plan_output("ns", "mcp", "public-https");
        let b = plan_output("ns", "mcp-public", "https");
        assert_eq!(b, "toolgate-mcp-public-https", "unambiguous: readable");
        assert_ne!(a, b);
        assert!(
            a.starts_with("toolgate-mcp-public-https-")
                && a.len() == "toolgate-mcp-public-https-".len() + HASH_LEN,
            "{a}"
        );
        assert_eq!(a, plan_output("ns", "mcp", "public-https"), "deterministic");
        assert_ne!(
            plan_configmap("ns", "mcp", "public-https"),
            plan_configmap("ns", "mcp-public", "https")
        );
    }

    #[test]
    fn common_names_stay_as_they_were() {
        assert_eq!(plan_output("default", "gw", "http"), "toolgate-gw-http");
        assert_eq!(plan_output("default", "gw2", "http"), "toolgate-gw2-http");
        assert_eq!(
            plan_output("default", "my-gateway", "https"),
            "toolgate-my-gateway-https"
        );
        assert_eq!(hold_output("default", "gw"), "toolgate-gw");
        assert_eq!(plan_configmap("ns", "gw", "http"), "toolgate-plan-gw-http");
        assert_eq!(gateway_label("ns", "gw"), "gw");
    }

    #[test]
    fn long_and_dotted_names_are_bounded() {
        let long = "g".repeat(253);
        let dotted = "mcp.example.com";
        let hashed = |name: String| {
            assert!(
                name.len() <= MAX_LEN && is_dns_label(&name) && looks_hashed(&name),
                "{name}"
            )
        };
        for gw in [long.as_str(), dotted] {
            [
                plan_output("ns", gw, "http"),
                plan_configmap("ns", gw, "http"),
                hold_output("ns", gw),
                gateway_label("ns", gw),
            ]
            .into_iter()
            .for_each(hashed);
        }
        for l in ["a.b", &"l".repeat(253)] {
            [plan_output("ns", "gw", l), plan_configmap("ns", "gw", l)]
                .into_iter()
                .for_each(hashed);
        }
        assert_ne!(
            hold_output("ns", &long),
            hold_output("ns", &"g".repeat(252)),
            "cut to the same prefix, hashed apart"
        );
        assert_ne!(
            hold_output("a", "x.y"),
            hold_output("b", "x.y"),
            "the namespace is hashed too"
        );
    }

    #[test]
    fn names_that_look_hashed_are_hashed() {
        // A listener named like a hash would make a readable name look like another source's hashed one.
        let name = plan_output("ns", "gw", "0123456789");
        assert_ne!(name, "toolgate-gw-0123456789");
        assert!(looks_hashed(&name));
        assert_ne!(
            hold_output("ns", "x-0123456789"),
            "toolgate-x-0123456789",
            "ends in - and 10 hex digits"
        );
        assert_eq!(
            hold_output("ns", "x-0123456789a"),
            "toolgate-x-0123456789a",
            "11 digits: not a hash"
        );
    }

    /// Every pair of short names over an alphabet that makes joins ambiguous: no two sources share a
    /// name, and every name is a DNS label of at most 63 characters.
    #[test]
    fn names_are_unique_per_source() {
        let mut parts = vec![];
        for len in 1..=4 {
            let mut idx = vec![0usize; len];
            loop {
                let s: String = idx.iter().map(|&i| ['a', '-', '0', 'b'][i]).collect();
                if is_dns_label(&s) {
                    parts.push(s);
                }
                let Some(pos) = idx.iter().rposition(|&i| i < 3) else {
                    break;
                };
                idx[pos] += 1;
                idx.iter_mut().skip(pos + 1).for_each(|i| *i = 0);
            }
        }
        parts.push("0123456789".into());
        parts.push("a-0123456789".into());
        let mut seen = std::collections::HashMap::new();
        for gw in &parts {
            if let Some(prev) = seen.insert(hold_output("ns", gw), gw.clone()) {
                panic!("EnvoyFilters of {prev} and {gw} share a name");
            }
        }
        let mut seen = std::collections::HashMap::new();
        for gw in &parts {
            for l in &parts {
                let name = plan_output("ns", gw, l);
                assert!(name.len() <= MAX_LEN && is_dns_label(&name), "{name}");
                if let Some(prev) = seen.insert(name.clone(), (gw.clone(), l.clone())) {
                    panic!("{name}: {prev:?} and {:?}", (gw, l));
                }
            }
        }
        assert!(seen.len() > 10_000, "{}", seen.len());
    }
}
