//! The controller's operations endpoint (`--metrics-addr`): Prometheus `/metrics`, `/healthz`
//! (the process serves), `/readyz` (the watches are synced and a first pass ran).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Counters, gauges and histograms of the reconcile loop, which updates these fields; `/metrics`
/// exports them with `prometheus-client` ([`Exported`], read at each scrape).
pub struct Metrics {
    pub ready: AtomicBool,
    /// This replica writes (always, without --leader-elect).
    pub leader: AtomicBool,
    pub reconciles: AtomicU64,
    pub writes: AtomicU64,
    pub plans_written: AtomicU64,
    /// Reconcile errors by `Error` variant label.
    pub errors: Mutex<Vec<(&'static str, u64)>>,
    /// Policies by status reason, as of the last pass.
    pub policies: Mutex<Vec<(String, u64)>>,
    /// Seconds per pass.
    pub reconcile_seconds: Histogram,
    /// Seconds from the first pass that saw a policy's generation to the pass that wrote it
    /// Programmed on every ancestor (`enforcement`).
    pub programmed_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ready: AtomicBool::default(),
            leader: AtomicBool::default(),
            reconciles: AtomicU64::default(),
            writes: AtomicU64::default(),
            plans_written: AtomicU64::default(),
            errors: Mutex::default(),
            policies: Mutex::default(),
            // 1 ms to 16 s: a pass over a few objects takes milliseconds; thousands, seconds.
            reconcile_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            // 10 ms to 164 s: one pass when the API server answers at once, retries when not.
            programmed_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 15)),
        }
    }
}

impl Metrics {
    pub fn error(&self, label: &'static str) {
        if let Ok(mut errors) = self.errors.lock() {
            match errors.iter_mut().find(|(l, _)| *l == label) {
                Some((_, n)) => *n += 1,
                None => errors.push((label, 1)),
            }
        }
    }

    /// The Prometheus text exposition (format 0.0.4) of the current values.
    fn render(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exported(self.clone())));
        let mut out = String::new();
        // Writing into a String fails only when a metric fails to encode, which these do not.
        let _ = prometheus_text::encode(&mut out, &registry);
        out
    }
}

/// When each policy's generation was first seen, until a pass finds it Programmed on every ancestor
/// (`toolgate_controller_policy_programmed_seconds`).
#[derive(Default)]
pub struct ProgrammedClock(Mutex<HashMap<(String, String), Clock>>);

/// A policy's generation, and when it was first seen while it is not Programmed yet.
type Clock = (i64, Option<Instant>);

impl ProgrammedClock {
    /// The policies (namespace, name, generation) a pass sees: a new generation starts its clock,
    /// a deleted policy is forgotten.
    pub fn saw(&self, policies: impl IntoIterator<Item = (String, String, i64)>, now: Instant) {
        let Ok(mut clocks) = self.0.lock() else {
            return;
        };
        let mut seen = HashMap::with_capacity(clocks.len());
        for (ns, name, generation) in policies {
            let key = (ns, name);
            let clock = match clocks.remove(&key) {
                Some(c) if c.0 == generation => c,
                _ => (generation, Some(now)),
            };
            seen.insert(key, clock);
        }
        *clocks = seen;
    }

    /// The policy is Programmed on every ancestor: the seconds since its generation was first seen,
    /// once per generation.
    pub fn programmed(&self, ns: &str, name: &str, now: Instant) -> Option<f64> {
        let mut clocks = self.0.lock().ok()?;
        let (_, started) = clocks.get_mut(&(ns.to_string(), name.to_string()))?;
        started.take().map(|t| now.duration_since(t).as_secs_f64())
    }
}

/// The metrics as a `prometheus-client` collector. Counter names are given without `_total`:
/// the encoder appends it, so the series are `toolgate_controller_reconciles_total` and so on.
struct Exported(Arc<Metrics>);

impl std::fmt::Debug for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exported")
    }
}

impl Collector for Exported {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let m = &self.0;
        let reconciles = m.reconciles.load(Ordering::Relaxed);
        for (name, help, value) in [
            (
                "toolgate_controller_reconciles",
                "Reconcile passes.",
                reconciles,
            ),
            (
                "toolgate_controller_writes",
                "API writes (applies, deletes, status).",
                m.writes.load(Ordering::Relaxed),
            ),
            (
                "toolgate_controller_plans_written",
                "WasmPlugins/TrafficExtensions applied or deleted.",
                m.plans_written.load(Ordering::Relaxed),
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let leader = ConstGauge::new(i64::from(m.leader.load(Ordering::Relaxed)));
        leader.encode(encoder.encode_descriptor(
            "toolgate_controller_leader",
            "Whether this replica writes (holds the Lease with --leader-elect).",
            None,
            leader.metric_type(),
        )?)?;
        for (name, help, histogram) in [
            (
                "toolgate_controller_reconcile_duration_seconds",
                "Time spent in passes.",
                &m.reconcile_seconds,
            ),
            (
                "toolgate_controller_policy_programmed_seconds",
                "From the first pass that saw a policy's generation to its Programmed status.",
                &m.programmed_seconds,
            ),
        ] {
            histogram.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                histogram.metric_type(),
            )?)?;
        }
        let errors = m.errors.lock().map(|e| e.clone()).unwrap_or_default();
        let mut family = encoder.encode_descriptor(
            "toolgate_controller_errors",
            "Failed passes by cause.",
            None,
            MetricType::Counter,
        )?;
        for (label, n) in errors {
            ConstCounter::new(n).encode(family.encode_family(&[("error", label)])?)?;
        }
        let policies = m.policies.lock().map(|p| p.clone()).unwrap_or_default();
        let mut family = encoder.encode_descriptor(
            "toolgate_controller_policies",
            "Policies by status reason.",
            None,
            MetricType::Gauge,
        )?;
        for (reason, n) in policies {
            ConstGauge::new(n as i64)
                .encode(family.encode_family(&[("reason", reason.as_str())])?)?;
        }
        Ok(())
    }
}

