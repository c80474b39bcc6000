//! The native host (module/src, the `.so`'s sources built as an rlib by fuzz/module-rlib/) driven through its
//! exported hooks as Envoy calls them, over a fake of Envoy's callbacks (`fuzz/src/envoy.rs`):
//! the filter configuration Envoy passes (the realistic plan, the ExternalAuth plan, or arbitrary
//! bytes), then one stream: request headers, the body in 1-4 chunks or ending with trailers,
//! callout answers of any shape (HTTP callouts; gRPC calls as streamed callouts: headers, framed
//! data, trailers, completion or reset; callouts Envoy fails to start; answers for unknown ids),
//! scheduled events, a local reply re-entering the response hooks, and the response of an allowed
//! request.
//!
//! No panic, caught or not (`toolgate.module.panic` stays 0); the module only passes back the
//! pointers it was given; a request is decided once: answered locally or continued, never both and
//! never left paused; the decision summary agrees (`allow...` exactly when allowed); every scheduler
//! it creates is deleted. A request the engine cannot decide is denied: any refused plan (no valid
//! plan: 403, `deny: no valid plan loaded`) and a failed authorizer call or callout. Without calls,
//! the module decides as the engine's lifecycle over the policy crate's fake host does.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::envoy::{self, envoy_buffers, envoy_headers, State, CONFIG_ENVOY, FILTER_ENVOY};
use toolgate_fuzz::{FakeHost, Request, CLUSTER, EXTERNAL_AUTH_PLAN, REALISTIC_PLAN};
use toolgate_module::abi::*;
use toolgate_module::exports as h;
use toolgate_policy::eval::{Evaluator, MAX_AUTHZ_CALLS};
use toolgate_policy::jwt::module_config;
use toolgate_policy::lifecycle::{Action, Counter, Plugin};

const CONTROL_BYTES: usize = 64;
const PANIC: &str = "toolgate.module.panic";
const NAME: &[u8] = b"toolgate:default/gw/https";

#[derive(Debug, Arbitrary)]
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

/// A fixed plan's configuration, created once per thread (as Envoy keeps a listener's).
fn fixed_config(plan: &[u8]) -> FilterConfigModulePtr {
    let c = h::envoy_dynamic_module_on_http_filter_config_new(CONFIG_ENVOY, buf(NAME), buf(plan));
    assert!(!c.is_null(), "a fixed plan's configuration is refused");
    c
}

fn buf(b: &[u8]) -> EnvoyBuffer {
    EnvoyBuffer {
        ptr: b.as_ptr(),
        length: b.len(),
    }
}

thread_local! {
    static CONFIGS: [FilterConfigModulePtr; 2] = [fixed_config(REALISTIC_PLAN), fixed_config(EXTERNAL_AUTH_PLAN)];
    static PLUGINS: Plugin = {
        let mut p = Plugin::default();
        p.configure(&mut FakeHost::default(), REALISTIC_PLAN);
        p
    };
}

/// The request of an arbitrary-configuration input: POST /mcp, a tools/call.
fn fixed_request() -> Vec<u8> {
    let mut r = vec![0u8; toolgate_fuzz::ATTRIBUTE_BYTES];
    r.extend_from_slice(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"}}"#,
    );
    r
}

fn allows(s: &State) -> u64 {
    s.count(Counter::Allow.name()) + s.count(Counter::AllowNoPolicy.name())
}

