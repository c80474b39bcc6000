//! `toolgate controller`: the in-cluster half of Toolgate. Watches Gateways, HTTPRoutes,
//! ReferenceGrants, XBackends and XAccessPolicies (kube-rs watchers into reflector stores), and on any
//! change compiles them with the same code as `toolgate compile` (inventory → topology → plans and
//! statuses, a pure function) and writes the results: an Istio WasmPlugin (or TrafficExtension) per
//! Gateway listener with a policy, an EnvoyFilter per such Gateway that holds requests until the
//! filter decided (`output::desired_hold`), and each policy's `status`, all with server-side apply
//! (field manager `toolgate`), and only what changed, never over an object it does not own (`write`);
//! and GEP-713's condition on each policy target (`affected`, its own field manager). Level-triggered:
//! every pass recomputes everything from the stores, so fixing or deleting a policy re-admits the ones
//! it blocked, and a restart converges.

pub mod affected;
pub mod filter_image;
pub mod lease;
pub mod metrics;
pub mod names;
pub mod output;
pub mod programmed;
mod reconcile;
pub mod retry;
pub mod shared_port;
mod write;
mod written;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, store::Writer, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::{oneshot, watch, Notify};
use toolgate_policy::compile::{DEFAULT_CLUSTER_DOMAIN, DEFAULT_TRUST_DOMAIN};

use output::{OutputKind, FIELD_MANAGER, MANAGED_BY};
use written::Written;

#[derive(Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Only Gateways of this GatewayClass (repeatable; default: every Gateway).
    #[arg(long, value_name = "NAME")]
    pub gateway_class: Vec<String>,
    /// Trust domain of ServiceAccount sources.
    #[arg(long, default_value = DEFAULT_TRUST_DOMAIN)]
    pub trust_domain: String,
    /// The cluster's DNS domain (Istio cluster names: outbound|<port>||<svc>.<ns>.svc.<domain>).
    #[arg(long, default_value = DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,
    /// Where Istio loads the filter from (e.g. oci://registry/toolgate-filter:0.1.0).
    #[arg(long, value_name = "URL")]
    pub wasm_url: String,
    /// SHA-256 of the module at --wasm-url.
    #[arg(long, value_name = "HEX")]
    pub wasm_sha256: Option<String>,
    /// The outputs' `imagePullSecret`: a Secret in each Gateway's namespace that Istio's agent pulls
    /// the module with.
    #[arg(long, value_name = "NAME")]
    pub wasm_image_pull_secret: Option<String>,
    /// The outputs' `imagePullPolicy` (default: Istio's, IfNotPresent except for the tag `latest`).
    #[arg(long, value_enum, value_name = "POLICY")]
    pub wasm_image_pull_policy: Option<output::PullPolicy>,
    /// Registries (host:port, comma-separated; `*`: all) whose filter image manifest is read over
    /// plain HTTP, as Istio's WASM_INSECURE_REGISTRIES. Loopback registries always are.
    #[arg(long, value_name = "HOSTS", value_delimiter = ',')]
    pub wasm_insecure_registries: Vec<String>,
    /// The Istio resource written per Gateway listener.
    #[arg(long, value_enum, default_value = "wasmplugin")]
    pub output: OutputKind,
    /// Also write each listener's plan as a ConfigMap (`toolgate-plan-<gateway>-<listener>`, with a
    /// hash where that would be ambiguous or too long; key `plan.json`) for Envoy deployments without
    /// Istio (needs deploy/rbac-plan-configmaps.yaml).
    #[arg(long)]
    pub plan_configmaps: bool,
    /// How long an ExternalAuth authorizer may take (e.g. 5s).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::cli::parse_timeout_ms)]
    pub authz_timeout: u32,
    /// List filtering (docs/semantics.md §5) in the plans written: `on` (lists keep only the entries the caller
    /// could use) or `off` (lists pass unchanged).
    #[arg(long, value_name = "on|off", default_value = "on")]
    #[arg(value_parser = crate::cli::parse_on_off, action = clap::ArgAction::Set)]
    pub list_filtering: bool,
    /// Deny by default on every Gateway (docs/semantics.md §6a): on routes where no policy applies,
    /// only the MCP base protocol passes (a Gateway opts in alone with `toolgate.dev/default: deny`).
    #[arg(long)]
    pub default_deny: bool,
    /// Prometheus /metrics, /healthz and /readyz.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9090")]
    pub metrics_addr: std::net::SocketAddr,
    /// Run as one of several replicas: only the holder of a coordination.k8s.io/v1 Lease writes;
    /// the others watch and take over when its lease expires (or at once when it shuts down).
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, value_name = "NAME", default_value = "toolgate-controller")]
    pub leader_elect_lease: String,
    /// The Lease's namespace (default: the client's: in a pod, the pod's namespace).
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// This replica's name in the Lease (default: $POD_NAME, else the host name).
    #[arg(long, value_name = "NAME")]
    pub leader_elect_identity: Option<String>,
    /// How long followers wait after the Lease record last changed before taking it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = crate::cli::parse_timeout_ms)]
    pub leader_elect_lease_duration: u32,
    /// How long the leader keeps writing without renewing the Lease (shorter than the lease duration).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cli::parse_timeout_ms)]
    pub leader_elect_renew_deadline: u32,
    /// How often the Lease is tried or renewed.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::cli::parse_timeout_ms)]
    pub leader_elect_retry_period: u32,
    /// Write a line per pass with the number of writes (for tests and debugging).
    #[arg(long, value_name = "FILE", hide = true)]
    pub trace: Option<PathBuf>,
}

