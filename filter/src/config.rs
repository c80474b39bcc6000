//! A plugin configuration: a root context (one listener's plan in this VM) and the loading of its
//! plan, `proxy_on_configure` (refused, logged and counted by the engine's [`Plugin`]).

use std::cell::RefCell;

use toolgate_policy::lifecycle::{Counter, HostBase, LogLevel, Plugin, RootHost};

use crate::abi;
use crate::base::{log, now_ms, watch_log_level, IdMap};
use crate::counters::Counters;

/// A root context: one plugin instance (one listener's plan) in this VM.
struct Root {
    plugin: Plugin,
    counters: Counters,
}

thread_local! {
    static ROOTS: RefCell<IdMap<Root>> = RefCell::new(IdMap::default());
}

/// A root context was created: no plan yet (its requests are denied until one loads).
pub(crate) fn create(context_id: u32) {
    ROOTS.with(|roots| {
        if let Ok(mut roots) = roots.try_borrow_mut() {
            roots.insert(
                context_id,
                Root {
                    plugin: Plugin::default(),
                    counters: Counters::default(),
                },
            );
        }
    });
}

/// Loads the plugin configuration (the plan) of the root context `root_context_id`: false when the
/// host must reject the update (the engine refused a new plan while a good one is in force). A root
/// context this filter does not know, or cannot reach, has no plan to keep: true.
pub(crate) fn configure(root_context_id: u32, configuration_size: usize) -> bool {
    watch_log_level();
    let config = abi::buffer(abi::PLUGIN_CONFIGURATION, configuration_size).unwrap_or_default();
    ROOTS.with(|roots| {
        let Ok(mut roots) = roots.try_borrow_mut() else {
            return true;
        };
        let Some(root) = roots.get_mut(&root_context_id) else {
            return true;
        };
        if root.counters.undefined() {
            root.counters = Counters::define();
        }
        let mut host = LoadHost {
            counters: root.counters,
        };
        root.plugin.configure(&mut host, &config)
    })
}

/// Runs `f` on the plugin of the root context `context_id` and its counters, if there is one.
pub(crate) fn with_root<T>(context_id: u32, f: impl FnOnce(&Plugin, Counters) -> T) -> Option<T> {
    ROOTS.with(|roots| {
        let roots = roots.try_borrow().ok()?;
        let root = roots.get(&context_id)?;
        Some(f(&root.plugin, root.counters))
    })
}

/// Forgets a root context that is deleted (nothing if `context_id` is not one).
pub(crate) fn delete(context_id: u32) {
    ROOTS.with(|roots| {
        if let Ok(mut roots) = roots.try_borrow_mut() {
            roots.remove(&context_id);
        }
    });
}

/// The host of a plan load: logs, counts (on the root's counters), shared data.
struct LoadHost {
    counters: Counters,
}

impl HostBase for LoadHost {
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

impl RootHost for LoadHost {
    fn filters_responses(&self) -> bool {
        cfg!(feature = "list-filtering")
    }

    fn plugin_name(&mut self) -> String {
        abi::property(abi::PLUGIN_NAME)
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| "toolgate".to_string())
    }

    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>> {
        abi::shared_data(key)
    }

    fn shared_set(&mut self, key: &str, value: &[u8]) {
        abi::set_shared_data(key, value);
    }
}
