//! The engine's [`Host`] for one request: the lifecycle's reads and writes of the stream, made with
//! proxy-wasm host calls on the current context (calls to authorizers: `callout.rs`).

use toolgate_policy::lifecycle::{
    Callout, Counter, HeaderSink, Host, HostBase, LogLevel, Property,
};

use crate::abi;
use crate::base::{log, logs_at, now_ms};
use crate::counters::{Counters, DECISION};
use crate::header_map;

/// The host of a request.
pub(crate) struct FilterHost {
    pub(crate) context_id: u32,
    pub(crate) counters: Counters,
}

impl FilterHost {
    /// The host of a request that has no stream of its own.
    pub(crate) fn orphan(context_id: u32) -> Self {
        FilterHost {
            context_id,
            counters: Counters::default(),
        }
    }
}

impl HostBase for FilterHost {
    fn log(&mut self, level: LogLevel, message: &str) {
        log(level, message);
    }

    fn count(&mut self, counter: Counter) {
        self.counters.increment(counter, 1);
    }

    fn count_by(&mut self, counter: Counter, n: u64) {
        if n > 0 {
            self.counters.increment(counter, n);
        }
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl Host for FilterHost {
    /// The host's serialised map, handed over whole (`header_map.rs`): one host call, no copy.
    fn request_headers(&mut self, headers: &mut HeaderSink<'_>) -> bool {
        match abi::header_map(abi::REQUEST_HEADERS) {
            Some(map) => {
                header_map::hand_over(map, headers);
                true
            }
            None => false,
        }
    }

    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        abi::property(match property {
            Property::PeerUriSan => abi::PEER_URI_SAN,
            Property::ClusterName => abi::CLUSTER_NAME,
            Property::DestinationPort => abi::DESTINATION_PORT,
            Property::RequestProtocol => abi::REQUEST_PROTOCOL,
            Property::RequestedServerName => abi::REQUESTED_SERVER_NAME,
        })
    }

    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        abi::property(abi::METADATA)
    }

    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        abi::buffer(abi::REQUEST_BODY, size)
    }

    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
        abi::send_response(status, &header_map::serialize(headers), body)
    }

    fn resume(&mut self) {
        abi::resume_request();
    }

    fn call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        self.start_call(callout)
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        abi::replace_header(name, value);
    }

    fn add_request_header(&mut self, name: &str, value: &str) {
        abi::add_header(name, value);
    }

    fn remove_request_header(&mut self, name: &str) {
        abi::remove_header(abi::REQUEST_HEADERS, name);
    }

    fn record(&mut self, summary: &str) {
        abi::set_property(DECISION, summary.as_bytes());
    }

    fn logs_at(&mut self, level: LogLevel) -> bool {
        logs_at(level)
    }

    fn response_header(&mut self, lower_name: &str) -> Option<String> {
        abi::header(abi::RESPONSE_HEADERS, lower_name).and_then(|v| String::from_utf8(v).ok())
    }

    fn remove_response_header(&mut self, name: &str) {
        abi::remove_header(abi::RESPONSE_HEADERS, name);
    }

    fn response_body(&mut self, size: usize) -> Option<Vec<u8>> {
        abi::buffer(abi::RESPONSE_BODY, size)
    }

    fn replace_response_body(&mut self, size: usize, body: &[u8]) -> bool {
        abi::replace_buffer(abi::RESPONSE_BODY, size, body)
    }
}
