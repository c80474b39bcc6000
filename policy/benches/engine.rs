//! Native micro-benchmarks of the policy engine, run by `make bench` (bench/run.py puts the results in
//! docs/benchmarks.md): the MCP body reader per body size, evaluation at 20 tools and at 1,000 policies, the
//! filter's whole per-request engine work, compiling 10,000 policies, loading plans, list filtering
//! of a 100-tool `tools/list` answer (JSON and event stream).
//!
//! The bodies and policy sets have the same shape as the ones bench/workload.py makes and `make bench` sends through Envoy.
//!
//! For callgrind, `-- count CASE N` runs one case N times outside criterion and exits (CASE:
//! `read_body_300B`, `read_decide_summary_300B`, `list_json`, `list_sse`); the instructions of one
//! run are the difference between N = 1001 and N = 1, divided by 1000, e.g.
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/engine-* -- count list_json 1001`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use toolgate_policy::api::AccessPolicySpec;
use toolgate_policy::compile::{compile_policy, CompileOptions};
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};
use toolgate_policy::list_filter::{rewrite_json, ListKind, ListRequests, SseFilter};
use toolgate_policy::mcp::{read_body, ReadOptions};
use toolgate_policy::plan::{CompiledPlan, LevelPlan};

const PRINCIPAL: &str = "spiffe://cluster.local/ns/default/sa/a";
const TOOL: &str = "tool-00017";
const CLUSTER: &str = "xbackend/default/tools";
const BODIES: [(&str, usize); 3] = [("300B", 300), ("64KiB", 64 * 1024), ("1MiB", 1024 * 1024)];

/// A `tools/call` of exactly `size` bytes (as bench/workload.py `make_body`): small bodies method first,
/// large ones with big `arguments` and `method`/`params.name` last.
fn body(size: usize, tool: &str) -> Vec<u8> {
    let (head, tail) = if size <= 1024 {
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"path":"/srv/data/report.txt","mode":"summary","text":""#
            ),
            r#""}}}"#.to_string(),
        )
    } else {
        (
            r#"{"jsonrpc":"2.0","id":1,"params":{"arguments":{"path":"/srv/data/report.txt","content":""#.to_string(),
            format!(r#""}},"name":"{tool}"}},"method":"tools/call"}}"#),
        )
    };
    let unit = r#"The quick brown fox jumps over the lazy dog; \"quoted\" text, a tab\t and \u00e9t\u00e9.\n "#;
    let n = size - head.len() - tail.len();
    let mut text = unit.repeat(n / unit.len());
    text.push_str(&"x".repeat(n % unit.len()));
    let out = format!("{head}{text}{tail}").into_bytes();
    assert_eq!(out.len(), size);
    out
}

fn spec(level: &str, rules: &[(Option<&str>, &[String])]) -> AccessPolicySpec {
    let target = if level == "gateway" {
        r#"{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"bench-gateway"}"#
    } else {
        r#"{"group":"agentic.networking.x-k8s.io","kind":"XBackend","name":"tools"}"#
    };
    let rules: Vec<String> = rules
        .iter()
        .enumerate()
        .map(|(i, (source, tools))| {
            let source = source.map(|s| format!(r#""source":{{"type":"SPIFFE","spiffe":"{s}"}},"#)).unwrap_or_default();
            format!(
                r#"{{"name":"r{i}",{source}"authorization":{{"type":"Inline","mcp":{{"methods":[{{"name":"tools/call","params":{}}}]}}}}}}"#,
                serde_json::to_string(tools).unwrap()
            )
        })
        .collect();
    let json = format!(
        r#"{{"targetRefs":[{target}],"action":"Allow","rules":[{}]}}"#,
        rules.join(",")
    );
    serde_json::from_str(&json).expect("spec parses")
}

/// The policy sets of bench/workload.py `policies_many`: on the Gateway 5 policies of 10 sourced rules x 10
/// tools (rules alternate between agent-a and other callers), on each of `backends` XBackends 5
/// policies of one rule x 10 tools (the API allows 5 policies per target). The benchmark's tools are in
/// the last rule of the last gateway policy and the last policy of the XBackend whose cluster is
/// CLUSTER. Returns (gateway-level policies, per backend cluster: its policies).
fn many(backends: usize) -> Levels {
    let bench_tools: Vec<String> = (10..20).map(|k| format!("tool-{k:05}")).collect();
    let mut gateway = Vec::new();
    for i in 0..5 {
        let mut rules: Vec<(Option<String>, Vec<String>)> = Vec::new();
        for r in 0..10 {
            if (i, r) == (4, 9) {
                rules.push((Some(PRINCIPAL.to_string()), bench_tools.clone()));
            } else {
                let source = if r % 2 == 1 {
                    PRINCIPAL.to_string()
                } else {
                    format!("spiffe://cluster.local/ns/team-{i}-{r}/sa/agent")
                };
                rules.push((
                    Some(source),
                    (0..10).map(|k| format!("gw-{i}-{r}-{k}")).collect(),
                ));
            }
        }
        let rules: Vec<(Option<&str>, &[String])> = rules
            .iter()
            .map(|(s, t)| (s.as_deref(), t.as_slice()))
            .collect();
        gateway.push((format!("gw-{i}"), spec("gateway", &rules)));
    }
    let mut levels = vec![];
    for b in 0..backends {
        let (cluster, name) = if b == 0 {
            (CLUSTER.to_string(), "tools".to_string())
        } else {
            (format!("xbackend/default/b-{b:04}"), format!("b-{b:04}"))
        };
        let policies = (0..5)
            .map(|p| {
                let tools: Vec<String> = if b == 0 && p == 4 {
                    bench_tools.clone()
                } else {
                    (0..10).map(|k| format!("{name}-{p}-{k}")).collect()
                };
                (format!("{name}-p{p}"), spec("backend", &[(None, &tools)]))
            })
            .collect();
        levels.push((cluster, policies));
    }
    (gateway, levels)
}

type Policies = Vec<(String, AccessPolicySpec)>;
type Levels = (Policies, Vec<(String, Policies)>);

/// The 20-tool policy of configuration (c): one gateway-level policy, two sourced rules.
fn twenty() -> Levels {
    let tools: Vec<String> = (0..20).map(|k| format!("tool-{k:05}")).collect();
    (
        vec![(
            "agents".to_string(),
            spec(
                "gateway",
                &[
                    (Some(PRINCIPAL), &tools[..10]),
                    (Some(PRINCIPAL), &tools[10..]),
                ],
            ),
        )],
        vec![],
    )
}

/// What the controller does per listener once the topology is known: compile every policy, assemble
/// the plan, hash it.
fn compile(levels: &Levels) -> CompiledPlan {
    let opts = CompileOptions::default();
    let mut plan = CompiledPlan::empty("default/bench-gateway/https");
    let (gateway, backends) = levels;
    plan.gateway = LevelPlan {
        allow: gateway
            .iter()
            .map(|(n, s)| compile_policy("default", n, s, &opts).unwrap())
            .collect(),
        ..Default::default()
    };
    for (cluster, policies) in backends {
        let allow = policies
            .iter()
            .map(|(n, s)| compile_policy("default", n, s, &opts).unwrap())
            .collect();
        plan.backends.insert(
            cluster.clone(),
            LevelPlan {
                allow,
                ..Default::default()
            },
        );
    }
    plan.seal()
}

/// The benchmark's request: agent-a's POST to /mcp with `headers`.
fn request<'a>(headers: &'a [(&'a str, &'a str)]) -> HttpRequest<'a> {
    HttpRequest {
        method: "POST",
        path: "/mcp",
        authority: "127.0.0.1:20443",
        port: 20443,
        headers,
        principal: Some(PRINCIPAL),
        server_name: None,
        auth: None,
        time_ms: 0,
    }
}

fn headers(tool: &str) -> Vec<(&str, &str)> {
    vec![
        (":authority", "127.0.0.1:20443"),
        (":path", "/mcp"),
        (":method", "POST"),
        (":scheme", "https"),
        ("content-length", "300"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
        ("x-forwarded-proto", "https"),
        ("x-request-id", "0b6c7d6e-3f1a-4a52-9d7c-2f3f7c1d9a10"),
    ]
}

fn reader(c: &mut Criterion) {
    let mut g = c.benchmark_group("mcp_reader");
    for (name, size) in BODIES {
        let b = body(size, TOOL);
        assert!(read_body(&b, ReadOptions::default()).is_ok());
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("read_body", name), &b, |bench, b| {
            bench.iter(|| read_body(black_box(b), ReadOptions::default()).is_ok())
        });
        // Reference: a full serde_json parse into a Value (what a naive filter does).
        g.bench_with_input(
            BenchmarkId::new("serde_json_value", name),
            &b,
            |bench, b| {
                bench.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(b)).is_ok())
            },
        );
    }
    g.finish();
}

fn evaluate(c: &mut Criterion) {
    let plans = [
        ("20_tools", compile(&twenty())),
        ("1000_policies", compile(&many(199))),
    ];
    let hdrs = headers(TOOL);
    let req = request(&hdrs);
    let small = body(300, TOOL);
    let mut g = c.benchmark_group("evaluate");
    for (name, plan) in &plans {
        let ev = Evaluator::from_plan(plan.clone()).unwrap();
        let mcp = read_body(&small, ReadOptions::default()).unwrap();
        let d = ev.route(Some(CLUSTER)).decide(&req, BodyInput::Mcp(&mcp));
        assert!(d.allowed(), "{}", d.summary());
        g.bench_function(BenchmarkId::new("decide", name), |bench| {
            bench.iter(|| {
                ev.route(black_box(Some(CLUSTER)))
                    .decide(black_box(&req), BodyInput::Mcp(black_box(&mcp)))
                    .allowed()
            })
        });
        // The engine part of the filter's per-request work on a 300 B body: read, decide, summary line.
        g.bench_function(
            BenchmarkId::new("read_decide_summary_300B", name),
            |bench| {
                bench.iter(|| {
                    let mcp = read_body(black_box(&small), ReadOptions::default()).unwrap();
                    let d = ev.route(Some(CLUSTER)).decide(&req, BodyInput::Mcp(&mcp));
                    d.summary().len()
                })
            },
        );
    }
    g.finish();
}

/// CEL rules per request on a 300 B `tools/call` (rows (f1) and (f2) of `make bench`, natively): one
/// rule on the tool name, one on the tool name and an argument (`params` captured and decoded).
fn cel(c: &mut Criterion) {
    let hdrs = headers(TOOL);
    let req = request(&hdrs);
    let small = body(300, TOOL);
    let cases = [
        ("tool_name", "request.mcp.tool_name == 'tool-00017'", false),
        (
            "argument",
            "request.mcp.tool_name == 'tool-00017' && request.mcp.params.arguments.path == '/srv/data/report.txt'",
            true,
        ),
    ];
    let mut g = c.benchmark_group("cel");
    for (name, expression, capture_params) in cases {
        let json = format!(
            r#"{{"targetRefs":[{{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"bench-gateway"}}],"action":"Allow","rules":[{{"name":"r0","source":{{"type":"SPIFFE","spiffe":"{PRINCIPAL}"}},"authorization":{{"type":"CEL","cel":{{"expression":{}}}}}}}]}}"#,
            serde_json::to_string(expression).unwrap()
        );
        let spec: AccessPolicySpec = serde_json::from_str(&json).unwrap();
        let mut plan = CompiledPlan::empty("default/bench-gateway/https");
        plan.gateway = LevelPlan {
            allow: vec![
                compile_policy("default", "cel", &spec, &CompileOptions::default()).unwrap(),
            ],
            ..Default::default()
        };
        let ev = Evaluator::from_plan(plan.seal()).unwrap();
        let opts = ReadOptions { capture_params };
        let mcp = read_body(&small, opts).unwrap();
        let d = ev.route(Some(CLUSTER)).decide(&req, BodyInput::Mcp(&mcp));
        assert!(d.allowed(), "{}", d.summary());
        g.bench_function(BenchmarkId::new("decide", name), |bench| {
            bench.iter(|| {
                ev.route(black_box(Some(CLUSTER)))
                    .decide(black_box(&req), BodyInput::Mcp(black_box(&mcp)))
                    .allowed()
            })
        });
    }
    g.finish();
}

/// A policy regex matched against the short strings it meets per request (tool names, paths, header
/// values): what the `regex` crate's feature set (policy/Cargo.toml) trades against module size.
fn regex(c: &mut Criterion) {
    let cases = [
        (
            "tool_alternation",
            "get-(sum|env)|list-[a-z]+|tool-0001[0-9]",
            "tool-00017",
        ),
        ("tool_prefix_miss", "admin-.*", "tool-00017"),
        (
            "path_class",
            "/api/v[0-9]+/(users|tools)/[^/]+",
            "/api/v2/tools/get-sum",
        ),
        (
            "case_insensitive",
            "(?i)agent-[a-z]+@example\\.com",
            "Agent-Alice@EXAMPLE.com",
        ),
    ];
    let mut g = c.benchmark_group("regex");
    for (name, expr, text) in cases {
        let re = toolgate_policy::eval::full_match_regex(expr).unwrap();
        g.bench_function(name, |bench| bench.iter(|| re.is_match(black_box(text))));
    }
    g.finish();
}

fn plan(c: &mut Criterion) {
    let x10k = many(1999);
    let mut g = c.benchmark_group("plan");
    g.sample_size(10);
    g.bench_function("compile/10000_policies", |bench| {
        bench.iter(|| compile(black_box(&x10k)).hash.len())
    });
    for (name, levels) in [
        ("20_tools", twenty()),
        ("1000_policies", many(199)),
        ("10000_policies", x10k),
    ] {
        let json = serde_json::to_vec(&compile(&levels)).unwrap();
        eprintln!("plan {name}: {} bytes", json.len());
        g.throughput(Throughput::Bytes(json.len() as u64));
        g.bench_with_input(BenchmarkId::new("load", name), &json, |bench, json| {
            bench.iter(|| Evaluator::load(black_box(json)).is_ok())
        });
    }
    g.finish();
}

/// The upstream's answer to the bench's list rows (bench/workload.py `tools_list_response`): a JSON-RPC result
/// (id 1) of 100 tools tool-00000..tool-00099, each entry exactly 300 bytes (name, title, a description
/// padded to size, a small inputSchema), about 30 KB.
fn tools_list_response() -> String {
    let words = "Reads a file under /srv/data and returns its text, or a summary of it; paths outside are refused. ";
    let tail = r#"","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"mode":{"type":"string","enum":["summary","full"]}},"required":["path"]}}"#;
    let entries: Vec<String> = (0..100)
        .map(|i| {
            let head = format!(r#"{{"name":"tool-{i:05}","title":"Tool {i}","description":""#);
            let n = 300 - head.len() - tail.len();
            let entry = format!("{head}{}{tail}", &words.repeat(n / words.len() + 1)[..n]);
            assert_eq!(entry.len(), 300);
            entry
        })
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{}]}}}}"#,
        entries.join(",")
    )
}

/// bench/workload.py's `LIST_REQUEST`.
const LIST_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;

/// What (l1)'s policy lets agent-a call: every tenth tool (tool-00000, tool-00010, ...).
fn keep_tenth(_: ListKind, name: &str) -> bool {
    name.len() == 10 && name.starts_with("tool-") && name.ends_with('0')
}

struct ListCase {
    requests: ListRequests,
    json: String,
    sse: String,
}

impl ListCase {
    fn new() -> Self {
        let requests =
            ListRequests::of(&read_body(LIST_REQUEST.as_bytes(), ReadOptions::default()).unwrap());
        let json = tools_list_response();
        let sse = format!("event: message\ndata: {json}\n\n");
        let case = ListCase {
            requests,
            json,
            sse,
        };
        let done = case.json_once();
        assert_eq!((done.lists, done.removed, done.entries), (1, 90, 100));
        assert_eq!(case.sse_once(), 90);
        case
    }

    fn json_once(&self) -> toolgate_policy::list_filter::Rewrite {
        rewrite_json(black_box(&self.json), &self.requests, &mut keep_tenth).unwrap()
    }

    /// The event stream in one chunk; returns the entries removed.
    fn sse_once(&self) -> usize {
        let mut f = SseFilter::default();
        let out = f
            .feed(
                black_box(self.sse.as_bytes()),
                true,
                1 << 20,
                &self.requests,
                &mut keep_tenth,
            )
            .unwrap();
        black_box(out.len());
        f.done.removed
    }
}

/// List filtering (rows (l1)/(l0) of `make bench`, natively): the 100-tool answer filtered down to
/// 10, as JSON and as one event of an event stream.
fn list(c: &mut Criterion) {
    let case = ListCase::new();
    let mut g = c.benchmark_group("list_filter");
    g.throughput(Throughput::Bytes(case.json.len() as u64));
    g.bench_function("rewrite_json/100_tools_keep_10", |bench| {
        bench.iter(|| case.json_once().removed)
    });
    g.bench_function("sse/100_tools_keep_10", |bench| {
        bench.iter(|| case.sse_once())
    });
    g.finish();
}

/// `-- count CASE N`: CASE run N times, for instruction counts (see the top of the file).
fn count(case: &str, n: usize) {
    let small = body(300, TOOL);
    let plan = compile(&twenty());
    let ev = Evaluator::from_plan(plan).unwrap();
    let hdrs = headers(TOOL);
    let req = request(&hdrs);
    let list = ListCase::new();
    let mut sink = 0usize;
    for _ in 0..n {
        sink += match case {
            "read_body_300B" => {
                usize::from(read_body(black_box(&small), ReadOptions::default()).is_ok())
            }
            "read_decide_summary_300B" => {
                let mcp = read_body(black_box(&small), ReadOptions::default()).unwrap();
                let d = ev.route(Some(CLUSTER)).decide(&req, BodyInput::Mcp(&mcp));
                d.summary().len()
            }
            "list_json" => list.json_once().removed,
            "list_sse" => list.sse_once(),
            other => panic!("unknown case {other}"),
        };
    }
    black_box(sink);
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(700)).measurement_time(Duration::from_secs(2));
    targets = reader, evaluate, cel, regex, plan, list
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "count") {
        let case = args.get(at + 1).expect("count CASE N");
        let n = args
            .get(at + 2)
            .and_then(|n| n.parse().ok())
            .expect("count CASE N");
        count(case, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
