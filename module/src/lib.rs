//! Toolgate's Envoy HTTP filter as an Envoy dynamic module (a native `.so`, Envoy 1.40's
//! dynamic-module ABI "v0.2.0"), over the engine's request lifecycle (`toolgate_policy::lifecycle`).
//! The second host of the engine beside the proxy-wasm filter (`filter/`), which it mirrors: it routes
//! Envoy's event hooks to the lifecycle and implements [`Host`](toolgate_policy::lifecycle::Host) and
//! [`RootHost`](toolgate_policy::lifecycle::RootHost) with ABI callbacks.
//! No decision logic here.
//!
//! No SDK (Envoy's Rust SDK is not on crates.io and is built with bindgen): the ABI functions used are
//! declared by hand in `abi.rs`, and checked against the pinned Envoy's exports by
//! `tests/e2e/test_native_abi.py`.
//!
//! Istio loads dynamic modules from 1.31 on only (and not through WasmPlugin): the controller keeps
//! rendering the Wasm filter for Istio; this module is for `toolgate render --native-module`.
//!
//! # Threads
//!
//! Envoy creates a filter configuration (`on_http_filter_config_new`) on the main thread and runs its
//! streams on the worker threads, concurrently. The engine's
//! [`Plugin`](toolgate_policy::lifecycle::Plugin) is not `Send` (it shares the loaded plan by `Rc`, as
//! a Wasm VM is single-threaded), so the configuration keeps the plan's bytes and each worker thread
//! loads its own `Plugin` from them on its first stream (as Envoy's Wasm runs one VM per worker). The
//! main thread loads the plan first, to log, count and refuse it (`config.rs`).
//!
//! # Files
//!
//! The same scheme as `filter/` (docs/hosts.md, "The two hosts' files"), one concept each:
//!
//! - `abi.rs`: Envoy's callbacks and the ABI's types, declared by hand.
//! - `exports.rs`: every hook Envoy calls (the module's exports).
//! - `host.rs`: the engine's `Host` for a request, on Envoy's callbacks.
//! - `config.rs`: a filter configuration, its plan loaded on the main thread and per worker thread.
//! - `stream.rs`: one stream's filter: its lifecycle and host, re-entered hooks, late call answers,
//!   the gRPC calls in flight.
//! - `callout.rs`: calls to authorizers (HTTP callouts; gRPC over a streamed callout) and their
//!   answers.
//! - `counters.rs`: counters and the decision's filter state key.
//! - `base.rs`: the log and the clock every host shares.
//! - `guard.rs`: how a hook runs: the panic guard, and what a busy stream or a panic gives each
//!   kind of hook (the module's alone: a panic in the Wasm filter traps).
//! - `refusal.rs`: an allowed list's response a hook could not filter, refused by the module itself.
//!
//! # The `unsafe` surface
//!
//! - `abi.rs`: the `extern "C"` declarations of Envoy's callbacks. Their signatures were transcribed
//!   from `abi.h`; a mismatch is undefined behaviour that no compiler checks (the ABI test checks the
//!   names only).
//! - Calling a callback (`host.rs`, `callout.rs`, `stream.rs`, `counters.rs`, `refusal.rs`,
//!   `base.rs`): every pointer passed is a live Rust slice or struct for the duration of the call;
//!   `filter_envoy_ptr` / `config_envoy_ptr` are the ones Envoy gave this hook (valid until
//!   `on_http_filter_destroy` / `on_http_filter_config_destroy`).
//! - Reading what Envoy returns (`EnvoyBuffer`, `EnvoyHttpHeader`): valid until the end of the current
//!   hook; copied out before any setter is called.
//! - The module's own objects: a `Box<Config>` and a `Box<Filter>` are turned into the
//!   `*_module_ptr`s Envoy hands back; they are borrowed (never as `&mut`: the mutable state is in a
//!   `RefCell`, so a hook re-entered from inside a callback, e.g. the response hooks of a local reply
//!   sent from a request hook, finds it busy instead of aliasing it) and freed exactly once in the
//!   matching `_destroy` hook. A filter borrows its configuration's counter ids (`&'static`, not
//!   checked by the compiler): Envoy's filter holds its configuration, which is destroyed only after
//!   the last of its filters.
//! - Panics: every hook runs inside `std::panic::catch_unwind` (`guard.rs`); a panic in a
//!   request hook denies the request (500, counted as `toolgate.module.panic`); in a response hook
//!   while the response is an allowed list's it refuses the response (`refusal.rs`: never the
//!   unfiltered list), as a re-entered response hook does then; elsewhere it is counted and logged.
//!   No panic unwinds into Envoy. This needs `panic = "unwind"`: the workspace's release profile
//!   aborts on panic, so `make module` builds with the `release-module` profile (a compile error
//!   stops any build of this crate with `panic = "abort"`).

// The exported hooks take Envoy's pointers as plain arguments (Envoy is the only caller, and the ABI
// is what makes them valid): each dereference is an `unsafe` block with its SAFETY note instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[cfg(panic = "abort")]
compile_error!("toolgate-module must be built with panic = \"unwind\" (cargo build --profile release-module -p toolgate-module; make module)");

// `abi` and `exports` are public for fuzz/ only (fuzz/module-rlib/ builds this file as an rlib): the
// fuzz target `module_hooks` calls the hooks as Envoy does, over a fake of the callbacks. The .so
// exports the same symbols either way.
#[doc(hidden)]
pub mod abi;
mod base;
mod callout;
mod config;
mod counters;
#[doc(hidden)]
pub mod exports;
mod guard;
mod host;
mod refusal;
mod stream;