/// Delivers `answer` for the callout `c` (and, with `skew`, one for an id the module never got first).
fn deliver(module: FilterModulePtr, c: &envoy::Callout, answer: Answer, skew: bool) -> bool {
    let ids: &[u64] = if skew { &[c.id + 1000, c.id] } else { &[c.id] };
    let failed = matches!(answer, Answer::Failed);
    for &id in ids {
        if c.grpc {
            match &answer {
                Answer::Grpc { status, message } => {
                    // The header lists outlive the hook calls that get pointers into them.
                    let status_200 = [(b":status".to_vec(), b"200".to_vec())];
                    let head = envoy_headers(&status_200);
                    h::envoy_dynamic_module_on_http_filter_http_stream_headers(
                        FILTER_ENVOY,
                        module,
                        id,
                        head.as_ptr(),
                        1,
                        false,
                    );
                    let mut frame = vec![0u8];
                    frame.extend((message.len() as u32).to_be_bytes());
                    frame.extend_from_slice(message);
                    let cut = frame.len() / 2;
                    let chunks = [frame[..cut].to_vec(), frame[cut..].to_vec()];
                    let data = envoy_buffers(&chunks);
                    h::envoy_dynamic_module_on_http_filter_http_stream_data(
                        FILTER_ENVOY,
                        module,
                        id,
                        data.as_ptr(),
                        2,
                        false,
                    );
                    let grpc_status = [(
                        b"grpc-status".to_vec(),
                        (status % 20).to_string().into_bytes(),
                    )];
                    let trailers = envoy_headers(&grpc_status);
                    h::envoy_dynamic_module_on_http_filter_http_stream_trailers(
                        FILTER_ENVOY,
                        module,
                        id,
                        trailers.as_ptr(),
                        1,
                    );
                    h::envoy_dynamic_module_on_http_filter_http_stream_complete(
                        FILTER_ENVOY,
                        module,
                        id,
                    );
                }
                Answer::Http {
                    status,
                    headers,
                    body,
                } => {
                    // Not a gRPC answer: no trailers, an unframed body.
                    let mut hs: Vec<(Vec<u8>, Vec<u8>)> = headers
                        .iter()
                        .map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes()))
                        .collect();
                    if let Some(s) = status {
                        hs.insert(0, (b":status".to_vec(), (s % 600).to_string().into_bytes()));
                    }
                    let head = envoy_headers(&hs);
                    h::envoy_dynamic_module_on_http_filter_http_stream_headers(
                        FILTER_ENVOY,
                        module,
                        id,
                        head.as_ptr(),
                        head.len(),
                        body.is_empty(),
                    );
                    let chunks = [body.clone()];
                    let data = envoy_buffers(&chunks);
                    h::envoy_dynamic_module_on_http_filter_http_stream_data(
                        FILTER_ENVOY,
                        module,
                        id,
                        data.as_ptr(),
                        1,
                        true,
                    );
                    h::envoy_dynamic_module_on_http_filter_http_stream_complete(
                        FILTER_ENVOY,
                        module,
                        id,
                    );
                }
                Answer::Failed => h::envoy_dynamic_module_on_http_filter_http_stream_reset(
                    FILTER_ENVOY,
                    module,
                    id,
                    0,
                ),
            }
        } else {
            let (status, headers, body) = match &answer {
                Answer::Http {
                    status,
                    headers,
                    body,
                } => (status.map(|s| s % 600), headers.clone(), body.clone()),
                Answer::Grpc { status, message } => {
                    (Some((*status % 600) as u16), Vec::new(), message.clone())
                }
                Answer::Failed => (None, Vec::new(), Vec::new()),
            };
            let mut hs: Vec<(Vec<u8>, Vec<u8>)> = headers
                .into_iter()
                .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
                .collect();
            if let Some(s) = status {
                hs.insert(0, (b":status".to_vec(), s.to_string().into_bytes()));
            }
            let head = envoy_headers(&hs);
            let chunks = [body];
            let data = envoy_buffers(&chunks);
            let (result, head_ptr) = if failed {
                (1, std::ptr::null())
            } else {
                (CALLOUT_SUCCESS, head.as_ptr())
            };
            h::envoy_dynamic_module_on_http_filter_http_callout_done(
                FILTER_ENVOY,
                module,
                id,
                result,
                head_ptr,
                head.len(),
                data.as_ptr(),
                1,
            );
        }
        envoy::run_scheduled(module, 8);
    }
    failed
}

