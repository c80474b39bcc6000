//! Toolgate's Envoy HTTP filter: the proxy-wasm ABI 0.2.1, implemented directly, over the engine's
//! request lifecycle (`toolgate_policy::lifecycle`). The first host of the engine beside the Envoy
//! dynamic module (`module/`), which it mirrors: it routes the host's callbacks to the lifecycle and
//! implements [`Host`](toolgate_policy::lifecycle::Host) and
//! [`RootHost`](toolgate_policy::lifecycle::RootHost) with host calls. No decision logic here: the
//! trait's documentation is the contract.
//!
//! No proxy-wasm SDK: its dispatcher and host-call wrappers panic on statuses and tokens they do not
//! expect (a panic kills the VM), and it exports every callback, which Envoy then calls on every
//! request. The exports here are exactly the callbacks the filter needs.
//!
//! Never panics on input: every host value is optional, every failure fails closed, and a callback
//! for an unknown context or token does nothing.
//!
//! # Files
//!
//! The same scheme as `module/` (docs/hosts.md, "The two hosts' files"):
//!
//! - `abi.rs`: the proxy-wasm host calls (imports), declared by hand, each behind a safe function.
//! - `exports.rs`: every callback the proxy calls (the module's exports, `filter/exports.txt`).
//! - `host.rs`: the engine's `Host` for a request, on host calls.
//! - `config.rs`: a root context (one listener's plan) and the loading of its plan.
//! - `stream.rs`: one HTTP context: its lifecycle and host, and the call answers delivered to it.
//! - `callout.rs`: calls to authorizers (gRPC and HTTP calls) and their answers.
//! - `counters.rs`: counters and the decision's filter state key.
//! - `base.rs`: the log and its level, the clock, and the maps by context id every part shares.
//! - `header_map.rs`: proxy-wasm's serialised header map, written and read.

mod abi;
mod base;
mod callout;
mod config;
mod counters;
mod exports;
mod header_map;
mod host;
mod stream;
