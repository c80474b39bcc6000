//! The `compile`, `render` and `explain` commands on real files (docs/semantics.md §7).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .expect("toolgate runs")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolgate-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const TOPOLOGY: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: toolgate
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - {name: admin, port: 8081, protocol: HTTP}
---
apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {name: tools}
spec: {mcp: {serviceName: mcp-server, port: 9000}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /mcp}}]
    backendRefs: [{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}]
  - matches: [{path: {type: PathPrefix, value: /plain}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /mcp}}}]
    backendRefs: [{name: plain, port: 9001}]
"#;

fn policy(name: &str, created: &str, target: &str, extra: &str) -> String {
    format!(
        r#"---
apiVersion: agentic.networking.x-k8s.io/v1alpha1
kind: XAccessPolicy
metadata: {{name: {name}, creationTimestamp: "{created}"}}
spec:
  targetRefs: [{target}]
  action: Allow
{extra}"#
    )
}

const GW: &str = "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}";
const BACKEND: &str = "{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}";

fn write_inputs(dir: &Path, docs: &[String]) -> PathBuf {
    let file = dir.join("in.yaml");
    std::fs::write(&file, format!("{TOPOLOGY}{}", docs.concat())).unwrap();
    file
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// One test's folder, with the topology and the test's documents as its input (`in.yaml`).
struct Case {
    dir: PathBuf,
    input: PathBuf,
}

impl Case {
    fn new(name: &str, docs: &[String]) -> Case {
        let dir = tmp(name);
        let input = write_inputs(&dir, docs);
        Case { dir, input }
    }

    fn input(&self) -> &str {
        self.input.to_str().unwrap()
    }

    /// `name` in the test's folder.
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    /// `toolgate explain` of the request `req` (YAML), with `extra` arguments.
    fn explain_output(&self, req: &str, extra: &[&str]) -> Output {
        let request = self.path("req.yaml");
        std::fs::write(&request, req).unwrap();
        toolgate(
            &[
                &["explain", "-f", self.input(), "--request", &request][..],
                extra,
            ]
            .concat(),
        )
    }

    /// What `toolgate explain` prints for `req`; it must decide, and exit as `kubectl auth can-i`:
    /// 0 on ALLOW, 1 otherwise.
    fn explain(&self, req: &str, extra: &[&str]) -> String {
        let o = self.explain_output(req, extra);
        let out = String::from_utf8(o.stdout).unwrap();
        let want = if out.contains("\ndecision: ALLOW") {
            0
        } else {
            1
        };
        assert_eq!(
            o.status.code(),
            Some(want),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    }

    /// A stand-in for the .wasm (render checks only that the file is there).
    fn wasm(&self) -> String {
        let wasm = self.path("filter.wasm");
        std::fs::write(&wasm, b"\0asm").unwrap();
        wasm
    }

    /// `toolgate render` of the input into `out` (in the test's folder), the sample server's Service
    /// resolved to 127.0.0.1:7001, with `extra` arguments (the filter's among them).
    fn render(&self, out: &str, extra: &[&str]) -> Output {
        let out = self.path(out);
        let args = [
            "render",
            "-f",
            self.input(),
            "-o",
            &out,
            "--resolve",
            "mcp-server.default=127.0.0.1:7001",
        ];
        toolgate(&[&args[..], extra].concat())
    }

    /// [`Case::render`] with the stand-in .wasm.
    fn render_wasm(&self, out: &str, extra: &[&str]) -> Output {
        self.render(out, &[&["--wasm", &self.wasm()][..], extra].concat())
    }
}

/// The HTTP connection manager of the first listener in a rendered Gateway folder.
fn first_hcm(gateway_dir: &Path) -> Value {
    read_json(&gateway_dir.join("lds.json"))["resources"][0]["filter_chains"][0]["filters"][0]
        ["typed_config"]
        .clone()
}

/// The plan the Wasm filter (the first HTTP filter) of a connection manager carries.
fn wasm_plan(hcm: &Value) -> Value {
    serde_json::from_str(
        hcm["http_filters"][0]["typed_config"]["config"]["configuration"]["value"]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn compile_orders_limits_and_reports_status() {
    let sum =
        "  rules:\n  - name: r\n    authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [get-sum]}]}}\n";
    let mut docs = vec![
        // Created later, but listed first: must come second.
        policy("late", "2026-01-02T00:00:00Z", GW, sum),
        policy("early", "2026-01-01T00:00:00Z", GW, sum),
        policy(
            "admin-only",
            "2026-01-01T00:00:00Z",
            &GW.replace("name: gw}", "name: gw, sectionName: admin}"),
            sum,
        ),
        policy("on-backend", "2026-01-01T00:00:00Z", BACKEND, sum),
        policy(
            "missing",
            "2026-01-01T00:00:00Z",
            &GW.replace("name: gw", "name: nope"),
            sum,
        ),
        policy(
            "bad-source",
            "2026-01-01T00:00:00Z",
            GW,
            "  rules:\n  - name: r\n    source: {type: SPIFFE}\n",
        ),
    ];
    // Three more on the Gateway: admin-only, early, late, more0, more1 fill the limit of five
    // (sectionName does not matter for the limit), so the youngest, more2, is not accepted.
    for i in 0..3 {
        docs.push(policy(&format!("more{i}"), "2026-01-03T00:00:00Z", GW, sum));
    }
    let case = Case::new("compile", &docs);
    let out = case.dir.join("out");
    let o = toolgate(&["compile", "-f", case.input(), "-o", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("default/missing not accepted") && stderr.contains("TargetNotFound"),
        "{stderr}"
    );
    assert!(
        stderr.contains("default/bad-source not accepted"),
        "{stderr}"
    );
    assert!(
        stderr.contains("default/more2 not accepted") && stderr.contains("LimitPerTargetExceeded"),
        "{stderr}"
    );

    let http = read_json(&out.join("default.gw.http.plan.json"));
    let names: Vec<&str> = http["gateway"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default/early",
            "default/late",
            "default/more0",
            "default/more1"
        ]
    );
    assert_eq!(
        http["backends"]["xbackend/default/tools"]["allow"][0]["name"],
        "default/on-backend"
    );
    assert_eq!(http["hash"].as_str().unwrap().len(), 64);
    let admin = read_json(&out.join("default.gw.admin.plan.json"));
    let names: Vec<&str> = admin["gateway"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default/admin-only",
            "default/early",
            "default/late",
            "default/more0",
            "default/more1"
        ]
    );

    let status = read_json(&out.join("status.json"));
    let find = |name: &str| {
        status
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["policy"] == name)
            .cloned()
            .unwrap()
    };
    let cond = |name: &str| find(name)["ancestors"][0]["conditions"][0].clone();
    assert_eq!(cond("default/early")["status"], "True");
    assert_eq!(cond("default/missing")["reason"], "TargetNotFound");
    assert_eq!(cond("default/bad-source")["reason"], "Invalid");
    assert_eq!(cond("default/more2")["reason"], "LimitPerTargetExceeded");
    assert_eq!(
        find("default/early")["ancestors"][0]["controllerName"],
        "toolgate.dev/controller"
    );

    // --strict turns a policy that is not accepted into exit 1.
    let o = toolgate(&[
        "compile",
        "--strict",
        "-f",
        case.input(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn render_writes_a_runnable_configuration() {
    let case = Case::new(
        "render",
        &[policy("p", "2026-01-01T00:00:00Z", BACKEND, "")],
    );
    let o = case.render_wasm("out", &["--bind", "127.0.0.1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gw = case.dir.join("out/default.gw");
    let lds = read_json(&gw.join("lds.json"));
    let cds = read_json(&gw.join("cds.json"));
    let listeners = lds["resources"].as_array().unwrap();
    assert_eq!(listeners.len(), 2);
    let hcm = &listeners[0]["filter_chains"][0]["filters"][0]["typed_config"];
    let filters: Vec<&str> = hcm["http_filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.http.wasm",
            "envoy.filters.http.buffer",
            "envoy.filters.http.router"
        ]
    );
    // Paths are normalised before routing and the filter, so path rules see what the upstream gets.
    assert_eq!(
        (&hcm["normalize_path"], &hcm["merge_slashes"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    assert_eq!(
        hcm["path_with_escaped_slashes_action"],
        "UNESCAPE_AND_REDIRECT"
    );
    let plan = wasm_plan(hcm);
    assert!(plan["backends"]["xbackend/default/tools"]["allow"][0]["name"] == "default/p");
    let routes = &hcm["route_config"]["virtual_hosts"][0]["routes"];
    let rewrite = routes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["match"]["path_separated_prefix"] == "/plain")
        .unwrap();
    assert_eq!(rewrite["route"]["prefix_rewrite"], "/mcp");
    assert_eq!(rewrite["route"]["cluster"], "service/default/plain/9001");
    // No request timeout (Envoy's 15 s default would cut long tool calls and SSE streams); a stream
    // idle timeout instead.
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["route"]["timeout"] == "0s"),
        "{routes}"
    );
    assert_eq!(hcm["stream_idle_timeout"], "3600.000s");
    let xb = cds["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "xbackend/default/tools")
        .unwrap();
    let addr = &xb["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        ["socket_address"];
    assert_eq!(
        (addr["address"].as_str(), addr["port_value"].as_u64()),
        (Some("127.0.0.1"), Some(7001))
    );
    let envoy = read_json(&gw.join("envoy.json"));
    assert!(
        envoy["dynamic_resources"]["lds_config"]["path_config_source"]["path"]
            .as_str()
            .unwrap()
            .ends_with("lds.json")
    );

    // A missing wasm file is a usage error.
    let o = case.render("out", &["--wasm", "/nonexistent.wasm"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn explain_names_the_level_policy_rule_and_matcher() {
    let rules = "  rules:\n  - name: only-sum\n    source: {type: ServiceAccount, serviceAccount: {name: a}}\n    authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [get-sum]}]}}\n";
    let case = Case::new("explain", &[policy("p", "2026-01-01T00:00:00Z", GW, rules)]);
    let explain = |req: &str| case.explain(req, &[]);
    let body = |tool: &str| {
        format!(
            r#"body: {{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {{"name": "{tool}"}}}}"#
        )
    };
    let a = "principal: spiffe://cluster.local/ns/default/sa/a\n";
    let out = explain(&format!("listener: http\n{a}{}\n", body("echo")));
    assert!(out.contains("gateway level: DENIES"), "{out}");
    assert!(
        out.contains("default/p rule only-sum: no (mcp: no listed method (and params) matches)"),
        "{out}"
    );
    assert!(
        out.contains(r#"decision: DENY"#) && out.contains(r#""id":4"#),
        "{out}"
    );
    let out = explain(&format!("listener: http\n{a}{}\n", body("get-sum")));
    assert!(
        out.contains("decision: ALLOW (allow gateway=default/p:only-sum"),
        "{out}"
    );
    let out = explain(&format!("listener: http\n{}\n", body("get-sum")));
    assert!(out.contains("source: the caller has no identity"), "{out}");
    // Two listeners: without `listener:` the request is ambiguous, an error (2), not a denial (1).
    assert_eq!(
        case.explain_output(&body("get-sum"), &[]).status.code(),
        Some(2)
    );
}

#[test]
fn explain_runs_the_filters_lifecycle() {
    let rules = "  rules:\n  - name: posts\n    authorization: {type: Inline, methods: [POST]}\n";
    let ea = "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: ea, namespace: default, creationTimestamp: \"2026-01-01T00:00:00Z\"}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  action: ExternalAuth\n  externalAuth: {protocol: GRPC, grpc: {}, backendRef: {name: authz, port: 9000}}\n".to_string();
    let case = Case::new(
        "explain-lifecycle",
        &[policy("p", "2026-01-01T00:00:00Z", GW, rules), ea],
    );
    let explain = |req: &str| case.explain(req, &[]);
    let call =
        r#"body: {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo"}}"#;
    let out = explain(&format!("listener: http\n{call}\n"));
    assert!(out.contains("authorizer call 1: gRPC Check to cluster authz/default/authz/9000 (assumed: it allows)"), "{out}");
    // The engine's record: the ExternalAuth policy applies, then the Allow rule matches.
    assert!(out.contains("  gateway level: ExternalAuth policy default/ea applies: its authorizer is asked\n  gateway level: allows\n    default/p rule posts: matches"), "{out}");
    assert!(
        out.contains(
            "decision: ALLOW (allow gateway=default/p:posts backend=- authorized-by=default/ea)"
        ),
        "{out}"
    );
    let out = explain(&format!("listener: http\nauthorizers: deny\n{call}\n"));
    assert!(
        out.contains("decision: DENY (deny gateway: the authorizer of default/ea denied (HTTP 403)); reply HTTP 200"),
        "{out}"
    );
    // A large body is refused with 413 only where the filter holds it: a JSON POST.
    let big = "x".repeat(2 * 1024 * 1024);
    let out = explain(&format!(
        "listener: http\nheaders: {{content-type: text/plain}}\nbody: \"{big}\"\n"
    ));
    assert!(
        out.contains("decision: ALLOW"),
        "{}",
        &out[..out.len().min(2000)]
    );
    let out = explain(&format!("listener: http\nbody: \"{big}\"\n"));
    assert!(
        out.contains("decision: DENY (deny: body over the limit); reply HTTP 413"),
        "{}",
        &out[..out.len().min(2000)]
    );
}

#[test]
fn validate_rejects_regular_expressions_re2_rejects() {
    // `a)|(b` used to validate (the ^(?:...)$ wrapper balanced it) and then match any value starting
    // with a; RE2 rejects it, and so does Toolgate (docs/semantics.md §3).
    let dir = tmp("validate-re2");
    // `toolgate validate` of a policy `name` whose rule matches a header against `re`.
    let validate = |name: &str, re: &str| {
        let header = format!("  rules:\n  - name: r\n    authorization:\n      type: Inline\n      headers: [{{name: x-team, type: RegularExpression, value: '{re}'}}]\n");
        let input = write_inputs(&dir, &[policy(name, "2026-01-01T00:00:00Z", GW, &header)]);
        toolgate(&["validate", "-f", input.to_str().unwrap()])
    };
    let o = validate("bad", "a)|(b");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(r#"XAccessPolicy default/bad: Invalid: spec.rules[0].authorization.headers[0].value: invalid regular expression "a)|(b": unopened group"#),
        "{out}"
    );
    for (re, why) in [
        (
            "a{1001}",
            "repetition count 1001 exceeds RE2's limit of 1000",
        ),
        (
            r"\p{Alphabetic}",
            r"\p{Alphabetic} is not a Unicode class RE2 knows",
        ),
        ("[a-z&&[^aeiou]]", "is ambiguous"),
    ] {
        let o = validate("bad", re);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(
            out.contains(&format!("invalid regular expression {re:?}: ")) && out.contains(why),
            "{out}"
        );
    }
    let o = validate("good", r"\d+|(?i)blue");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn list_filtering_is_on_by_default_and_off_on_request() {
    let case = Case::new(
        "list-filtering",
        &[policy("p", "2026-01-01T00:00:00Z", BACKEND, "")],
    );
    let settings = |extra: &[&str]| -> Value {
        let out = format!("out{}", extra.len());
        let o = case.render_wasm(&out, extra);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        wasm_plan(&first_hcm(&case.dir.join(out).join("default.gw")))["settings"].clone()
    };
    // On by default, and then not written (plans without the setting keep their hash).
    assert_eq!(settings(&[]).get("listFiltering"), None);
    assert_eq!(
        settings(&["--list-filtering", "on"]).get("listFiltering"),
        None
    );
    assert_eq!(
        settings(&["--list-filtering=off"])["listFiltering"],
        Value::Bool(false)
    );
    // Anything but on/off is a usage error.
    let o = case.render_wasm("out", &["--list-filtering", "no"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("on or off"));
    // The same switch on compile and the controller; documented in the help.
    let o = toolgate(&[
        "compile",
        "-f",
        case.input(),
        "-o",
        &case.path("c"),
        "--list-filtering",
        "off",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for cmd in ["render", "controller"] {
        let help = String::from_utf8(toolgate(&[cmd, "--help"]).stdout).unwrap();
        assert!(help.contains("--list-filtering <on|off>"), "{cmd}: {help}");
    }
}

#[test]
fn render_honours_httproute_timeouts() {
    let case = Case::new(
        "render-timeouts",
        &[policy("p", "2026-01-01T00:00:00Z", BACKEND, "")],
    );
    let text = std::fs::read_to_string(&case.input).unwrap().replacen(
        "  - matches: [{path: {type: PathPrefix, value: /mcp}}]\n",
        "  - matches: [{path: {type: PathPrefix, value: /mcp}}]\n    timeouts: {request: 1m30s}\n",
        1,
    );
    assert!(text.contains("timeouts"), "the fixture changed: {text}");
    std::fs::write(&case.input, text).unwrap();
    let o = case.render_wasm("out", &["--stream-idle-timeout", "10m"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hcm = first_hcm(&case.dir.join("out/default.gw"));
    assert_eq!(hcm["stream_idle_timeout"], "600.000s");
    let routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap();
    let mcp = routes
        .iter()
        .find(|r| r["route"]["cluster"] == "xbackend/default/tools")
        .unwrap();
    assert_eq!(mcp["route"]["timeout"], "90.000s");
    let bad = case.render_wasm("out", &["--stream-idle-timeout", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn explain_reads_both_mcp_revisions_and_reports_header_mismatches() {
    let rules = "  rules:\n  - name: base\n    authorization: {type: Inline, mcp: {mcpBaseProtocolMethodsOption: MATCH_BASE_PROTOCOL_METHODS, methods: [{name: tools/call, params: [get-sum, \"ünïcødé\"]}, {name: resources/subscribe, params: [\"memo://a\"]}]}}\n";
    let case = Case::new(
        "explain-revisions",
        &[policy("p", "2026-01-01T00:00:00Z", GW, rules)],
    );
    let explain = |req: &str| case.explain(req, &[]);
    let meta = r#""_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}"#;
    let v26 = "MCP-Protocol-Version: \"2026-07-28\"";
    // 2026-07-28: server/discover is a base method.
    let out = explain(&format!(
        "listener: http\nheaders: {{{v26}, Mcp-Method: server/discover}}\nbody: {{\"jsonrpc\": \"2.0\", \"id\": \"d\", \"method\": \"server/discover\", \"params\": {{{meta}}}}}\n"
    ));
    assert!(
        out.contains("header Mcp-Method: \"server/discover\" agrees with the body's method"),
        "{out}"
    );
    assert!(
        out.contains("header MCP-Protocol-Version: \"2026-07-28\" agrees"),
        "{out}"
    );
    assert!(
        out.contains("decision: ALLOW (allow gateway=default/p:base"),
        "{out}"
    );
    // A non-ASCII tool name sent base64-encoded in Mcp-Name: decoded, agrees, allowed.
    let call = |name: &str| {
        format!(
            r#"body: {{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {{"name": "{name}", {meta}}}}}"#
        )
    };
    let out = explain(&format!(
        "listener: http\nheaders: {{{v26}, Mcp-Method: tools/call, Mcp-Name: \"=?base64?w7xuw69jw7hkw6k=?=\"}}\n{}\n",
        call("ünïcødé")
    ));
    assert!(
        out.contains(r#"(decoded "ünïcødé") agrees with the body's params.name"#),
        "{out}"
    );
    assert!(out.contains("decision: ALLOW"), "{out}");
    // A mismatching one: HTTP 400 -32020, as the filter answers, even though a rule allows the body.
    let out = explain(&format!(
        "listener: http\nheaders: {{{v26}, Mcp-Method: tools/call, Mcp-Name: \"=?base64?Z2V0LWVudg==?=\"}}\n{}\n",
        call("get-sum")
    ));
    assert!(
        out.contains(
            r#"header Mcp-Name: "=?base64?Z2V0LWVudg==?=" (decoded "get-env") DISAGREES with the body's params.name ("get-sum")"#
        ),
        "{out}"
    );
    // The walk stops at the header check: no rule is consulted, and none is shown.
    assert!(
        out.contains("HTTP 400, -32020; no rule is consulted") && !out.contains("gateway level"),
        "{out}"
    );
    assert!(out.contains(r#"reply HTTP 400 {"jsonrpc":"2.0","id":4,"error":{"code":-32020,"message":"Header mismatch: the Mcp-Name header does not match the body"}}"#), "{out}");
    // Mcp-Method, the protocol version, and a repeated field.
    let out = explain(&format!(
        "listener: http\nheaders: {{Mcp-Method: tools/list}}\n{}\n",
        call("get-sum")
    ));
    assert!(
        out.contains("header Mcp-Method: \"tools/list\" DISAGREES")
            && out.contains("reply HTTP 400"),
        "{out}"
    );
    let out = explain(&format!(
        "listener: http\nheaders: {{MCP-Protocol-Version: \"2025-11-25\"}}\n{}\n",
        call("get-sum")
    ));
    assert!(
        out.contains("deny: MCP-Protocol-Version header does not match the body")
            && out.contains("-32020"),
        "{out}"
    );
    let out = explain(&format!(
        "listener: http\nheaders: {{Mcp-Name: [get-sum, get-env]}}\n{}\n",
        call("get-sum")
    ));
    assert!(
        out.contains("header Mcp-Name: sent 2 times") && out.contains("reply HTTP 400"),
        "{out}"
    );
    // subscriptions/listen is explained as the set the filter judges.
    let listen = |uris: &str| {
        format!(
            r#"body: {{"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {{"notifications": {{"toolsListChanged": true, "resourceSubscriptions": [{uris}]}}, {meta}}}}}"#
        )
    };
    let out = explain(&format!(
        "listener: http\nheaders: {{{v26}, Mcp-Method: subscriptions/listen}}\n{}\n",
        listen(r#""memo://a""#)
    ));
    assert!(
        out.contains("resourceSubscriptions \"memo://a\", judged as resources/subscribe \"memo://a\"\n  gateway level: allows"),
        "{out}"
    );
    assert!(out.contains("decision: ALLOW"), "{out}");
    let out = explain(&format!(
        "listener: http\n{}\n",
        listen(r#""memo://a", "memo://b""#)
    ));
    assert!(
        out.contains("resourceSubscriptions \"memo://b\", judged as resources/subscribe \"memo://b\"\n  gateway level: DENIES"),
        "{out}"
    );
    assert!(
        out.contains(
            r#"decision: DENY (deny gateway: resources/subscribe 'memo://b' matched no rule of default/p (base)); reply HTTP 200 {"jsonrpc":"2.0","id":9,"#
        ),
        "{out}"
    );
    // 2025-11-25 on the same listener: the handshake and a session's GET stream are base methods.
    let out = explain("listener: http\nbody: {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": \"2025-11-25\"}}\n");
    assert!(out.contains("decision: ALLOW"), "{out}");
    let out = explain("listener: http\nmethod: GET\nheaders: {mcp-session-id: abc, MCP-Protocol-Version: \"2025-11-25\"}\n");
    assert!(out.contains("decision: ALLOW"), "{out}");
    // A GET carrying a body is not that stream: not read, not MCP (an empty body is no body).
    let out = explain(&format!(
        "listener: http\nmethod: GET\n{}\n",
        call("get-sum")
    ));
    assert!(
        out.contains("body: not MCP (GET with a body, which is not read)"),
        "{out}"
    );
    assert!(
        out.contains("decision: DENY") && out.contains("reply HTTP 403"),
        "{out}"
    );
    let out = explain("listener: http\nmethod: GET\nbody: \"\"\n");
    assert!(out.contains("decision: ALLOW"), "{out}");
}

#[test]
fn render_native_module_loads_the_dynamic_module_with_the_same_plan() {
    let case = Case::new(
        "render-native",
        &[policy("p", "2026-01-01T00:00:00Z", BACKEND, "")],
    );
    let module = case.path("libtoolgate_module.so");
    std::fs::write(&module, b"\x7fELF").unwrap();
    let o = case.render_wasm("wasm", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = case.render("native", &["--native-module", &module]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (w, n) = (
        first_hcm(&case.dir.join("wasm/default.gw")),
        first_hcm(&case.dir.join("native/default.gw")),
    );
    let filters: Vec<&str> = n["http_filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    // No buffer filter: the module holds the request itself (the lifecycle's `Host::holds_request`).
    assert_eq!(
        filters,
        [
            "envoy.filters.http.dynamic_modules",
            "envoy.filters.http.router"
        ]
    );
    let dm = &n["http_filters"][0]["typed_config"];
    assert_eq!(
        dm["@type"],
        "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
    );
    assert_eq!(dm["dynamic_module_config"]["name"], "toolgate_module");
    assert_eq!(dm["dynamic_module_config"]["do_not_close"], true);
    assert_eq!(
        dm["dynamic_module_config"]["module"]["local"]["filename"],
        module
    );
    // The same plan, and the same router after it.
    assert_eq!(
        dm["filter_config"]["value"],
        w["http_filters"][0]["typed_config"]["config"]["configuration"]["value"]
    );
    assert_eq!(w["http_filters"][1]["name"], "envoy.filters.http.buffer");
    assert_eq!(n["http_filters"][1], w["http_filters"][2]);
    let log = n["access_log"][0]["typed_config"]["log_format"]["text_format_source"]
        ["inline_string"]
        .as_str()
        .unwrap();
    assert!(
        log.contains("%FILTER_STATE(toolgate.decision:PLAIN)%"),
        "{log}"
    );

    // --wasm and --native-module exclude each other; one of them is required.
    let o = case.render_wasm("native", &["--native-module", &module]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(case.render("native", &[]).status.code(), Some(2));
}

/// docs/semantics.md §6a: a dry-run policy is compiled, counted and explained, never enforced; a
/// Gateway that denies by default denies what is not the base protocol where no policy applies.
#[test]
fn explain_prints_the_shadow_decision_and_the_default_deny() {
    let dry = "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: strict, creationTimestamp: \"2026-01-01T00:00:00Z\", annotations: {toolgate.dev/dry-run: \"true\"}}\nspec:\n  targetRefs: [{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}]\n  action: Allow\n  rules:\n  - name: sum\n    authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [get-sum]}]}}\n".to_string();
    let case = Case::new("explain-rollout", &[dry]);
    let explain = |req: &str, extra: &[&str]| case.explain(req, extra);
    let call = |tool: &str, path: &str| {
        format!("listener: http\npath: {path}\nbody: {{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {{\"name\": \"{tool}\"}}}}\n")
    };
    let out = explain(&call("echo", "/mcp"), &[]);
    assert!(
        out.contains("dry-run policies on this route (not enforced): default/strict"),
        "{out}"
    );
    assert!(
        out.contains(
            "decision: ALLOW (allow (no policy) shadow=deny backend: tools/call 'echo' matched no rule of default/strict (sum) dry-run=default/strict)"
        ),
        "{out}"
    );
    assert!(out.contains("shadow decision (dry-run policies enforced): DENY (deny backend: tools/call 'echo' matched no rule of default/strict (sum)): differs, counted as toolgate.shadow.deny"), "{out}");
    let out = explain(&call("get-sum", "/mcp"), &[]);
    assert!(
        out.contains("shadow decision (dry-run policies enforced): the same as the decision"),
        "{out}"
    );
    // Deny by default: the /plain route has no policy.
    let out = explain(&call("echo", "/plain"), &["--default-deny"]);
    assert!(out.contains("the Gateway denies by default"), "{out}");
    assert!(
        out.contains("decision: DENY (deny: no policy (default deny)); reply HTTP 200"),
        "{out}"
    );
    let init =
        "listener: http\npath: /plain\nbody: {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {}}\n";
    assert!(explain(init, &["--default-deny"]).contains("decision: ALLOW"));
    // The route under the (dry-run) policy: dry-run policies do not lift the default.
    let out = explain(&call("get-sum", "/mcp"), &["--default-deny"]);
    assert!(
        out.contains("decision: DENY (deny: no policy (default deny) shadow=allow"),
        "{out}"
    );
    // Status: accepted, in dry-run.
    let out_dir = case.dir.join("out");
    let o = toolgate(&[
        "compile",
        "-f",
        case.input(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let status = std::fs::read_to_string(out_dir.join("status.json")).unwrap();
    assert!(
        status.contains("Policy accepted (dry-run: not enforced)"),
        "{status}"
    );
    let plan = std::fs::read_to_string(out_dir.join("default.gw.http.plan.json")).unwrap();
    assert!(
        plan.contains(r#""dryRun": true"#) && !plan.contains("defaultDeny"),
        "{plan}"
    );
}

#[test]
fn a_dry_run_annotation_that_is_not_a_boolean_is_warned_about() {
    let p = "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, annotations: {toolgate.dev/dry-run: \"yes\"}}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  action: Allow\n".to_string();
    let case = Case::new("dry-run-warning", &[p]);
    let o = toolgate(&["compile", "-f", case.input(), "-o", &case.path("out")]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(r#"warning: policy default/p: annotation toolgate.dev/dry-run: "yes" is neither "true" nor "false": the policy is enforced"#), "{err}");
    let status = std::fs::read_to_string(case.dir.join("out/status.json")).unwrap();
    assert!(status.contains(r#""Policy accepted""#), "{status}");
}

/// docs/semantics.md §6b: the issue's `scope.split(' ')` validates, and explains the same whether the
/// scope claim is a space-separated string or a list (as jwt_authn's normalize_payload_in_metadata
/// writes it): `split` on a list splits every element.
#[test]
fn a_scope_split_rule_reads_a_string_or_a_list_scope() {
    let rules = "  rules:\n  - name: writers\n    authorization: {type: CEL, cel: {expression: \"'tools:write' in request.auth.claims.scope.split(' ')\"}}\n";
    let case = Case::new(
        "scope-split",
        &[policy("p", "2026-01-01T00:00:00Z", GW, rules)],
    );
    let o = toolgate(&["validate", "-f", case.input()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let call = r#"body: {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get-sum"}}"#;
    let explain = |scope: &str| {
        case.explain(
            &format!("listener: http\nclaims: {{sub: agent-7, scope: {scope}}}\n{call}\n"),
            &[],
        )
    };
    for scope in [
        r#"["tools:read", "tools:write"]"#,
        r#""tools:read tools:write""#,
    ] {
        let out = explain(scope);
        assert!(
            out.contains("decision: ALLOW (allow gateway=default/p:writers"),
            "{scope}: {out}"
        );
    }
    for scope in [r#"["tools:read"]"#, r#""tools:read""#, "[tools:read, 7]"] {
        let out = explain(scope);
        assert!(out.contains("decision: DENY"), "{scope}: {out}");
    }
}
