//! What every host of the filter shares (the engine's `HostBase`): the host's log and its level, the
//! clock, and the maps keyed by the host's ids.

use std::cell::Cell;
use std::collections::HashMap;

use toolgate_policy::lifecycle::LogLevel;

use crate::abi;

/// How often the host's log level is read again (a per-request host call for it measurably cost
/// (c) in `make bench`); a change through Envoy's `/logging` takes effect within this time.
const LOG_LEVEL_REFRESH_MS: u32 = 1000;

/// Maps keyed by the host's context ids and call tokens (Envoy's counters, not a client's input):
/// hashed with foldhash rather than std's SipHash, which costs several times more in the VM, at each
/// of a request's callbacks (docs/design/proxy-wasm-abi.md; `make vm-profile`).
pub(crate) type IdMap<V> = HashMap<u32, V, foldhash::fast::FixedState>;

thread_local! {
    /// The host's log level as last read (at plan load, then every [`LOG_LEVEL_REFRESH_MS`]).
    static LOG_LEVEL: Cell<u32> = const { Cell::new(u32::MAX) };
}

pub(crate) fn log_level(l: LogLevel) -> u32 {
    match l {
        LogLevel::Debug => abi::DEBUG,
        LogLevel::Info => abi::INFO,
        LogLevel::Warn => abi::WARN,
        LogLevel::Error => abi::ERROR,
    }
}

pub(crate) fn log(level: LogLevel, message: &str) {
    abi::log(log_level(level), message);
}

/// Whether the host logs at `level`, by the level last read.
pub(crate) fn logs_at(level: LogLevel) -> bool {
    LOG_LEVEL.with(|current| current.get() <= log_level(level))
}

/// Reads the host's log level now, and asks for a tick to read it again every
/// [`LOG_LEVEL_REFRESH_MS`] (`proxy_on_tick`: [`refresh_log_level`]).
pub(crate) fn watch_log_level() {
    refresh_log_level();
    abi::set_tick_period(LOG_LEVEL_REFRESH_MS);
}

pub(crate) fn refresh_log_level() {
    LOG_LEVEL.with(|l| l.set(abi::log_level()));
}

pub(crate) fn now_ms() -> u64 {
    abi::now_ms()
}
