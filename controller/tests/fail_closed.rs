//! The CLI fails closed (docs/semantics.md §7): a document it cannot read is an error with its file
//! and line in every command, `--strict` fails on any policy left out of the plans, and `explain`
//! exits as `kubectl auth can-i` does.

use std::path::PathBuf;
use std::process::{Command, Output};

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .expect("toolgate runs")
}

/// A Gateway with an HTTP listener and a route to the XBackend `tools`.
const TOPOLOGY: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: toolgate
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
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
"#;

const GW: &str = "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}";
const BACKEND: &str = "{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}";

fn policy(name: &str, created: &str, target: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: {name}, creationTimestamp: \"{created}\"}}\nspec:\n  targetRefs: [{target}]\n  action: Allow\n{extra}"
    )
}

/// One test's folder, with the topology and the test's documents as its input (`in.yaml`).
struct Case {
    dir: PathBuf,
    input: PathBuf,
}

impl Case {
    fn new(name: &str, docs: &[String]) -> Case {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-fail-closed-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.yaml");
        std::fs::write(&input, format!("{TOPOLOGY}{}", docs.concat())).unwrap();
        Case { dir, input }
    }

    fn input(&self) -> &str {
        self.input.to_str().unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    /// `toolgate explain` of the request `req` (YAML).
    fn explain_output(&self, req: &str) -> Output {
        let request = self.path("req.yaml");
        std::fs::write(&request, req).unwrap();
        toolgate(&["explain", "-f", self.input(), "--request", &request])
    }

    /// A stand-in for the .wasm (render checks only that the file is there).
    fn wasm(&self) -> String {
        let wasm = self.path("filter.wasm");
        std::fs::write(&wasm, b"\0asm").unwrap();
        wasm
    }
}

/// `explain` gates a pipeline as `kubectl auth can-i` does: 0 when the request passes, 1 when it is
/// denied, 2 when there is no answer (bad input); the enforced decision counts, not a dry-run one.
#[test]
fn explain_exits_0_on_allow_1_on_deny_2_on_errors() {
    let rules =
        "  rules:\n  - name: sum\n    authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [get-sum]}]}}\n";
    let dry = format!("---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: dry, creationTimestamp: \"2026-01-01T00:00:00Z\", annotations: {{toolgate.dev/dry-run: \"true\"}}}}\nspec:\n  targetRefs: [{BACKEND}]\n  action: Allow\n  rules:\n  - name: puts\n    authorization: {{type: Inline, methods: [PUT]}}\n");
    let case = Case::new(
        "explain-exit",
        &[policy("p", "2026-01-01T00:00:00Z", GW, rules), dry],
    );
    let call = |tool: &str| {
        format!("listener: http\nbody: {{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {{\"name\": \"{tool}\"}}}}\n")
    };
    let code = |req: &str| case.explain_output(req).status.code();
    assert_eq!(code(&call("get-sum")), Some(0));
    assert_eq!(code(&call("echo")), Some(1));
    // The dry-run policy would deny get-sum: the request passes, and so does explain.
    let out = String::from_utf8(case.explain_output(&call("get-sum")).stdout).unwrap();
    assert!(
        out.contains("decision: ALLOW")
            && out.contains("shadow decision (dry-run policies enforced): DENY"),
        "{out}"
    );
    assert_eq!(code("listener: nope\n"), Some(2));
    assert_eq!(code("unknown: field\n"), Some(2));
    let missing = toolgate(&[
        "explain",
        "-f",
        case.input(),
        "--request",
        &case.path("missing.yaml"),
    ]);
    assert_eq!(missing.status.code(), Some(2));
}

/// A document `toolgate` cannot read (a misspelt `apiVersion`, no Kubernetes object, a kind it does
/// not read) is an error with its file and line in every command, never a policy silently left out.
#[test]
fn documents_the_cli_cannot_read_are_errors_in_every_command() {
    let good = policy("p", "2026-01-01T00:00:00Z", GW, "");
    let typo = good
        .replace("apiVersion:", "apiversion:")
        .replace("name: p,", "name: typo,");
    let req =
        "listener: http\nbody: {\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {\"name\": \"x\"}}\n";
    for (name, doc, says) in [
        (
            "typo",
            typo.as_str(),
            "not a Kubernetes object: no `apiVersion` (`apiversion` is another key: keys are case-sensitive)",
        ),
        ("foo", "---\nfoo: bar\n", "not a Kubernetes object: no `apiVersion`, no `kind`"),
        (
            "deployment",
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
            "apps/v1 Deployment \"web\": not a kind",
        ),
    ] {
        let case = Case::new(&format!("unreadable-{name}"), &[good.clone(), doc.to_string()]);
        // The document starts after the topology and the good policy.
        let line = format!("{TOPOLOGY}{good}").lines().count() + 2;
        let at = format!("{}:{line}: document 4: {says}", case.input());
        let validate = toolgate(&["validate", "-f", case.input()]);
        assert_eq!(validate.status.code(), Some(1), "{name}");
        assert!(
            String::from_utf8_lossy(&validate.stdout).contains(&at),
            "{name}: {at}\n{}",
            String::from_utf8_lossy(&validate.stdout)
        );
        for args in [
            vec!["compile", "-f", case.input(), "-o", &case.path("out")],
            vec!["compile", "--strict", "-f", case.input(), "-o", &case.path("out")],
            vec!["render", "-f", case.input(), "-o", &case.path("out"), "--wasm", &case.wasm()],
        ] {
            let o = toolgate(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{name} {args:?}: {err}");
            assert!(err.contains(&format!("error: {at}")), "{name} {args:?}: {err}");
        }
        assert!(!case.dir.join("out").exists(), "{name}: nothing is written");
        let o = case.explain_output(req);
        assert_eq!(o.status.code(), Some(2), "{name}");
    }
    // Another kind may be skipped on request; it is listed.
    let case = Case::new(
        "skip-other-kinds",
        &[
            good,
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n".into(),
        ],
    );
    let o = toolgate(&["validate", "--ignore-unknown-kinds", "-f", case.input()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("skipped: ")
            && err.contains("apps/v1 Deployment \"web\": not a kind Toolgate reads"),
        "{err}"
    );
}

/// `--strict` fails when any policy given is left out of the plans: not accepted, or accepted but
/// in no listener's plan (its XBackend unreached). A policy on a Gateway `--gateway-class` leaves
/// out is not left out.
#[test]
fn strict_fails_on_any_policy_left_out_of_the_plans() {
    let unrouted = "---\napiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: unrouted}\nspec: {mcp: {serviceName: other, port: 9000}}\n".to_string();
    let target = "{group: agentic.networking.x-k8s.io, kind: XBackend, name: unrouted}";
    let case = Case::new(
        "strict-no-plan",
        &[
            unrouted.clone(),
            policy("lost", "2026-01-01T00:00:00Z", target, ""),
        ],
    );
    let out = case.path("out");
    let o = toolgate(&["compile", "-f", case.input(), "-o", &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("policy default/lost left out: in no listener's plan"),
        "{err}"
    );
    let o = toolgate(&["compile", "--strict", "-f", case.input(), "-o", &out]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A second Gateway of another class, with a policy: in its own plans, not left out.
    let other = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: other}\nspec:\n  gatewayClassName: other\n  listeners: [{name: http, port: 8090, protocol: HTTP}]\n".to_string();
    let target = "{group: gateway.networking.k8s.io, kind: Gateway, name: other}";
    let case = Case::new(
        "strict-class",
        &[
            other,
            policy("elsewhere", "2026-01-01T00:00:00Z", target, ""),
        ],
    );
    let o = toolgate(&[
        "compile",
        "--strict",
        "--gateway-class",
        "toolgate",
        "-f",
        case.input(),
        "-o",
        &case.path("out"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
