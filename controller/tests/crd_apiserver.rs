//! The CRDs against a real Kubernetes API server (k8s.io/apiextensions-apiserver 1.36 with etcd,
//! started by `tests/k8s/apiserver.sh`, which installs it into a cache outside the clone when it is
//! missing). The CRDs of `crds/` must install and become Established (which also proves that their CEL
//! rules fit the server's cost budget); then every case of `tests/k8s/cases/` is created with
//! `kubectl create --dry-run=server`, and the server's verdict and messages are compared with the
//! expectation and with `toolgate validate`'s. If the server cannot start, this test fails.

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};

struct Server {
    script: PathBuf,
    prefix: PathBuf,
    run: PathBuf,
    port: u16,
    etcd_port: u16,
}

impl Server {
    fn start() -> Server {
        let root = common::repo_root();
        let prefix = match std::env::var_os("KCAS_PREFIX") {
            Some(p) => PathBuf::from(p),
            None => {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache")
                    });
                cache.join("toolgate/kcas")
            }
        };
        let run = std::env::temp_dir().join(format!("toolgate-kcas-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        let (port, etcd_port) = free_ports();
        let server = Server {
            script: root.join("tests/k8s/apiserver.sh"),
            prefix,
            run,
            port,
            etcd_port,
        };
        let out = server.script_cmd("start");
        if !out.status.success() {
            let log =
                std::fs::read_to_string(server.run.join("logs/apiserver.log")).unwrap_or_default();
            panic!(
                "the test API server did not start (tests/k8s/apiserver.sh start):\n{}\n{}\n--- apiserver.log (tail) ---\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                log.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        server
    }

    fn script_cmd(&self, verb: &str) -> Output {
        Command::new("bash")
            .arg(&self.script)
            .arg(verb)
            .env("KCAS_PREFIX", &self.prefix)
            .env("KCAS_RUN", &self.run)
            .env("KCAS_PORT", self.port.to_string())
            .env("KCAS_ETCD_PORT", self.etcd_port.to_string())
            .output()
            .expect("runs tests/k8s/apiserver.sh")
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(self.prefix.join("bin/kubectl"))
            .args(args)
            .env("KUBECONFIG", self.run.join("admin.kubeconfig"))
            .output()
            .expect("runs kubectl")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.script_cmd("stop");
        let _ = std::fs::remove_dir_all(&self.run);
    }
}

/// Two free ports on 127.0.0.1 for the API server and etcd (etcd also takes the next one for peers).
fn free_ports() -> (u16, u16) {
    let api = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for _ in 0..100 {
        let etcd = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if etcd != api
            && etcd
                .checked_add(1)
                .is_some_and(|p| p != api && TcpListener::bind(("127.0.0.1", p)).is_ok())
        {
            return (api, etcd);
        }
    }
    panic!("no free ports");
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The causes of a kubectl "is invalid" error (`The Kind "name" is invalid: <cause>` or a bullet list),
/// or `None` for other errors (e.g. strict decoding's BadRequest).
fn invalid_causes(stderr: &str) -> Option<Vec<String>> {
    let start = stderr.find(" is invalid: ")?;
    let rest = &stderr[start + " is invalid: ".len()..];
    let causes: Vec<String> =
        if rest.trim_start().starts_with('*') || rest.starts_with('\n') || rest.trim().is_empty() {
            rest.lines()
                .filter_map(|l| l.strip_prefix("* "))
                .map(str::to_string)
                .collect()
        } else {
            vec![rest.lines().next().unwrap_or("").to_string()]
        };
    Some(causes)
}

#[test]
#[ignore = "needs the test API server: run tests/k8s/run.sh (make test-k8s)"]
fn crds_and_cases_against_a_real_api_server() {
    let root = common::repo_root();
    let server = Server::start();

    let crds = root.join("crds");
    let applied = server.kubectl(&["apply", "--server-side", "-f", crds.to_str().unwrap()]);
    assert!(
        applied.status.success(),
        "kubectl apply -f crds/ failed:\n{}",
        text(&applied)
    );
    let established = server.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/xaccesspolicies.agentic.networking.x-k8s.io",
        "crd/xbackends.agentic.networking.x-k8s.io",
    ]);
    assert!(
        established.status.success(),
        "CRDs not Established:\n{}",
        text(&established)
    );

    let mut failures = Vec::new();
    let mut table = Vec::new();
    for case in common::cases() {
        let file = case.file.to_str().unwrap();
        let validate = common::toolgate_validate(&case.file);
        failures.extend(common::check_validate(&case, &validate));

        let server_out = if case.read_as.is_some() {
            server.kubectl(&["create", "-f", file])
        } else {
            server.kubectl(&["create", "--dry-run=server", "-f", file])
        };
        let server_text = text(&server_out);
        let server_ok = server_out.status.success();
        table.push(format!(
            "{:<58} server: {:<8} validate: {}",
            case.name(),
            if server_ok { "accepted" } else { "rejected" },
            if validate.code == 0 {
                "accepted"
            } else {
                "rejected"
            }
        ));

        if case.accepted {
            if !server_ok {
                failures.push(format!(
                    "{}: the server rejected an accepted case:\n{server_text}",
                    case.name()
                ));
            }
            if let Some(version) = &case.read_as {
                failures.extend(read_back(&server, &case, version));
            }
            continue;
        }
        if server_ok {
            failures.push(format!(
                "{}: the server accepted a rejected case",
                case.name()
            ));
            continue;
        }
        for m in &case.messages {
            if !server_text.contains(m.as_str()) {
                failures.push(format!(
                    "{}: the server's error lacks {m:?}:\n{server_text}",
                    case.name()
                ));
            }
        }
        // Agreement: toolgate validate reports exactly the server's causes.
        let stderr = String::from_utf8_lossy(&server_out.stderr).to_string();
        let mut ours = validate.causes();
        ours.sort();
        match invalid_causes(&stderr) {
            Some(mut theirs) => {
                theirs.sort();
                if theirs != ours {
                    failures.push(format!(
                        "{}: server and toolgate validate disagree\n  server:   {theirs:#?}\n  validate: {ours:#?}",
                        case.name()
                    ));
                }
            }
            None => {
                for cause in &ours {
                    let message = cause.split_once(": ").map(|(_, m)| m).unwrap_or(cause);
                    if !stderr.contains(message) {
                        failures.push(format!(
                            "{}: the server's error lacks validate's {message:?}:\n{stderr}",
                            case.name()
                        ));
                    }
                }
            }
        }
    }
    println!("{}", table.join("\n"));
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The object was created for real; read it through `version` and check it is there, whole.
fn read_back(server: &Server, case: &common::Case, version: &str) -> Vec<String> {
    let obj: serde_json::Value =
        yaml_serde::from_str(&std::fs::read_to_string(&case.file).unwrap()).unwrap();
    let kind = obj["kind"].as_str().unwrap().to_lowercase();
    let name = obj["metadata"]["name"].as_str().unwrap();
    let resource = format!("{kind}.{version}.agentic.networking.x-k8s.io");
    let got = server.kubectl(&["get", &resource, name, "-o", "json"]);
    if !got.status.success() {
        return vec![format!(
            "{}: cannot read {resource}/{name}:\n{}",
            case.name(),
            text(&got)
        )];
    }
    let got: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    let mut failures = Vec::new();
    let want_api = format!("agentic.networking.x-k8s.io/{version}");
    if got["apiVersion"] != want_api.as_str() {
        failures.push(format!(
            "{}: read back as {}, want {want_api}",
            case.name(),
            got["apiVersion"]
        ));
    }
    if got["spec"]["targetRefs"] != obj["spec"]["targetRefs"] {
        failures.push(format!(
            "{}: targetRefs changed on the way: {}",
            case.name(),
            got["spec"]
        ));
    }
    for (pointer, want) in &case.fields {
        if got.pointer(pointer) != Some(want) {
            failures.push(format!(
                "{}: {pointer} is {:?}, want {want}",
                case.name(),
                got.pointer(pointer)
            ));
        }
    }
    failures
}
