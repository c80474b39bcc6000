//! The `Mcp-*` request headers and the body they describe (docs/semantics.md §4): the check that
//! they agree, made before any policy, and how their values are read.

use super::HttpRequest;
use crate::mcp::McpMessage;

/// The request headers the evaluator reads by name, besides those named by the plan's header
/// matchers ([`crate::plan::HeaderMatch`]). A caller may pass only these (plus the matchers' names) in
/// [`HttpRequest::headers`] and get the same decisions: the Envoy filter copies no other header out of
/// the host. Keep in sync with every `req.header(..)` in this module.
pub const HEADERS_READ: [&str; 4] = [
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// One comparison of an `Mcp-*` header with a message (docs/semantics.md §4).
#[derive(Clone, Copy, Debug)]
pub(super) enum HeaderCheck<'a> {
    /// The field was sent `times` times: a mismatch.
    Repeated { header: &'static str, times: u32 },
    /// `sent` as compared (`decoded`: None when an encoded value does not decode).
    Compared {
        header: &'static str,
        sent: &'a str,
        decoded: Option<&'a str>,
        agrees: bool,
    },
    /// The message says nothing the header could be compared with.
    NothingToCompare { header: &'static str, sent: &'a str },
}

/// What the header check tells whoever records the walk (the walk's [`super::route::Trace`], of
/// which this is a part). Does nothing by default.
pub(super) trait HeaderTrace {
    fn header(&mut self, _message: Option<usize>, _msg: &McpMessage<'_>, _check: HeaderCheck<'_>) {}
}

/// docs/semantics.md §4: `Mcp-Method` must equal the message's method and `Mcp-Name` its `params.name`
/// (`params.uri` for resources methods); `Mcp-Name` on a message with neither is a mismatch.
/// `message`: the message's index in a batch, for `trace`.
pub(super) fn check_mcp_headers<T: HeaderTrace>(
    req: &HttpRequest<'_>,
    msg: &McpMessage<'_>,
    message: Option<usize>,
    trace: &mut T,
) -> Result<(), &'static str> {
    // The first value of each and how often it comes, in one pass over the headers (this runs for
    // every message).
    const NAMES: [&str; 3] = ["Mcp-Method", "Mcp-Name", "MCP-Protocol-Version"];
    let mut first: [Option<&str>; 3] = [None; 3];
    let mut times = [0u32; 3];
    for &(name, value) in req.headers {
        let i = match name {
            "mcp-method" => 0,
            "mcp-name" => 1,
            "mcp-protocol-version" => 2,
            _ => continue,
        };
        if let (Some(seen), Some(n)) = (first.get_mut(i), times.get_mut(i)) {
            *n = n.saturating_add(1);
            seen.get_or_insert(value);
        }
    }
    // Each may come once: with two fields, a server reading the last one (or the joined value) and
    // this check reading the first would disagree (the bypass corpus found it).
    if let Some((&times, header)) = times.iter().zip(NAMES).find(|(n, _)| **n > 1) {
        trace.header(message, msg, HeaderCheck::Repeated { header, times });
        return Err(header);
    }
    let [method, name, version] = first;
    let mut compare =
        |header: &'static str, sent: &str, decoded: Option<&str>, body: Option<&str>| {
            // An encoded value that does not decode matches nothing (not even an absent field).
            let agrees = decoded.is_some() && decoded == body;
            trace.header(
                message,
                msg,
                HeaderCheck::Compared {
                    header,
                    sent,
                    decoded,
                    agrees,
                },
            );
            if agrees {
                Ok(())
            } else {
                Err(header)
            }
        };
    if let Some(h) = method {
        compare(
            "Mcp-Method",
            h,
            mcp_header_value("mcp-method", h).as_deref(),
            msg.method.as_deref(),
        )?;
    }
    if let Some(h) = name {
        compare(
            "Mcp-Name",
            h,
            mcp_header_value("mcp-name", h).as_deref(),
            param_of(msg),
        )?;
    }
    // Where both say which revision the message is, they must agree.
    match (version, msg.protocol_version.as_deref()) {
        (Some(h), Some(v)) => compare("MCP-Protocol-Version", h, Some(h.trim()), Some(v))?,
        (Some(sent), None) => trace.header(
            message,
            msg,
            HeaderCheck::NothingToCompare {
                header: "MCP-Protocol-Version",
                sent,
            },
        ),
        _ => {}
    }
    Ok(())
}

/// A request header's value as policies and the body check see it (docs/semantics.md §4): `Mcp-Name` and
/// `Mcp-Param-*` values sent as `=?base64?…?=` (MCP 2026-07-28, SEP-2243, for values that are not
/// plain ASCII) decoded; None when such a value does not decode to UTF-8 (it then matches nothing: a
/// mismatch). The revision allows the form for those headers only, so an encoded `Mcp-Method` is
/// compared as sent (and is a mismatch), as a server reads it.
pub fn mcp_header_value<'v>(lower_name: &str, value: &'v str) -> Option<std::borrow::Cow<'v, str>> {
    use base64::Engine as _;
    let may_encode = lower_name == "mcp-name" || lower_name.starts_with("mcp-param-");
    let encoded = may_encode
        .then(|| value.strip_prefix("=?base64?")?.strip_suffix("?="))
        .flatten();
    match encoded {
        None => Some(std::borrow::Cow::Borrowed(value)),
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
    }
}

/// The value `params` matchers compare: `params.uri` for resources methods, else `params.name`.
pub(super) fn param_of<'m>(msg: &'m McpMessage<'_>) -> Option<&'m str> {
    match msg.method.as_deref() {
        Some(m) if m.starts_with("resources/") => msg.uri.as_deref(),
        _ => msg.name.as_deref(),
    }
}

/// docs/semantics.md §3: the methods MATCH_BASE_PROTOCOL_METHODS adds.
pub(crate) fn is_base_method(method: &str) -> bool {
    // MCP 2026-07-28: `server/discover` replaces `initialize`; `subscriptions/listen` is base for its
    // list-change parts (its resource subscriptions are checked one by one: `Route::step`).
    // MCP's tasks: a task belongs to the request that created it (a `tools/call` judged as any
    // other), and the server binds it to that request's authorization context; reading, listing
    // and cancelling it is part of the protocol, as `ping` is.
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "server/discover"
            | "subscriptions/listen"
            | "tasks/get"
            | "tasks/result"
            | "tasks/list"
            | "tasks/cancel"
    ) || method.starts_with("completion/")
        || method.starts_with("logging/")
        || method.starts_with("notifications/")
}
