//! Calls to ExternalAuth authorizers: one-shot HTTP callouts, and gRPC calls made as what they are
//! on the wire (an HTTP/2 POST of one length-prefixed message) on a streamed HTTP callout, and the
//! answers put together from the callouts' hooks (the stream they go to: `stream.rs`).

use toolgate_policy::lifecycle::{CallAnswer, Callout};

use crate::abi::*;
use crate::host::ModuleHost;

/// Tells a streamed callout's id (a gRPC call) from a one-shot callout's in [`ModuleHost::calls`].
pub(crate) const GRPC_CALL: u64 = 1 << 63;
/// gRPC status codes the module itself gives a call: INTERNAL (no status in the answer) and
/// UNAVAILABLE (not HTTP 200).
pub(crate) const GRPC_INTERNAL: u32 = 13;
pub(crate) const GRPC_UNAVAILABLE: u32 = 14;

/// The authority in a serialised `GrpcService { envoy_grpc: { cluster_name = 1, authority = 2 } = 1 }`
/// (what the engine hands proxy-wasm's `grpc_call`), if any.
fn grpc_authority(upstream: &[u8]) -> Option<&str> {
    fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i)?;
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    // Length-delimited field `field` of a message: its bytes.
    fn field(b: &[u8], field: u64) -> Option<&[u8]> {
        let mut i = 0;
        while i < b.len() {
            let key = varint(b, &mut i)?;
            if key & 7 != 2 {
                return None;
            }
            let len = usize::try_from(varint(b, &mut i)?).ok()?;
            let value = b.get(i..i.checked_add(len)?)?;
            i += len;
            if key >> 3 == field {
                return Some(value);
            }
        }
        None
    }
    std::str::from_utf8(field(field(upstream, 1)?, 2)?)
        .ok()
        .filter(|a| !a.is_empty())
}

/// A gRPC call on a streamed callout, as its hooks arrive.
#[derive(Default)]
pub(crate) struct GrpcCall {
    /// The streamed callout's id (Envoy's).
    pub(crate) id: u64,
    http_status: Option<u32>,
    grpc_status: Option<u32>,
    pub(crate) data: Vec<u8>,
}

impl GrpcCall {
    pub(crate) fn new(id: u64) -> Self {
        GrpcCall {
            id,
            ..GrpcCall::default()
        }
    }

    pub(crate) fn headers(&mut self, headers: &[(Vec<u8>, Vec<u8>)]) {
        for (k, v) in headers {
            let v = std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.trim().parse().ok());
            match k.as_slice() {
                b":status" => self.http_status = v,
                b"grpc-status" => self.grpc_status = v,
                _ => {}
            }
        }
    }

    /// The answer once the stream completed: the status, and the one message (uncompressed).
    pub(crate) fn answer(self) -> CallAnswer {
        let status = match (self.grpc_status, self.http_status) {
            (Some(s), _) => s,
            (None, Some(200)) => GRPC_INTERNAL,
            (None, _) => GRPC_UNAVAILABLE,
        };
        if status != 0 {
            return CallAnswer::Grpc {
                status,
                message: Vec::new(),
            };
        }
        let d = &self.data;
        match (d.first(), d.get(1..5)) {
            (Some(0), Some(len)) => {
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                match d.get(5..).filter(|m| m.len() == len) {
                    Some(message) => CallAnswer::Grpc {
                        status: 0,
                        message: message.to_vec(),
                    },
                    None => CallAnswer::Grpc {
                        status: GRPC_INTERNAL,
                        message: Vec::new(),
                    },
                }
            }
            _ => CallAnswer::Grpc {
                status: GRPC_INTERNAL,
                message: Vec::new(),
            },
        }
    }
}

