//! The reader's heap for bodies at a 1 MiB limit, worst shapes first (docs/security.md): measured
//! with a counting allocator, natively and compiled to wasm32 (`make test-wasm`), where pointers
//! and `usize` are half as wide. One test in its own binary: the count is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use toolgate_policy::mcp::{read_body, ReadOptions};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            PEAK.fetch_max(
                LIVE.fetch_add(layout.size(), Relaxed) + layout.size(),
                Relaxed,
            );
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const LIMIT: usize = 1024 * 1024;

/// `head`, then `item` repeated (comma-separated) while the body stays within LIMIT, then `tail`.
fn body(head: &str, item: impl Fn(usize) -> String, tail: &str) -> Vec<u8> {
    let mut b = head.as_bytes().to_vec();
    for i in 0.. {
        let it = item(i);
        if b.len() + it.len() + 1 + tail.len() > LIMIT {
            break;
        }
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(it.as_bytes());
    }
    b.extend_from_slice(tail.as_bytes());
    b
}

/// Peak heap while reading (result included), in bytes, and whether it was MCP.
fn peak(body: &[u8], capture_params: bool) -> (usize, bool) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let ok = read_body(body, ReadOptions { capture_params }).is_ok();
    (PEAK.load(Relaxed) - base, ok)
}

#[test]
fn reader_heap_is_bounded_by_the_body() {
    const CALL: &str =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"#;
    let shapes: Vec<(&str, Vec<u8>)> = vec![
        // One message struct per 29 bytes.
        (
            "batch of minimal responses",
            body("[", |_| r#"{"jsonrpc":"2.0","result":0}"#.into(), "]"),
        ),
        (
            "batch of tools/call",
            body(
                "[",
                |i| {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"get-sum"}}}}"#
                    )
                },
                "]",
            ),
        ),
        // One URI per 4 bytes.
        (
            "subscriptions/listen, 1-char URIs",
            body(
                r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["#,
                |_| r#""a""#.into(),
                "]}}}",
            ),
        ),
        // Escaped strings are decoded into owned ones.
        (
            "escaped tool name",
            format!(
                "{}{{}}}}}}",
                CALL.replace(
                    r#""name":"t""#,
                    &format!(r#""name":"{}""#, "\\u0041".repeat(170_000))
                )
            )
            .into_bytes(),
        ),
        // Duplicate detection: one entry per key of a wide object.
        (
            "wide arguments object",
            body(&format!("{CALL}{{"), |i| format!(r#""{i:x}":0"#), "}}}"),
        ),
        // Wide objects at every depth up to the limit.
        ("deep and wide", {
            let mut s = String::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"#,
            );
            for d in 0..61 {
                s.push('{');
                for k in 0..1000 {
                    s.push_str(&format!(r#""{d}_{k}":0,"#));
                }
                s.push_str(r#""next":"#);
            }
            s.push('0');
            s.push_str(&"}".repeat(61 + 2));
            s.into_bytes()
        }),
        (
            "many arrays in arguments",
            body(&format!("{CALL}["), |_| "[]".into(), "]}}"),
        ),
    ];
    let mut worst = 0.0f64;
    for (name, b) in &shapes {
        assert!(b.len() <= LIMIT + 64 * 1024, "{name}: {} bytes", b.len());
        for capture in [false, true] {
            let (p, ok) = peak(b, capture);
            assert!(ok, "{name}: not MCP");
            let ratio = p as f64 / b.len() as f64;
            worst = worst.max(ratio);
            println!(
                "{name} (capture_params {capture}): {} bytes, peak heap {p} bytes, {ratio:.2}x",
                b.len()
            );
            // The bound docs/security.md states (and fuzz/ asserts for every input: 32x + 64 KiB).
            assert!(
                p <= 16 * b.len() + 64 * 1024,
                "{name}: {p} bytes of heap for {} bytes",
                b.len()
            );
        }
    }
    println!("worst: {worst:.2}x the body ({}-bit)", usize::BITS);
    // The batch shape really is the expensive one: the measurement measures something.
    assert!(worst > 1.0);
}