/// Serves the endpoint until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "metrics and probes on http://{addr}");
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let (status, body) = match req.uri().path() {
                        "/metrics" => {
                            let mut response =
                                Response::new(Full::new(Bytes::from(metrics.render())));
                            response.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                hyper::header::HeaderValue::from_static(
                                    prometheus_text::CONTENT_TYPE,
                                ),
                            );
                            return Ok::<_, Infallible>(response);
                        }
                        "/healthz" => (200, "ok\n".to_string()),
                        "/readyz" if metrics.ready.load(Ordering::Relaxed) => {
                            (200, "ready\n".to_string())
                        }
                        "/readyz" => (503, "not ready\n".to_string()),
                        _ => (404, "not found\n".to_string()),
                    };
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    *response.status_mut() =
                        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_is_timed_once_to_programmed() {
        use std::time::Duration;
        let clock = ProgrammedClock::default();
        let t0 = Instant::now();
        let p = |generation| [("ns".to_string(), "p".to_string(), generation)];
        clock.saw(p(1), t0);
        clock.saw(p(1), t0 + Duration::from_secs(1)); // the same generation: the clock runs on
        assert_eq!(
            clock.programmed("ns", "p", t0 + Duration::from_secs(2)),
            Some(2.0)
        );
        assert_eq!(
            clock.programmed("ns", "p", t0 + Duration::from_secs(3)),
            None,
            "once"
        );
        clock.saw(p(2), t0 + Duration::from_secs(5));
        assert_eq!(
            clock.programmed("ns", "p", t0 + Duration::from_secs(6)),
            Some(1.0)
        );
        clock.saw([], t0 + Duration::from_secs(7));
        assert_eq!(
            clock.programmed("ns", "p", t0 + Duration::from_secs(8)),
            None,
            "deleted"
        );
    }

    #[test]
    fn the_exposition_keeps_the_names_and_labels() {
        let m = Arc::new(Metrics::default());
        m.reconciles.store(3, Ordering::Relaxed);
        m.writes.store(5, Ordering::Relaxed);
        m.plans_written.store(1, Ordering::Relaxed);
        m.leader.store(true, Ordering::Relaxed);
        for seconds in [0.0005, 0.0015, 1.0] {
            m.reconcile_seconds.observe(seconds);
        }
        m.programmed_seconds.observe(0.2);
        m.error("api");
        m.error("api");
        *m.policies.lock().unwrap() = vec![("Accepted".into(), 2), ("TargetNotFound".into(), 1)];
        let text = m.render();
        for line in [
            "# TYPE toolgate_controller_reconciles_total counter",
            "toolgate_controller_reconciles_total 3",
            "toolgate_controller_writes_total 5",
            "toolgate_controller_plans_written_total 1",
            "# TYPE toolgate_controller_leader gauge",
            "toolgate_controller_leader 1",
            "toolgate_controller_reconcile_duration_seconds_sum 1.002",
            "toolgate_controller_reconcile_duration_seconds_count 3",
            "toolgate_controller_reconcile_duration_seconds_bucket{le=\"0.001\"} 1",
            "toolgate_controller_reconcile_duration_seconds_bucket{le=\"0.002\"} 2",
            "toolgate_controller_reconcile_duration_seconds_bucket{le=\"1.024\"} 3",
            "toolgate_controller_reconcile_duration_seconds_bucket{le=\"+Inf\"} 3",
            "toolgate_controller_policy_programmed_seconds_bucket{le=\"0.16\"} 0",
            "toolgate_controller_policy_programmed_seconds_bucket{le=\"0.32\"} 1",
            "toolgate_controller_policy_programmed_seconds_count 1",
            "toolgate_controller_errors_total{error=\"api\"} 2",
            "# TYPE toolgate_controller_policies gauge",
            "toolgate_controller_policies{reason=\"Accepted\"} 2",
            "toolgate_controller_policies{reason=\"TargetNotFound\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing from\n{text}"
            );
        }
        assert!(
            !text.contains("_total_total") && !text.contains("# EOF"),
            "{text}"
        );
    }
}
