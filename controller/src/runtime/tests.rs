//! Tests of the runtime's write bookkeeping.

use serde_json::json;

use super::written::{without_times, Written};

#[test]
fn a_write_is_not_repeated_while_the_cache_has_not_seen_it() {
    let w = Written::default();
    let key = ("WasmPlugin".to_string(), "ns".to_string(), "p".to_string());
    let v1 = json!({"spec": 1});
    assert!(!w.pending(&key, &v1, Some("7")), "nothing written yet");
    w.record(key.clone(), v1.clone(), Some("7".into()));
    assert!(
        w.pending(&key, &v1, Some("7")),
        "the cache still shows version 7: the write is in flight"
    );
    assert!(
        !w.pending(&key, &json!({"spec": 2}), Some("7")),
        "other content is written"
    );
    assert!(
        !w.pending(&key, &v1, Some("9")),
        "someone changed it since: written again"
    );
    w.record(key.clone(), v1.clone(), None);
    assert!(w.pending(&key, &v1, None), "created, not seen yet");
    w.clear(&key);
    assert!(
        !w.pending(&key, &v1, None),
        "seen, then deleted: created again"
    );
}

#[test]
fn statuses_compare_without_transition_times() {
    let a = json!({"ancestors": [{"conditions": [{"reason": "Accepted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]});
    let b = json!({"ancestors": [{"conditions": [{"reason": "Accepted", "lastTransitionTime": "2026-02-02T00:00:00Z"}]}]});
    let c = json!({"ancestors": [{"conditions": [{"reason": "InvalidCEL", "lastTransitionTime": "2026-02-02T00:00:00Z"}]}]});
    assert_eq!(without_times(a.clone()), without_times(b));
    assert_ne!(without_times(a), without_times(c));
}
