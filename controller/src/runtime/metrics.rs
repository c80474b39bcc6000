//! The controller's operations endpoint (`--metrics-addr`): Prometheus `/metrics`, `/healthz`
//! (the process serves), `/readyz` (the watches are synced and a first pass ran).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// Counters and gauges of the reconcile loop.
#[derive(Default)]
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
    pub duration_micros_sum: AtomicU64,
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

    fn render(&self) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"));
        };
        counter("toolgate_controller_reconciles_total", "Reconcile passes.", self.reconciles.load(Ordering::Relaxed));
        counter("toolgate_controller_writes_total", "API writes (applies, deletes, status).", self.writes.load(Ordering::Relaxed));
        counter("toolgate_controller_plans_written_total", "WasmPlugins/TrafficExtensions applied or deleted.", self.plans_written.load(Ordering::Relaxed));
        out.push_str(&format!(
            "# HELP toolgate_controller_leader Whether this replica writes (holds the Lease with --leader-elect).\n# TYPE toolgate_controller_leader gauge\ntoolgate_controller_leader {}\n",
            u8::from(self.leader.load(Ordering::Relaxed))
        ));
        let sum = self.duration_micros_sum.load(Ordering::Relaxed) as f64 / 1e6;
        out.push_str(&format!(
            "# HELP toolgate_controller_reconcile_duration_seconds Time spent in passes.\n# TYPE toolgate_controller_reconcile_duration_seconds summary\ntoolgate_controller_reconcile_duration_seconds_sum {sum}\ntoolgate_controller_reconcile_duration_seconds_count {}\n",
            self.reconciles.load(Ordering::Relaxed)
        ));
        out.push_str("# HELP toolgate_controller_errors_total Failed passes by cause.\n# TYPE toolgate_controller_errors_total counter\n");
        for (label, n) in self.errors.lock().map(|e| e.clone()).unwrap_or_default() {
            out.push_str(&format!("toolgate_controller_errors_total{{error=\"{label}\"}} {n}\n"));
        }
        out.push_str("# HELP toolgate_controller_policies Policies by status reason.\n# TYPE toolgate_controller_policies gauge\n");
        for (reason, n) in self.policies.lock().map(|p| p.clone()).unwrap_or_default() {
            out.push_str(&format!("toolgate_controller_policies{{reason=\"{reason}\"}} {n}\n"));
        }
        out
    }
}

/// Serves the endpoint until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!("toolgate controller: metrics and probes on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let (status, body) = match req.uri().path() {
                        "/metrics" => (200, metrics.render()),
                        "/healthz" => (200, "ok\n".to_string()),
                        "/readyz" if metrics.ready.load(Ordering::Relaxed) => (200, "ready\n".to_string()),
                        "/readyz" => (503, "not ready\n".to_string()),
                        _ => (404, "not found\n".to_string()),
                    };
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
