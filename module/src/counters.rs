//! What the module reports to Envoy besides its replies: counters (ids defined per configuration on
//! the main thread, incremented from any thread) and the key of the decision summary it writes into
//! the stream's filter state for the access log.

use toolgate_policy::lifecycle::Counter;

use crate::abi::*;

/// Filter state key of the decision summary, read by the access log (`%FILTER_STATE(...:PLAIN)%`).
pub(crate) const DECISION_KEY: &[u8] = b"toolgate.decision";

/// The counter of panics caught at a hook (not one of the engine's counters).
pub(crate) const PANIC_COUNTER: &str = "toolgate.module.panic";

/// Counter ids, defined on the main thread when the configuration is created.
#[derive(Clone, Copy)]
pub(crate) struct Counters {
    ids: [Option<usize>; Counter::ALL.len()],
    pub(crate) panic: Option<usize>,
}

impl Counters {
    pub(crate) const NONE: Counters = Counters {
        ids: [None; Counter::ALL.len()],
        panic: None,
    };

    pub(crate) fn define(config: FilterConfigEnvoyPtr) -> Self {
        let define = |name: &str| {
            let mut id = 0usize;
            // SAFETY: `config` is the pointer of the current `on_http_filter_config_new`; the name and
            // `id` live for the call; no labels.
            let status = unsafe {
                envoy_dynamic_module_callback_http_filter_config_define_counter(
                    config,
                    ModuleBuffer::of(name.as_bytes()),
                    std::ptr::null(),
                    0,
                    &mut id,
                )
            };
            (status == METRICS_SUCCESS).then_some(id)
        };
        let mut ids = [None; Counter::ALL.len()];
        for (id, counter) in ids.iter_mut().zip(Counter::ALL) {
            *id = define(counter.name());
        }
        Counters {
            ids,
            panic: define(PANIC_COUNTER),
        }
    }

    pub(crate) fn id(&self, counter: Counter) -> Option<usize> {
        Counter::ALL
            .iter()
            .position(|c| *c == counter)
            .and_then(|i| self.ids[i])
    }
}

/// Adds `n` to the counter `id` (none: not defined) of the stream of the filter `envoy`.
pub(crate) fn increment(envoy: FilterEnvoyPtr, id: Option<usize>, n: u64) {
    if let Some(id) = id {
        // SAFETY: `envoy` is a live filter's pointer; no labels.
        unsafe {
            envoy_dynamic_module_callback_http_filter_increment_counter(
                envoy,
                id,
                std::ptr::null(),
                0,
                n,
            );
        }
    }
}