/// Errors of a reconcile pass, one variant per cause (the log names it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("the watched resources are not served ({0}): are the CRDs installed?")]
    NotServed(String),
    #[error("metrics endpoint: {0}")]
    Metrics(#[from] std::io::Error),
    #[error("leader election: {0}")]
    Lease(#[from] lease::LeaseError),
    /// An output could not be written (the policies it carries are not Programmed).
    #[error("writing {0}")]
    Write(String),
}

impl Error {
    /// The `error` label of `toolgate_controller_errors_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Client(_) => "client",
            Error::NotServed(_) => "not_served",
            Error::Metrics(_) => "metrics",
            Error::Lease(_) => "lease",
            Error::Write(_) => "write",
        }
    }
}

fn gvk(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

struct Watched {
    policies: Store<DynamicObject>,
    backends: Store<DynamicObject>,
    gateways: Store<DynamicObject>,
    routes: Store<DynamicObject>,
    grants: Store<DynamicObject>,
    /// Namespaces, for `allowedRoutes.namespaces.selector`.
    namespaces: Store<DynamicObject>,
    outputs: write::Cache,
    /// The EnvoyFilters that hold requests (`output::desired_hold`).
    holds: write::Cache,
    /// With `--plan-configmaps`.
    configmaps: Option<write::Cache>,
}

impl Watched {
    /// Starts the watches; every event wakes the reconciler (`changed`).
    fn start(
        client: &Client,
        args: &ControllerArgs,
        policy_api: &ApiResource,
        output_api: &ApiResource,
        hold_api: &ApiResource,
        changed: &Arc<Notify>,
    ) -> Self {
        let managed = format!("{MANAGED_BY}={FIELD_MANAGER}");
        Watched {
            policies: watch(client, policy_api.clone(), changed.clone(), None),
            backends: watch(client, affected::XBACKEND.api(), changed.clone(), None),
            gateways: watch(client, affected::GATEWAY.api(), changed.clone(), None),
            routes: watch(
                client,
                gvk("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"),
                changed.clone(),
                None,
            ),
            grants: watch(
                client,
                gvk(
                    "gateway.networking.k8s.io",
                    "v1beta1",
                    "ReferenceGrant",
                    "referencegrants",
                ),
                changed.clone(),
                None,
            ),
            namespaces: watch(
                client,
                gvk("", "v1", "Namespace", "namespaces"),
                changed.clone(),
                None,
            ),
            outputs: write::Cache::watch(client, output_api.clone(), changed.clone(), &managed),
            holds: write::Cache::watch(client, hold_api.clone(), changed.clone(), &managed),
            configmaps: args.plan_configmaps.then(|| {
                write::Cache::watch(
                    client,
                    reconcile::configmap_api(),
                    changed.clone(),
                    &managed,
                )
            }),
        }
    }

    /// Waits until every watch has listed once (a minute at most: the kind is not served).
    async fn synced(&self, args: &ControllerArgs) -> Result<(), Error> {
        for (name, store) in [
            ("XAccessPolicy", &self.policies),
            ("XBackend", &self.backends),
            ("Gateway", &self.gateways),
            ("HTTPRoute", &self.routes),
            ("ReferenceGrant", &self.grants),
            ("Namespace", &self.namespaces),
            (args.output.kind(), &self.outputs.store),
            ("EnvoyFilter", &self.holds.store),
        ] {
            tokio::time::timeout(Duration::from_secs(60), store.wait_until_ready())
                .await
                .map_err(|_| Error::NotServed(name.to_string()))?
                .map_err(|_| Error::NotServed(name.to_string()))?;
        }
        if let Some(write::Cache { store, .. }) = &self.configmaps {
            tokio::time::timeout(Duration::from_secs(60), store.wait_until_ready())
                .await
                .map_err(|_| Error::NotServed("ConfigMap".into()))?
                .map_err(|_| Error::NotServed("ConfigMap".into()))?;
        }
        Ok(())
    }
}

struct Context {
    metrics: Arc<metrics::Metrics>,
    client: Client,
    args: ControllerArgs,
    policy_api: ApiResource,
    output_api: ApiResource,
    hold_api: ApiResource,
    written: Written,
    programmed: metrics::ProgrammedClock,
    /// The filter image's plan version, once read (`filter_image`; `None` until then or for a URL
    /// that is not `oci://`).
    filter: Arc<std::sync::Mutex<Option<filter_image::FilterVersion>>>,
}

/// A store fed by a watcher; every event wakes the reconciler.
fn watch(
    client: &Client,
    ar: ApiResource,
    changed: Arc<Notify>,
    selector: Option<&str>,
) -> Store<DynamicObject> {
    watch_with(client, ar, changed, selector, Arc::default())
}

/// `watch`, and whether the watch is established (`write::Cache`): false from an error until the
/// watcher has listed again or seen a change, since the store misses whatever happened meanwhile (a
/// CRD deleted takes its objects with it, and the watch sees no deletion).
fn watch_with(
    client: &Client,
    ar: ApiResource,
    changed: Arc<Notify>,
    selector: Option<&str>,
    current: Arc<std::sync::atomic::AtomicBool>,
) -> Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let writer = Writer::new(ar);
    let store = writer.as_reader();
    let mut config = watcher::Config::default();
    if let Some(s) = selector {
        config = config.labels(s);
    }
    let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Err(e) => {
                    current.store(false, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!("watch: {e}");
                }
                Ok(
                    watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_),
                ) => current.store(true, std::sync::atomic::Ordering::Relaxed),
                Ok(_) => {}
            }
            changed.notify_one();
        }
    });
    store
}

