//! A filter configuration (one listener's plan) and its loading: once on the main thread, where the
//! plan is logged, counted and refused, and once per worker thread, on its first stream (the engine's
//! [`Plugin`] is not `Send`; the crate's header comment, "Threads").

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use toolgate_policy::jwt::{module_config, ModuleConfig, PayloadHeader, JWT_PAYLOAD_HEADER};
use toolgate_policy::lifecycle::{Counter, HostBase, LogLevel, Plugin, Request, RootHost};

use crate::abi::*;
use crate::base::{log, now_ms};
use crate::counters::Counters;

/// One filter configuration (one listener's plan), shared by the worker threads: read-only.
pub(crate) struct Config {
    /// Tells the per-thread plugins of this configuration apart (a freed configuration's address may
    /// be reused).
    pub(crate) id: u64,
    /// Dropped with the configuration: the per-thread plugins of dead configurations are pruned.
    pub(crate) alive: Arc<()>,
    /// The filter's name (`filter_name`), the engine's plugin name.
    pub(crate) name: String,
    pub(crate) plan: Vec<u8>,
    pub(crate) counters: Counters,
    /// Whether jwt_authn writes the payload header the module reads claims from (its configuration
    /// says so, or the header is never read).
    pub(crate) payload_header: PayloadHeader,
}

static NEXT_CONFIG_ID: AtomicU64 = AtomicU64::new(1);

/// The engine's shared data (last good plan per plugin), process-wide as Wasm's is per VM id.
static SHARED: Mutex<Option<HashMap<String, Vec<u8>>>> = Mutex::new(None);

thread_local! {
    /// This worker's plugin per configuration: a list searched in order, as there are few (one per
    /// listener's filter, plus the old ones until pruned); no hashing per request
    /// (docs/design/native-host.md).
    static PLUGINS: RefCell<Vec<(u64, Weak<()>, Plugin)>> = const { RefCell::new(Vec::new()) };
}

impl Config {
    /// A new filter configuration `name` of Envoy's `config_envoy`, from the module configuration
    /// `bytes` (`on_http_filter_config_new`), its plan loaded on the main thread: logged, counted,
    /// and refused (None: Envoy rejects the configuration and keeps the one in force) as the engine
    /// says.
    pub(crate) fn load(
        config_envoy: FilterConfigEnvoyPtr,
        name: String,
        bytes: &[u8],
    ) -> Option<Self> {
        let counters = Counters::define(config_envoy);
        let mut host = LoadHost {
            config: config_envoy,
            name: name.clone(),
            counters,
        };
        let ModuleConfig {
            plan,
            payload_header,
        } = match module_config(bytes) {
            Ok(c) => c,
            Err(e) => {
                host.count(Counter::PlanRejected);
                log(
                    LogLevel::Error,
                    &format!(
                        "toolgate: plugin {name}: REFUSED configuration ({e}); update rejected"
                    ),
                );
                return None;
            }
        };
        let plan = plan.to_vec();
        if !Plugin::default().configure(&mut host, &plan) {
            return None;
        }
        log_claims_source(&name, payload_header);
        Some(Config {
            id: NEXT_CONFIG_ID.fetch_add(1, Ordering::Relaxed),
            alive: Arc::new(()),
            name,
            plan,
            counters,
            payload_header,
        })
    }
}

/// The host of a plan load on the main thread: logs, counts (on the configuration), shared data.
struct LoadHost {
    config: FilterConfigEnvoyPtr,
    name: String,
    counters: Counters,
}

impl HostBase for LoadHost {
    fn log(&mut self, level: LogLevel, message: &str) {
        log(level, message);
    }

    fn count(&mut self, counter: Counter) {
        if let Some(id) = self.counters.id(counter) {
            // SAFETY: `config` is the pointer of the current `on_http_filter_config_new`.
            unsafe {
                envoy_dynamic_module_callback_http_filter_config_increment_counter(
                    self.config,
                    id,
                    std::ptr::null(),
                    0,
                    1,
                );
            }
        }
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl RootHost for LoadHost {
    fn plugin_name(&mut self) -> String {
        self.name.clone()
    }

    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>> {
        SHARED.lock().ok()?.as_ref()?.get(key).cloned()
    }

    fn shared_set(&mut self, key: &str, value: &[u8]) {
        if let Ok(mut shared) = SHARED.lock() {
            shared
                .get_or_insert_with(HashMap::new)
                .insert(key.to_string(), value.to_vec());
        }
    }
}

/// The host of a worker thread's load of a plan the main thread has loaded (and logged) already.
struct QuietHost(String);

impl HostBase for QuietHost {
    fn log(&mut self, _: LogLevel, _: &str) {}
    fn count(&mut self, _: Counter) {}
    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl RootHost for QuietHost {
    fn plugin_name(&mut self) -> String {
        self.0.clone()
    }
    fn shared_get(&mut self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn shared_set(&mut self, _: &str, _: &[u8]) {}
}

/// A new request's lifecycle under `config`'s plan, loading the plan on this thread the first time.
pub(crate) fn new_request(config: &Config) -> Request {
    PLUGINS.with(|plugins| {
        let Ok(mut plugins) = plugins.try_borrow_mut() else {
            return Plugin::default().request();
        };
        if let Some((_, _, p)) = plugins.iter().find(|(id, _, _)| *id == config.id) {
            return p.request();
        }
        plugins.retain(|(_, alive, _)| alive.strong_count() > 0);
        let mut plugin = Plugin::default();
        plugin.configure(&mut QuietHost(config.name.clone()), &config.plan);
        let request = plugin.request();
        plugins.push((config.id, Arc::downgrade(&config.alive), plugin));
        request
    })
}

/// docs/semantics.md §6b: what the module makes of token callers under this configuration, said once
/// at load, since a configuration that does not say jwt_authn writes the payload header leaves every
/// token caller without claims.
fn log_claims_source(name: &str, payload_header: PayloadHeader) {
    let message = match payload_header {
        PayloadHeader::JwtAuthn => {
            format!("toolgate: plugin {name}: token claims are read from {JWT_PAYLOAD_HEADER}, which the configuration says jwt_authn writes")
        }
        PayloadHeader::Unknown => format!(
            "toolgate: plugin {name}: token claims are not read: the configuration does not say that jwt_authn writes \
             {JWT_PAYLOAD_HEADER} (a client could have sent it); rules over claims match no one (docs/semantics.md §6b)"
        ),
    };
    log(LogLevel::Info, &message);
}