/// Envoy's headers, copied out.
///
/// SAFETY: `headers` must be Envoy's array of `size` headers, valid for the current hook (or null).
pub(crate) unsafe fn copy_headers(
    headers: *const EnvoyHttpHeader,
    size: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    unsafe {
        if headers.is_null() {
            return Vec::new();
        }
        std::slice::from_raw_parts(headers, size)
            .iter()
            .map(|h| {
                let (k, v) = h.parts();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }
}

impl ModuleHost {
    /// Starts `callout` ([`toolgate_policy::lifecycle::Host::call`]): the lifecycle's token for its answer.
    pub(crate) fn start_call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        match *callout {
            // The ABI has no gRPC callout: a unary gRPC call is made as what it is on the wire, an
            // HTTP/2 POST of one length-prefixed message, on a streamed HTTP callout (whose hooks,
            // unlike the one-shot callout's, give the trailers that carry `grpc-status`).
            Callout::Grpc {
                cluster,
                upstream,
                service,
                method,
                message,
                timeout_ms,
            } => {
                let path = format!("/{service}/{method}");
                let authority = grpc_authority(upstream).unwrap_or(cluster);
                let timeout = format!("{timeout_ms}m");
                let headers = [
                    (":method", "POST"),
                    (":path", path.as_str()),
                    (":authority", authority),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                    ("grpc-timeout", timeout.as_str()),
                ];
                let mut pairs: Vec<ModuleHttpHeader> = headers
                    .iter()
                    .map(|(k, v)| ModuleHttpHeader::of(k, v))
                    .collect();
                let mut body = Vec::with_capacity(5 + message.len());
                body.push(0);
                body.extend(u32::try_from(message.len()).ok()?.to_be_bytes());
                body.extend_from_slice(message);
                let mut id = 0u64;
                // SAFETY: `envoy` is this filter's pointer; every buffer lives for the call.
                let status = unsafe {
                    envoy_dynamic_module_callback_http_filter_start_http_stream(
                        self.envoy,
                        &mut id,
                        ModuleBuffer::of(cluster.as_bytes()),
                        pairs.as_mut_ptr(),
                        pairs.len(),
                        ModuleBuffer::of(&body),
                        true,
                        u64::from(timeout_ms),
                    )
                };
                if status != CALLOUT_INIT_SUCCESS {
                    return None;
                }
                let token = self.next_token;
                self.next_token = self.next_token.wrapping_add(1);
                self.calls.push((id | GRPC_CALL, token));
                Some(token)
            }
            Callout::Http {
                cluster,
                headers,
                body,
                timeout_ms,
            } => {
                let mut pairs: Vec<ModuleHttpHeader> = headers
                    .iter()
                    .map(|(k, v)| ModuleHttpHeader::of(k, v))
                    .collect();
                let mut id = 0u64;
                // SAFETY: `envoy` is this filter's pointer; every buffer lives for the call.
                let status = unsafe {
                    envoy_dynamic_module_callback_http_filter_http_callout(
                        self.envoy,
                        &mut id,
                        ModuleBuffer::of(cluster.as_bytes()),
                        pairs.as_mut_ptr(),
                        pairs.len(),
                        ModuleBuffer::of(body),
                        u64::from(timeout_ms),
                    )
                };
                if status != CALLOUT_INIT_SUCCESS {
                    return None;
                }
                let token = self.next_token;
                self.next_token = self.next_token.wrapping_add(1);
                self.calls.push((id, token));
                Some(token)
            }
        }
    }
}

/// A one-shot HTTP callout's answer (`on_http_callout_done`), copied out of Envoy's arrays.
///
/// SAFETY: `headers` and `body_chunks` must be Envoy's arrays of `headers_size` headers and
/// `body_chunks_size` buffers for the current hook (or null).
pub(crate) unsafe fn http_answer(
    result: u32,
    headers: *const EnvoyHttpHeader,
    headers_size: usize,
    body_chunks: *const EnvoyBuffer,
    body_chunks_size: usize,
) -> CallAnswer {
    if result != CALLOUT_SUCCESS || headers.is_null() {
        return CallAnswer::Failed;
    }
    // SAFETY: as the caller promises; both are copied out.
    unsafe {
        let headers = std::slice::from_raw_parts(headers, headers_size)
            .iter()
            .map(|h| {
                let (k, v) = h.parts();
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let mut body = Vec::new();
        if !body_chunks.is_null() {
            for c in std::slice::from_raw_parts(body_chunks, body_chunks_size) {
                body.extend_from_slice(c.bytes());
            }
        }
        CallAnswer::Http { headers, body }
    }
}
