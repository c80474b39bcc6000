//! The request lifecycle over a fake host: arbitrary headers, a body delivered in arbitrary chunks
//! (or ending with trailers), authorizer answers of any shape (gRPC status and bytes, HTTP headers
//! and body, failure, late or wrong tokens), against the realistic plan and an ExternalAuth plan.
//! No panic; at most one decision per request; a request answered locally is never allowed; a
//! request is never left paused once every callback and answer has been delivered; no more
//! authorizer calls than the limit (`MAX_AUTHZ_CALLS`); and the decision `explain` shows
//! (`assert_explain_agrees`, authorizers taken to allow) is the lifecycle's when no authorizer was
//! asked, and an allow whenever the lifecycle allowed (every authorizer asked allowed then).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{assert_explain_agrees, FakeHost, Request, CLUSTER, EXTERNAL_AUTH_PLAN, REALISTIC_PLAN};
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest, MAX_AUTHZ_CALLS};
use toolgate_policy::lifecycle::headers::{classify, Classified};
use toolgate_policy::lifecycle::{Action, CallAnswer, Plugin};
use toolgate_policy::mcp::{read_body, NotMcp, ReadOptions};

#[derive(Debug, Arbitrary)]
enum Answer {
    Grpc { status: u32, message: Vec<u8> },
    Http { status: Option<u16>, headers: Vec<(String, String)>, body: Vec<u8> },
    Failed,
}

fn plugin(plan: &[u8]) -> Plugin {
    if let Err(e) = toolgate_policy::eval::Evaluator::load(plan) {
        panic!("a fixed plan is refused: {e}");
    }
    let mut p = Plugin::default();
    p.configure(&mut FakeHost::default(), plan);
    p
}

const CONTROL_BYTES: usize = 64;

thread_local! {
    static PLUGINS: [Plugin; 2] = [plugin(REALISTIC_PLAN), plugin(EXTERNAL_AUTH_PLAN)];
    static EVALUATORS: [Evaluator; 2] = [REALISTIC_PLAN, EXTERNAL_AUTH_PLAN].map(|p| Evaluator::load(p).expect("a fixed plan loads"));
}

/// The first value of a request header, as the lifecycle reads it ("" when absent).
fn first<'a>(headers: &[(&str, &'a str)], name: &str) -> &'a str {
    headers.iter().find(|(k, _)| *k == name).map_or("", |(_, v)| *v)
}

