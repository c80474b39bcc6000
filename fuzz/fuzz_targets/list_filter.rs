//! List filtering of responses (policy/src/list_filter.rs): arbitrary response text, as one JSON
//! body and as an event stream cut into arbitrary chunks, against list requests of every kind and
//! an arbitrary keep rule. No panic; a rewrite removes no more entries than it saw; a rewritten
//! JSON body is still JSON (when serde_json reads the original); the single pass agrees with the
//! serde_json reading it replaced (`serde_reference`: the same text, or the same kind of refusal);
//! the same stream gives the same output however it is cut.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use toolgate_policy::list_filter::{
    rewrite_json, serde_reference, ListKind, ListRequests, SseFilter, Unreadable,
};
use toolgate_policy::mcp::{read_body, ReadOptions};

const REQUESTS: &str = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":"p","method":"prompts/list"},{"jsonrpc":"2.0","id":3,"method":"resources/list"}]"#;

fn stream(
    bytes: &[u8],
    cuts: &[usize],
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
) -> Option<Vec<u8>> {
    let mut f = SseFilter::default();
    let mut out = Vec::new();
    let mut at = 0;
    for (i, &cut) in cuts.iter().chain(std::iter::once(&bytes.len())).enumerate() {
        let cut = cut.clamp(at, bytes.len());
        let end = i == cuts.len();
        out.extend(f.feed(&bytes[at..cut], end, 4096, requests, keep).ok()?);
        at = cut;
    }
    assert!(f.done.removed <= f.done.entries);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(salt) = u.arbitrary::<u8>() else {
        return;
    };
    let Ok(cuts) = u.arbitrary::<[u16; 3]>() else {
        return;
    };
    let text = u.take_rest();
    let body = read_body(REQUESTS.as_bytes(), ReadOptions::default()).expect("fixed requests");
    let requests = ListRequests::of(&body);
    // Keeps an entry by a hash of its name and kind.
    let mut keep = |kind: ListKind, name: &str| {
        name.bytes()
            .fold(salt ^ kind as u8, |h, b| h.rotate_left(3) ^ b)
            % 2
            == 0
    };
    if let Ok(json) = std::str::from_utf8(text) {
        let single = rewrite_json(json, &requests, &mut keep);
        match (
            &single,
            serde_reference::rewrite_json(json, &requests, &mut keep),
        ) {
            (Ok(a), Ok(b)) => assert_eq!(*a, b, "{json}"),
            (Err(Unreadable::Syntax(_)), Err(Unreadable::Syntax(_))) => {}
            (Err(Unreadable::Ambiguous(a)), Err(Unreadable::Ambiguous(b))) => {
                assert_eq!(*a, b, "{json}")
            }
            (a, b) => panic!("{json:?}: single pass {a:?}, serde_json {b:?}"),
        }
        if let Ok(done) = single {
            assert!(done.removed <= done.entries);
            // Still JSON, as the original was (serde_json's Value refuses some numbers that raw values
            // and clients accept, e.g. 1E4444: then there is nothing to compare).
            if let (Some(new), true) = (
                done.text,
                serde_json::from_str::<serde_json::Value>(json).is_ok(),
            ) {
                assert!(
                    serde_json::from_str::<serde_json::Value>(&new).is_ok(),
                    "{json} -> {new}"
                );
            }
        }
    }
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (text.len() + 1))
        .collect();
    cuts.sort_unstable();
    let whole = stream(text, &[], &requests, &mut keep);
    let cut = stream(text, &cuts, &requests, &mut keep);
    if let (Some(a), Some(b)) = (whole, cut) {
        assert_eq!(a, b, "the output depends on how the stream is cut");
    }
});
