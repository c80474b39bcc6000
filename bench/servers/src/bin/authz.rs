//! `bench-authz [--listen ADDR] --principal SPIFFE_ID --tools a,b,c`: an Envoy ext_authz HTTP
//! authorization service with the rule of the benchmark's Toolgate policy: the caller (URI in the
//! `x-forwarded-client-cert` header Envoy sets from the verified client certificate) must be
//! PRINCIPAL, and the body must be a JSON-RPC `tools/call` of one of TOOLS. 200 allows, 403 denies.

#![forbid(unsafe_code)]
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// `URI=...` of the (last) element of an XFCC header value.
fn xfcc_uri(xfcc: &[u8]) -> Option<&[u8]> {
    let last = xfcc.rsplit(|&b| b == b',').next()?;
    last.split(|&b| b == b';')
        .find_map(|kv| kv.strip_prefix(b"URI="))
        .map(|v| {
            v.strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v)
        })
}

fn main() -> std::io::Result<()> {
    let (listen, args) = toolgate_bench_servers::listen_arg();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let principal = value("--principal").expect("--principal SPIFFE_ID");
    let tools: HashSet<String> = value("--tools")
        .expect("--tools a,b,c")
        .split(',')
        .map(str::to_string)
        .collect();
    static ALLOW: OnceLock<Vec<u8>> = OnceLock::new();
    static DENY: OnceLock<Vec<u8>> = OnceLock::new();
    let allow: &'static [u8] =
        ALLOW.get_or_init(|| toolgate_bench_servers::response(200, "OK", "text/plain", b""));
    let deny: &'static [u8] = DENY.get_or_init(|| {
        toolgate_bench_servers::response(403, "Forbidden", "text/plain", b"denied")
    });
    toolgate_bench_servers::serve(&listen, move |req| {
        let caller_ok =
            req.header("x-forwarded-client-cert").and_then(xfcc_uri) == Some(principal.as_bytes());
        let allowed = caller_ok
            && serde_json::from_slice::<Message<'_>>(req.body).is_ok_and(|m| {
                m.method.as_deref() == Some("tools/call")
                    && m.params
                        .and_then(|p| p.name)
                        .is_some_and(|n| tools.contains(n.as_ref()))
            });
        if allowed {
            allow
        } else {
            deny
        }
    })
}