fuzz_target!(|data: &[u8]| {
    // The first CONTROL_BYTES bytes choose the plan, the chunks and the authorizers' answers; the
    // rest is the request (a seed: zero bytes, then a request seed of request_eval).
    let (control, request) = data.split_at(data.len().min(CONTROL_BYTES));
    let mut u = Unstructured::new(control);
    let Ok(which) = u.int_in_range(0..=1usize) else { return };
    let Ok(chunks) = u.int_in_range(1..=4usize) else { return };
    let Ok(trailers) = u.arbitrary::<bool>() else { return };
    let Ok(answers) = u.arbitrary::<Vec<(u8, u16, Answer)>>() else { return };
    let Ok(r) = Request::from_bytes(request) else { return };

    let mut host = FakeHost {
        headers: [(":method", r.method), (":path", r.path), (":authority", r.authority)]
            .into_iter()
            .chain(r.headers.iter().copied())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        principal: r.principal.map(str::to_string),
        cluster: r.backend.then(|| CLUSTER.to_string()),
        port: i64::from(r.port),
        protocol: "HTTP/2".into(),
        body: r.body.to_vec(),
        debug: true,
        now: 1_790_000_000_000,
        ..FakeHost::default()
    };
    PLUGINS.with(|plugins| {
        let mut req = plugins[which].request();
        let empty = r.body.is_empty();
        let mut paused = req.on_request_headers(&mut host, empty) == Action::Pause;
        if !empty {
            let len = r.body.len();
            for i in 1..=chunks {
                let size = len * i / chunks;
                let last = i == chunks && !trailers;
                paused = req.on_request_body(&mut host, size, last) == Action::Pause;
            }
            if trailers {
                paused = req.on_request_trailers(&mut host) == Action::Pause;
            }
        }
        // Answer the calls the lifecycle made, in order, with the fuzzer's answers; a few wrong
        // tokens and late answers are thrown in.
        let mut answers = answers.into_iter();
        let mut answered = 0;
        while answered < host.calls.len() {
            let token = host.calls[answered].token();
            let (skew, ms, a) = answers.next().unwrap_or((0, 0, Answer::Failed));
            host.now += u64::from(ms);
            let answer = match a {
                Answer::Grpc { status, message } => CallAnswer::Grpc { status: status % 20, message },
                Answer::Http { status, headers, body } => {
                    let mut h = headers;
                    if let Some(s) = status {
                        h.insert(0, (":status".into(), (s % 600).to_string()));
                    }
                    CallAnswer::Http { headers: h, body }
                }
                Answer::Failed => CallAnswer::Failed,
            };
            if skew % 8 == 1 {
                // Not the token the lifecycle waits for: ignored.
                let before = (host.allows(), host.denies(), host.replies.len());
                req.on_call_answer(&mut host, token.wrapping_add(1000), answer.clone());
                assert_eq!(before, (host.allows(), host.denies(), host.replies.len()));
            }
            req.on_call_answer(&mut host, token, answer);
            answered += 1;
            assert!(host.calls.len() <= MAX_AUTHZ_CALLS as usize, "more authorizer calls than the limit");
        }
        assert!(host.allows() + host.denies() <= 1, "two decisions for one request");
        if !host.replies.is_empty() {
            assert_eq!(host.allows(), 0, "answered locally and allowed");
            assert_eq!(host.replies.len(), 1);
        }
        // Paused by the last callback: an authorizer's answer must have resumed it, or a local
        // reply ended it.
        if paused {
            assert!(!host.replies.is_empty() || host.resumed > 0, "left paused: {r:?}");
        }

        // The same request as the lifecycle reads it from the host: the first value of each
        // header, the caller only when a SPIFFE ID, the body classified by its headers.
        if host.replies.iter().any(|(status, _, _)| *status == 413) {
            return; // over the body limit: refused before any decision
        }
        let headers: Vec<(&str, &str)> = host.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (method, path, authority) = (first(&headers, ":method"), first(&headers, ":path"), first(&headers, ":authority"));
        let req = HttpRequest {
            method,
            path,
            authority,
            port: r.port,
            headers: &headers,
            principal: r.principal.filter(|p| p.starts_with("spiffe://")),
            auth: None,
            time_ms: 1_790_000_000_000,
        };
        let classified = classify(method, first(&headers, "content-type"), first(&headers, "content-encoding"), empty);
        let read = match &classified {
            Classified::JsonBody { encoded: None } => read_body(r.body, ReadOptions { capture_params: true }),
            Classified::JsonBody { encoded: Some(e) } => Err(NotMcp::Encoded { encoding: e.clone() }),
            &Classified::BodyNotRead(method) => Err(NotMcp::BodyNotRead { method }),
            Classified::EmptyJsonPost | Classified::Http => Err(NotMcp::EmptyBody),
        };
        let body = match (&classified, &read) {
            (Classified::Http, _) => BodyInput::None,
            (_, Ok(b)) => BodyInput::Mcp(b),
            (_, Err(e)) => BodyInput::NotMcp(e),
        };
        let explained = EVALUATORS.with(|evs| assert_explain_agrees(&evs[which].route(host.cluster.as_deref()), &req, body));
        let allowed = host.allows() == 1;
        if host.calls.is_empty() {
            assert_eq!(allowed, explained, "explain and the lifecycle disagree: {r:?} {:?}", host.records);
        } else if allowed {
            assert!(explained, "the lifecycle allowed what explain denies: {r:?} {:?}", host.records);
        }
    });
});