/// The controller until it is stopped (SIGTERM, SIGINT) or fails; `toolgate controller` runs it
/// (crate::commands::controller). Long: start-up in order (metrics, watches, leadership), then the
/// loop of passes, whose waits and leadership changes share its state.
pub async fn controller(args: ControllerArgs) -> Result<(), Error> {
    let metrics = Arc::new(metrics::Metrics::default());
    let listener = metrics::serve(args.metrics_addr, metrics.clone());
    tokio::spawn(async move {
        if let Err(e) = listener.await {
            tracing::error!("metrics endpoint: {e}");
        }
    });
    let client = Client::try_default().await?;
    let changed = Arc::new(Notify::new());
    let policy_api = gvk(
        "agentic.networking.x-k8s.io",
        "v1alpha1",
        "XAccessPolicy",
        "xaccesspolicies",
    );
    let output_api = gvk(
        output::GROUP,
        output::VERSION,
        args.output.kind(),
        args.output.plural(),
    );
    let hold_api = gvk(
        output::ENVOY_FILTER_GROUP,
        output::ENVOY_FILTER_VERSION,
        "EnvoyFilter",
        "envoyfilters",
    );
    let watched = Watched::start(
        &client,
        &args,
        &policy_api,
        &output_api,
        &hold_api,
        &changed,
    );
    watched.synced(&args).await?;
    tracing::info!(output = %args.output.kind(), "watching; writing {} objects", args.output.kind());
    // Leadership: always leading without --leader-elect; with it, as the Lease says (the candidate
    // starts once the caches are synced, so a new leader's first pass sees everything).
    let (leading_tx, mut leading) = watch::channel(!args.leader_elect);
    let mut elector = None;
    let mut _unused_sender = None;
    if args.leader_elect {
        let config = lease_config(&args, &client)?;
        let (stop, stopped) = oneshot::channel();
        let task =
            tokio::spawn(lease::Elector::new(client.clone(), config).run(leading_tx, stopped));
        elector = Some((stop, task));
    } else {
        // Kept to the end: a dropped sender would end `leading.changed()` at once.
        _unused_sender = Some(leading_tx);
    }
    let filter = Arc::default();
    filter_image::watch_filter_image(&args, &filter, &changed);
    let ctx = Context {
        metrics,
        client,
        args,
        policy_api,
        output_api,
        hold_api,
        written: Written::default(),
        programmed: Default::default(),
        filter,
    };
    let mut shutdown = Box::pin(shutdown_signal());
    let mut retry = retry::Retry::new(); // a failed pass runs again at the next change or when its retry is due
    loop {
        let is_leader = *leading.borrow_and_update();
        let m = &ctx.metrics;
        m.leader
            .store(is_leader, std::sync::atomic::Ordering::Relaxed);
        if !is_leader {
            // A follower watches (its caches stay current) and writes nothing.
            m.ready.store(true, std::sync::atomic::Ordering::Relaxed);
            retry.succeeded();
        } else {
            let started = Instant::now();
            let result = reconcile::reconcile(&ctx, &watched).await;
            m.reconciles
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            m.reconcile_seconds.observe(started.elapsed().as_secs_f64());
            match result {
                Ok(writes) => {
                    retry.succeeded();
                    m.ready.store(true, std::sync::atomic::Ordering::Relaxed);
                    m.writes
                        .fetch_add(writes as u64, std::sync::atomic::Ordering::Relaxed);
                    if writes > 0 {
                        tracing::info!(writes, elapsed = ?started.elapsed(), "pass: {writes} writes in {:?}", started.elapsed());
                    }
                }
                Err(e) => {
                    m.error(e.label());
                    let delay = retry.failed();
                    tracing::warn!(error = %e.label(), retry_in = ?delay, "pass failed: {e}; retrying in {delay:?}");
                }
            }
        }
        tokio::select! {
            _ = changed.notified() => {}
            // Leadership gained (a first pass at once) or lost.
            _ = leading.changed() => {}
            _ = retry.due() => {}
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                break;
            }
        }
        // Coalesce bursts of events into one pass.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some((stop, task)) = elector {
        // The candidate stops and, if it leads, releases the Lease (no pass runs any more).
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    Ok(())
}

fn lease_config(args: &ControllerArgs, client: &Client) -> Result<lease::LeaseConfig, Error> {
    let ms = |v: u32| Duration::from_millis(u64::from(v));
    let config = lease::LeaseConfig {
        name: args.leader_elect_lease.clone(),
        namespace: args
            .leader_elect_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string()),
        identity: args
            .leader_elect_identity
            .clone()
            .unwrap_or_else(lease::default_identity),
        lease_duration: ms(args.leader_elect_lease_duration),
        renew_deadline: ms(args.leader_elect_renew_deadline),
        retry_period: ms(args.leader_elect_retry_period),
    };
    config.validate()?;
    Ok(config)
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests;
