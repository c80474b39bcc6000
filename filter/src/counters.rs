//! What the filter reports to Envoy besides its replies: counters (ids defined per root context
//! when its first plan is configured) and the filter state key of the decision summary it writes for
//! the access log.

use toolgate_policy::lifecycle::Counter;

use crate::abi;

/// Filter state `wasm.toolgate_decision`, read by access logs (`%FILTER_STATE(...)%`).
pub(crate) const DECISION: &[u8] = b"toolgate_decision";

/// Counter ids, defined once per root context.
#[derive(Clone, Copy, Default)]
pub(crate) struct Counters([u32; Counter::ALL.len()]);

impl Counters {
    pub(crate) fn define() -> Self {
        let mut ids = [0; Counter::ALL.len()];
        for (id, counter) in ids.iter_mut().zip(Counter::ALL) {
            *id = abi::define_counter(counter.name());
        }
        Counters(ids)
    }

    /// Whether none is defined yet (or the host refused them all).
    pub(crate) fn undefined(&self) -> bool {
        self.0.iter().all(|id| *id == 0)
    }

    pub(crate) fn increment(&self, counter: Counter, n: u64) {
        if let Some(i) = Counter::ALL.iter().position(|c| *c == counter) {
            abi::increment(
                self.0.get(i).copied().unwrap_or(0),
                i64::try_from(n).unwrap_or(i64::MAX),
            );
        }
    }
}
