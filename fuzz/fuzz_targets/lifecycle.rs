//! The request lifecycle over a fake host: arbitrary headers, a body delivered in arbitrary chunks
//! (or ending with trailers), authorizer answers of any shape (gRPC status and bytes, HTTP headers
//! and body, failure, late or wrong tokens), against the realistic plan and an ExternalAuth plan.
//! No panic; at most one decision per request; a request answered locally is never allowed; a
//! request is never left paused once every callback and answer has been delivered; no more
//! authorizer calls than the limit (`MAX_AUTHZ_CALLS`). And `explain`'s decision is the filter's:
//! the same request, callbacks and answers on a host that keeps the engine's record (as
//! `toolgate explain`'s does) get the same calls, replies, counters and access-log summaries, and
//! the record shows the decision (`assert_walk_shows`: the walk that decided ends as the summary
//! says, or at the authorizer call whose answer decided).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{
    assert_walk_shows, FakeHost, Request, CLUSTER, EXTERNAL_AUTH_PLAN, REALISTIC_PLAN,
};
use toolgate_policy::eval::{Record, WalkEnd, MAX_AUTHZ_CALLS};
use toolgate_policy::lifecycle::{Action, CallAnswer, Plugin};

#[derive(Clone, Debug, Arbitrary)]
enum Answer {
    Grpc {
        status: u32,
        message: Vec<u8>,
    },
    Http {
        status: Option<u16>,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
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
}

/// Delivers the request's callbacks and the authorizers' answers to `plugin`'s lifecycle on `host`;
/// whether the last callback paused the request.
fn drive(
    plugin: &Plugin,
    host: &mut FakeHost,
    chunks: usize,
    trailers: bool,
    answers: Vec<(u8, u16, Answer)>,
) -> bool {
    let mut req = plugin.request();
    let body = host.body.clone();
    let empty = body.is_empty();
    let mut paused = req.on_request_headers(host, empty) == Action::Pause;
    if !empty {
        let len = body.len();
        for i in 1..=chunks {
            let size = len * i / chunks;
            let last = i == chunks && !trailers;
            paused = req.on_request_body(host, size, last) == Action::Pause;
        }
        if trailers {
            paused = req.on_request_trailers(host) == Action::Pause;
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
            Answer::Grpc { status, message } => CallAnswer::Grpc {
                status: status % 20,
                message,
            },
            Answer::Http {
                status,
                headers,
                body,
            } => {
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
            req.on_call_answer(host, token.wrapping_add(1000), answer.clone());
            assert_eq!(before, (host.allows(), host.denies(), host.replies.len()));
        }
        req.on_call_answer(host, token, answer);
        answered += 1;
        assert!(
            host.calls.len() <= MAX_AUTHZ_CALLS as usize,
            "more authorizer calls than the limit"
        );
    }
    paused
}

fuzz_target!(|data: &[u8]| {
    // The first CONTROL_BYTES bytes choose the plan, the chunks and the authorizers' answers; the
    // rest is the request (a seed: zero bytes, then a request seed of request_eval).
    let (control, request) = data.split_at(data.len().min(CONTROL_BYTES));
    let mut u = Unstructured::new(control);
    let Ok(which) = u.int_in_range(0..=1usize) else {
        return;
    };
    let Ok(chunks) = u.int_in_range(1..=4usize) else {
        return;
    };
    let Ok(trailers) = u.arbitrary::<bool>() else {
        return;
    };
    let Ok(answers) = u.arbitrary::<Vec<(u8, u16, Answer)>>() else {
        return;
    };
    let Ok(r) = Request::from_bytes(request) else {
        return;
    };

    let fresh = FakeHost {
        headers: [
            (":method", r.method),
            (":path", r.path),
            (":authority", r.authority),
        ]
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
        let plugin = &plugins[which];
        // The filter's host, and explain's: the same host keeping the engine's record.
        let mut host = fresh.clone();
        let paused = drive(plugin, &mut host, chunks, trailers, answers.clone());
        let mut explained = FakeHost {
            trace: Some(Record::default()),
            ..fresh
        };
        drive(plugin, &mut explained, chunks, trailers, answers);

        assert!(
            host.allows() + host.denies() <= 1,
            "two decisions for one request"
        );
        if !host.replies.is_empty() {
            assert_eq!(host.allows(), 0, "answered locally and allowed");
            assert_eq!(host.replies.len(), 1);
        }
        // Paused by the last callback: an authorizer's answer must have resumed it, or a local
        // reply ended it.
        if paused {
            assert!(
                !host.replies.is_empty() || host.resumed > 0,
                "left paused: {r:?}"
            );
        }

        // explain decides as the filter does, and its record shows that decision.
        assert_eq!(
            explained.records, host.records,
            "explain and the filter record different decisions: {r:?}"
        );
        assert_eq!(
            explained.replies, host.replies,
            "explain and the filter reply differently: {r:?}"
        );
        assert_eq!(
            explained.calls, host.calls,
            "explain and the filter call differently: {r:?}"
        );
        assert_eq!(
            explained.counts, host.counts,
            "explain and the filter count differently: {r:?}"
        );
        assert_eq!(
            (explained.resumed, &explained.edits),
            (host.resumed, &host.edits)
        );
        let record = explained.trace.take().unwrap_or_default();
        for walk in [&record.enforced, &record.shadow].into_iter().flatten() {
            assert_walk_shows(walk, None);
        }
        let (Some(walk), Some(summary)) = (&record.enforced, host.records.last()) else {
            return;
        };
        match &walk.end {
            // The access log adds the shadow decision after the enforced one.
            Some(WalkEnd::Decided {
                allowed,
                summary: decided,
            }) => {
                let enforced = summary
                    .split_once(" shadow=")
                    .map_or(summary.as_str(), |(s, _)| s);
                assert_eq!(
                    enforced, decided,
                    "the record ends otherwise than the filter decided: {r:?}"
                );
                assert_eq!(
                    *allowed,
                    host.allows() == 1 && host.denies() == 0,
                    "{r:?} {summary}"
                );
            }
            // The authorizer's answer denied: the decision came from the call the walk ended at.
            Some(WalkEnd::Authorize { .. }) => assert!(
                !host.calls.is_empty() && host.allows() == 0,
                "{r:?} {summary}"
            ),
            None => panic!("a walk without an end: {walk:?}"),
        }
    });
});
