//! The filter's walk allocates nothing for the record `toolgate explain` keeps (docs/semantics.md
//! §7): `Route::step` (the filter's, with a trace that records nothing) is counted with a counting
//! allocator on an allowed request, a denied one and a batch, and allocates no more than the
//! decision it returns needs; the recorded walk of the same request does allocate (the count can
//! see a record). One test in its own binary: the count is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest, Record, Step};
use toolgate_policy::mcp::{read_body, ReadOptions};
use toolgate_policy::plan::{
    CompiledPlan, McpMatch, McpMethodMatch, MethodPattern, PolicyPlan, RulePlan,
};

struct Counting;
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const A: &str = "spiffe://cluster.local/ns/default/sa/a";

fn plan() -> CompiledPlan {
    let tools = |names: &[&str]| McpMatch {
        base_protocol: false,
        methods: vec![McpMethodMatch {
            method: MethodPattern::Exact("tools/call".into()),
            params: names.iter().map(|n| n.to_string()).collect(),
        }],
    };
    let rules = vec![
        RulePlan {
            name: "r0".into(),
            principal: Some(A.into()),
            mcp: Some(tools(&["get-sum", "echo"])),
            ..RulePlan::default()
        },
        RulePlan {
            name: "r1".into(),
            principal: Some(A.into()),
            mcp: Some(tools(&["get-env"])),
            ..RulePlan::default()
        },
    ];
    let mut plan = CompiledPlan::empty("default/gw/http");
    plan.gateway.allow.push(PolicyPlan {
        name: "default/agents".into(),
        rules,
        dry_run: false,
    });
    plan.seal()
}

#[test]
fn the_filters_walk_allocates_nothing_for_the_record() {
    let ev = Evaluator::from_plan(plan()).unwrap();
    let route = ev.route(None);
    let headers = [("mcp-method", "tools/call")];
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        authority: "gw",
        port: 80,
        headers: &headers,
        principal: Some(A),
        server_name: None,
        auth: None,
        time_ms: 0,
    };
    let call = |tool: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}"}}}}"#)
    };
    let batch = format!("[{},{}]", call("get-sum"), call("get-env"));
    for (body, allowed) in [(call("echo"), true), (call("nope"), false), (batch, true)] {
        let read = read_body(body.as_bytes(), ReadOptions::default()).unwrap();
        let before = ALLOCATIONS.load(Relaxed);
        let step = route.step(&req, BodyInput::Mcp(&read), 0);
        let walk = ALLOCATIONS.load(Relaxed) - before;
        let Step::Decided(d) = step else {
            panic!("no authorizer on this route")
        };
        assert_eq!(d.allowed(), allowed, "{body}");
        assert_eq!(
            walk, 0,
            "the filter's walk of {body} allocated {walk} times"
        );
        let mut record = Record::default();
        let before = ALLOCATIONS.load(Relaxed);
        let recorded = route.step_recorded(&req, BodyInput::Mcp(&read), 0, &mut record);
        assert!(
            ALLOCATIONS.load(Relaxed) > before,
            "the count sees a record"
        );
        let Step::Decided(r) = recorded else {
            panic!("no authorizer on this route")
        };
        assert_eq!(r, d);
    }
}