fuzz_target!(|data: &[u8]| {
    // The first CONTROL_BYTES bytes choose the configuration, the chunks, the answers; the rest is
    // the request (as request_eval's inputs), or the configuration's bytes (mode 2).
    let (control, rest) = data.split_at(data.len().min(CONTROL_BYTES));
    let mut u = Unstructured::new(control);
    let Ok(mode) = u.int_in_range(0..=2usize) else {
        return;
    };
    let Ok(chunks) = u.int_in_range(1..=4usize) else {
        return;
    };
    let Ok(trailers) = u.arbitrary::<bool>() else {
        return;
    };
    let Ok(debug) = u.arbitrary::<bool>() else {
        return;
    };
    let Ok(refuse_callouts) = u.ratio(1, 16) else {
        return;
    };
    let Ok(respond) = u.arbitrary::<bool>() else {
        return;
    };
    let Ok(answers) = u.arbitrary::<Vec<(u8, Answer)>>() else {
        return;
    };
    let fixed = fixed_request();
    let (request, own_config) = if mode == 2 {
        (fixed.as_slice(), Some(rest))
    } else {
        (rest, None)
    };
    let Ok(r) = Request::from_bytes(request) else {
        return;
    };

    // The configuration: a fixed one, or arbitrary bytes (created and destroyed here).
    let config = match own_config {
        None => CONFIGS.with(|c| c[mode]),
        Some(bytes) => {
            assert!(h::envoy_dynamic_module_on_http_filter_per_route_config_new(
                buf(NAME),
                buf(bytes)
            )
            .is_null());
            h::envoy_dynamic_module_on_http_filter_config_new(
                CONFIG_ENVOY,
                buf(b"toolgate:fuzz/arbitrary"),
                buf(bytes),
            )
        }
    };
    // The plan in the module's configuration (a bare plan, or one beside what jwt_authn writes); a
    // configuration the module refuses leaves the stream without a plan too.
    let refused_plan = own_config
        .is_some_and(|b| module_config(b).map_or(true, |c| Evaluator::load(c.plan).is_err()));

    // One stream.
    let request_headers: Vec<(Vec<u8>, Vec<u8>)> = [
        (":method", r.method),
        (":path", r.path),
        (":authority", r.authority),
    ]
    .into_iter()
    .chain(r.headers.iter().copied())
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    let (panics, allowed_before) = envoy::with(|s| {
        let counters = (
            std::mem::take(&mut s.counter_names),
            std::mem::take(&mut s.counts),
        );
        *s = State::default();
        (s.counter_names, s.counts) = counters;
        s.request_headers = request_headers;
        s.principal = r.principal.map(|p| p.as_bytes().to_vec());
        s.cluster = r.backend.then(|| CLUSTER.as_bytes().to_vec());
        s.protocol = b"HTTP/2".to_vec();
        s.port = u64::from(r.port);
        s.debug = debug;
        s.refuse_callouts = refuse_callouts;
        (s.count(PANIC), allows(s))
    });
    let module = h::envoy_dynamic_module_on_http_filter_new(config, FILTER_ENVOY);
    assert!(!module.is_null(), "no filter for a stream");
    envoy::with(|s| s.filter = module as usize);
    let replied = || envoy::with(|s| !s.replies.is_empty());

    let empty = r.body.is_empty();
    let mut paused =
        h::envoy_dynamic_module_on_http_filter_request_headers(FILTER_ENVOY, module, empty)
            == HEADERS_STOP_ITERATION;
    envoy::run_scheduled(module, 8);
    if !empty {
        let len = r.body.len();
        let mut sent = 0;
        for i in 1..=chunks {
            let size = len * i / chunks;
            let last = i == chunks && !trailers;
            envoy::with(|s| {
                s.bodies[RECEIVED_REQUEST_BODY as usize] = vec![r.body[sent..size].to_vec()]
            });
            sent = size;
            let status =
                h::envoy_dynamic_module_on_http_filter_request_body(FILTER_ENVOY, module, last);
            envoy::with(|s| {
                if status == BODY_STOP_ITERATION_AND_BUFFER {
                    s.buffer_received(RECEIVED_REQUEST_BODY, BUFFERED_REQUEST_BODY);
                } else {
                    // Passed on upstream.
                    s.bodies[RECEIVED_REQUEST_BODY as usize].clear();
                    s.bodies[BUFFERED_REQUEST_BODY as usize].clear();
                }
            });
            paused = status == BODY_STOP_ITERATION_AND_BUFFER;
            envoy::run_scheduled(module, 8);
        }
        if trailers {
            paused = h::envoy_dynamic_module_on_http_filter_request_trailers(FILTER_ENVOY, module)
                == TRAILERS_STOP_ITERATION;
            envoy::run_scheduled(module, 8);
        }
    }

    // Answer the calls the module made, in order.
    let mut answers = answers.into_iter();
    let mut answered = 0;
    let mut failed_call = false;
    while let Some(c) = envoy::with(|s| s.callouts.get(answered).cloned()) {
        let (skew, a) = answers.next().unwrap_or((0, Answer::Failed));
        failed_call |= deliver(module, &c, a, skew % 8 == 1);
        answered += 1;
        assert!(
            answered <= MAX_AUTHZ_CALLS as usize,
            "more callouts than the engine's limit"
        );
    }

    let s = envoy::with(|s| s.clone());
    assert_eq!(
        s.count(PANIC),
        panics,
        "a panic was caught at a hook: {r:?}"
    );
    assert!(s.replies.len() <= 1, "two local replies: {:?}", s.replies);
    let replied_now = replied();
    let allowed = !replied_now && (!paused || s.continued > 0);
    assert!(
        !(replied_now && s.continued > 0),
        "answered locally and continued"
    );
    assert!(
        !paused || replied_now || s.continued > 0,
        "left paused: {r:?}"
    );
    assert!(allows(&s) - allowed_before <= 1, "two decisions");
    if let Some(d) = s.decision() {
        assert_eq!(
            d.starts_with(b"allow"),
            allowed,
            "the decision summary {:?} disagrees",
            String::from_utf8_lossy(d)
        );
    }
    for (status, _, _) in &s.replies {
        assert!((200..600).contains(status), "reply status {status}");
    }
    if refused_plan {
        assert_eq!(
            s.replies.first().map(|r| r.0),
            Some(403),
            "a request without a valid plan was not denied"
        );
        assert_eq!(s.decision(), Some(&b"deny: no valid plan loaded"[..]));
    }
    if failed_call || (refuse_callouts && !s.callouts.is_empty()) {
        assert!(!allowed, "allowed though an authorizer call failed: {r:?}");
    }
    if refuse_callouts && mode == 1 {
        assert!(s.callouts.is_empty());
    }

    // Without authorizers, the module decides as the lifecycle does over the policy crate's fake host.
    if mode == 0 {
        let mut host = FakeHost {
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
            debug,
            ..FakeHost::default()
        };
        PLUGINS.with(|p| {
            let mut req = p.request();
            let mut lpaused = req.on_request_headers(&mut host, empty) == Action::Pause;
            if !empty && host.replies.is_empty() {
                for i in 1..=chunks {
                    lpaused = req.on_request_body(
                        &mut host,
                        r.body.len() * i / chunks,
                        i == chunks && !trailers,
                    ) == Action::Pause;
                }
                if trailers {
                    lpaused = req.on_request_trailers(&mut host) == Action::Pause;
                }
            }
            let lallowed = host.replies.is_empty() && (!lpaused || host.resumed > 0);
            assert_eq!(
                allowed, lallowed,
                "the module and the lifecycle disagree: {r:?} {:?}",
                host.records
            );
            assert_eq!(
                s.replies.first().map(|r| r.0),
                host.replies.first().map(|r| r.0)
            );
        });
    }

    // The response of an allowed request: headers, the body (the request's bytes) in two chunks.
    if allowed && respond {
        envoy::with(|s| {
            s.response_headers = vec![
                (b":status".to_vec(), b"200".to_vec()),
                (
                    b"content-type".to_vec(),
                    if debug {
                        b"text/event-stream".to_vec()
                    } else {
                        b"application/json".to_vec()
                    },
                ),
            ];
        });
        let st = h::envoy_dynamic_module_on_http_filter_response_headers(
            FILTER_ENVOY,
            module,
            r.body.is_empty(),
        );
        assert!(st == HEADERS_CONTINUE || st == HEADERS_STOP_ITERATION);
        if !r.body.is_empty() {
            let cut = r.body.len() / 2;
            for (part, last) in [(&r.body[..cut], false), (&r.body[cut..], true)] {
                envoy::with(|s| s.bodies[RECEIVED_RESPONSE_BODY as usize] = vec![part.to_vec()]);
                if h::envoy_dynamic_module_on_http_filter_response_body(FILTER_ENVOY, module, last)
                    == BODY_STOP_ITERATION_AND_BUFFER
                {
                    envoy::with(|s| {
                        s.buffer_received(RECEIVED_RESPONSE_BODY, BUFFERED_RESPONSE_BODY)
                    });
                }
            }
        }
        assert_eq!(
            envoy::with(|s| s.count(PANIC)),
            panics,
            "a panic was caught at a response hook"
        );
    }

    h::envoy_dynamic_module_on_http_filter_stream_complete(FILTER_ENVOY, module);
    h::envoy_dynamic_module_on_http_filter_destroy(module);
    envoy::with(|s| {
        assert_eq!(
            s.schedulers_created, s.schedulers_deleted,
            "a scheduler not deleted"
        )
    });
    if own_config.is_some() {
        h::envoy_dynamic_module_on_http_filter_config_destroy(config);
    }
});
