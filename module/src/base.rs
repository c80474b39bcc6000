//! What every host of the module shares (the engine's `HostBase`): Envoy's log and the clock.

use toolgate_policy::lifecycle::LogLevel;

use crate::abi::*;

pub(crate) fn log_level(l: LogLevel) -> u32 {
    match l {
        LogLevel::Debug => LOG_DEBUG,
        LogLevel::Info => LOG_INFO,
        LogLevel::Warn => LOG_WARN,
        LogLevel::Error => LOG_ERROR,
    }
}

pub(crate) fn log(level: LogLevel, message: &str) {
    // SAFETY: the message lives for the call.
    unsafe {
        envoy_dynamic_module_callback_log(log_level(level), ModuleBuffer::of(message.as_bytes()))
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
