//! One pass of the controller: the stores read as one inventory, compiled as the CLI compiles
//! files (topology), and what differs written: the outputs, each policy's status, the conditions on
//! targets and the filter's on Gateways.

use std::path::PathBuf;
use std::time::Instant;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::Store;
use serde_json::json;
use toolgate_policy::compile::{ClusterNaming, CompileOptions};
use toolgate_policy::plan::PlanSettings;

use super::output::{self, Desired, Module, FIELD_MANAGER};
use super::written::without_times;
use super::{
    affected, filter_image, gvk, metrics, programmed, write, Context, ControllerArgs, Error,
    Watched,
};
use crate::inputs::RawObject;
use crate::model::Inventory;
use crate::topology::{self, TopologyOptions};

fn raw(store: &Store<DynamicObject>, kind: &str, api_version: &str) -> Vec<RawObject> {
    store
        .state()
        .iter()
        .filter_map(|o| {
            let mut value = serde_json::to_value(o.as_ref()).ok()?;
            // Objects from the API carry their type; DynamicObject keeps it, but be sure.
            value["kind"] = json!(kind);
            if value.get("apiVersion").is_none() {
                value["apiVersion"] = json!(api_version);
            }
            let name = o.metadata.name.clone().unwrap_or_default();
            let ns = o.metadata.namespace.clone().unwrap_or_default();
            Some(RawObject {
                file: PathBuf::from(format!("cluster/{kind}/{ns}/{name}")),
                doc: 0,
                value,
            })
        })
        .collect()
}

pub(super) fn configmap_api() -> ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

/// One level-triggered pass, returning the number of writes: everything recomputed from the stores, then written where it differs: the outputs,
/// each policy's status, the conditions on targets and, once known, the filter's on Gateways.
pub(super) async fn reconcile(ctx: &Context, w: &Watched) -> Result<usize, Error> {
    ctx.programmed.saw(
        w.policies.state().iter().filter_map(|p| {
            let m = &p.metadata;
            Some((m.namespace.clone()?, m.name.clone()?, m.generation?))
        }),
        Instant::now(),
    );
    let topo = topology::build(&inventory(w), &topology_options(&ctx.args));
    for e in &topo.errors {
        tracing::warn!("{e}");
    }
    let (mut writes, failures, conflicts) = write_outputs(ctx, w, &topo).await;

    // Status of every policy, with its Programmed conditions, written only when it changes.
    let carriers = programmed::Carriers::of(
        &topo,
        ctx.args.output.kind(),
        "EnvoyFilter",
        ctx.args.plan_configmaps,
    );
    let now = topology::now_rfc3339();
    let mut statuses = topo.statuses.clone();
    for status in &mut statuses {
        carriers.add_programmed(
            status,
            |key| failures.get(key).map_or(Ok(()), |e| Err(e.clone())),
            &now,
        );
    }
    count_policies(&ctx.metrics, &statuses);
    writes += write_policy_statuses(ctx, w, &statuses).await?;
    for status in &statuses {
        let programmed = !status.ancestors.is_empty()
            && status.ancestors.iter().all(|a| {
                a.conditions
                    .iter()
                    .any(|c| c.condition_type == programmed::PROGRAMMED && c.status == "True")
            });
        if let (true, Some((ns, name))) = (programmed, status.policy.split_once('/')) {
            if let Some(seconds) = ctx.programmed.programmed(ns, name, Instant::now()) {
                ctx.metrics.programmed_seconds.observe(seconds);
            }
        }
    }
    let (target_writes, mut target_error) =
        affected::sync(ctx, w, &statuses, &conflicts, &now).await;
    writes += target_writes;
    let (n, e) = write_filter_condition(ctx, w, &topo, &now).await;
    writes += n;
    target_error = target_error.or(e);
    if let Some(trace) = &ctx.args.trace {
        let line = format!("{{\"writes\":{writes}}}\n");
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(trace)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    }
    match failures
        .into_iter()
        .next()
        .map(|((kind, ns, name), e)| format!("{kind} {ns}/{name}: {e}"))
        .or(target_error)
    {
        None => Ok(writes),
        Some(e) => Err(Error::Write(e)),
    }
}

/// The watched objects as the CLI reads files: one inventory.
fn inventory(w: &Watched) -> Inventory {
    let mut objects = raw(&w.gateways, "Gateway", "gateway.networking.k8s.io/v1");
    objects.extend(raw(&w.routes, "HTTPRoute", "gateway.networking.k8s.io/v1"));
    objects.extend(raw(
        &w.grants,
        "ReferenceGrant",
        "gateway.networking.k8s.io/v1beta1",
    ));
    objects.extend(raw(&w.namespaces, "Namespace", "v1"));
    objects.extend(raw(
        &w.backends,
        "XBackend",
        "agentic.networking.x-k8s.io/v0alpha0",
    ));
    objects.extend(raw(
        &w.policies,
        "XAccessPolicy",
        "agentic.networking.x-k8s.io/v1alpha1",
    ));
    let (inv, errors) = Inventory::from_raw(objects, "default");
    for e in errors {
        tracing::warn!("{e}");
    }
    inv
}

fn topology_options(args: &ControllerArgs) -> TopologyOptions {
    TopologyOptions {
        compile: CompileOptions {
            trust_domain: args.trust_domain.clone(),
            clusters: ClusterNaming::Istio {
                cluster_domain: args.cluster_domain.clone(),
            },
        },
        settings: PlanSettings {
            authz_timeout_ms: args.authz_timeout,
            list_filtering: args.list_filtering,
            default_deny: args.default_deny,
            ..PlanSettings::default()
        },
        gateway_classes: args.gateway_class.clone(),
    }
}

/// The outputs: applies what is missing or different, deletes what is no longer wanted. Returns
/// the writes, the outputs not written (by key) and the Gateways whose outputs' names are taken.
/// Long: the three kinds of output in the order they must be written, each a desired list and a
/// sync.
async fn write_outputs(
    ctx: &Context,
    w: &Watched,
    topo: &topology::Topology,
) -> (usize, programmed::Failures, affected::Conflicts) {
    let module = Module {
        url: ctx.args.wasm_url.clone(),
        sha256: ctx.args.wasm_sha256.clone(),
        pull_secret: ctx.args.wasm_image_pull_secret.clone(),
        pull_policy: ctx.args.wasm_image_pull_policy,
    };
    let mut writes = 0;

    let gateway_uid = |ns: &str, name: &str| {
        w.gateways
            .state()
            .iter()
            .find(|g| {
                g.metadata.namespace.as_deref() == Some(ns)
                    && g.metadata.name.as_deref() == Some(name)
            })
            .and_then(|g| g.metadata.uid.clone())
    };
    let desired: Vec<Desired> = topo
        .gateways
        .iter()
        .flat_map(|gw| {
            output::desired(
                gw,
                gateway_uid(&gw.gateway.namespace, &gw.gateway.name).as_deref(),
                &module,
                ctx.args.output,
            )
        })
        .collect();
    // The EnvoyFilters first: a Gateway holds requests before its filter starts deciding them.
    let holds: Vec<Desired> = topo
        .gateways
        .iter()
        .filter_map(|gw| {
            output::desired_hold(
                gw,
                gateway_uid(&gw.gateway.namespace, &gw.gateway.name).as_deref(),
            )
        })
        .collect();
    let mut failures = programmed::Failures::new();
    writes += write::sync(
        ctx,
        &ctx.hold_api,
        "EnvoyFilter",
        &holds,
        &w.holds,
        &mut failures,
    )
    .await;
    let plans = write::sync(
        ctx,
        &ctx.output_api,
        ctx.args.output.kind(),
        &desired,
        &w.outputs,
        &mut failures,
    )
    .await;
    writes += plans;
    ctx.metrics
        .plans_written
        .fetch_add(plans as u64, std::sync::atomic::Ordering::Relaxed);
    let mut maps: Vec<Desired> = Vec::new();
    if let Some(cache) = &w.configmaps {
        maps = topo
            .gateways
            .iter()
            .flat_map(|gw| {
                output::desired_configmaps(
                    gw,
                    gateway_uid(&gw.gateway.namespace, &gw.gateway.name).as_deref(),
                )
            })
            .collect();
        writes += write::sync(
            ctx,
            &configmap_api(),
            "ConfigMap",
            &maps,
            cache,
            &mut failures,
        )
        .await;
    }
    let conflicts = write::conflicts(
        &failures,
        holds
            .iter()
            .map(|d| ("EnvoyFilter", d))
            .chain(desired.iter().map(|d| (ctx.args.output.kind(), d)))
            .chain(maps.iter().map(|d| ("ConfigMap", d))),
    );
    (writes, failures, conflicts)
}

/// The `toolgate_controller_policies` gauge: policies by their Accepted reason.
fn count_policies(metrics: &metrics::Metrics, statuses: &[topology::PolicyStatus]) {
    let mut by_reason: std::collections::BTreeMap<String, u64> = Default::default();
    for c in statuses
        .iter()
        .flat_map(|s| &s.ancestors)
        .flat_map(|a| &a.conditions)
        .filter(|c| c.condition_type == "Accepted")
    {
        *by_reason.entry(c.reason.clone()).or_default() += 1;
    }
    if let Ok(mut p) = metrics.policies.lock() {
        *p = by_reason.into_iter().collect();
    }
}

/// Each policy's status, where it changed (server-side apply, field manager `toolgate`).
async fn write_policy_statuses(
    ctx: &Context,
    w: &Watched,
    statuses: &[topology::PolicyStatus],
) -> Result<usize, Error> {
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let mut writes = 0;
    let policies = w.policies.state();
    for status in statuses {
        let Some((ns, name)) = status.policy.split_once('/') else {
            continue;
        };
        let Some(obj) = policies.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name)
        }) else {
            continue;
        };
        let key = (
            "XAccessPolicy/status".to_string(),
            ns.to_string(),
            name.to_string(),
        );
        let Some(new) = output::status_update(status, obj.data.get("status")) else {
            ctx.written.clear(&key);
            continue;
        };
        let content = without_times(new.clone());
        if ctx
            .written
            .pending(&key, &content, obj.metadata.resource_version.as_deref())
        {
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ctx.policy_api);
        let patch = json!({
            "apiVersion": "agentic.networking.x-k8s.io/v1alpha1",
            "kind": "XAccessPolicy",
            "metadata": {"name": name, "namespace": ns},
            "status": new,
        });
        api.patch_status(name, &apply, &Patch::Apply(&patch))
            .await?;
        ctx.written
            .record(key, content, obj.metadata.resource_version.clone());
        tracing::info!(kind = %"XAccessPolicy", namespace = %ns, name = %name, "status written");
        writes += 1;
    }
    Ok(writes)
}

/// `toolgate.dev/FilterCompatible` on every Gateway that has outputs (an enforced listener), once
/// the filter image's version is known (`filter_image`); until then nothing is written or removed.
async fn write_filter_condition(
    ctx: &Context,
    w: &Watched,
    topo: &topology::Topology,
    now: &str,
) -> (usize, Option<String>) {
    let Some(version) = ctx.filter.lock().ok().and_then(|f| f.clone()) else {
        return (0, None);
    };
    let condition = filter_image::condition(&ctx.args.wasm_url, &version, now);
    let desired = topo
        .gateways
        .iter()
        .filter(|g| output::has_outputs(g))
        .map(|g| {
            let key = (g.gateway.namespace.clone(), g.gateway.name.clone());
            (key, condition.clone())
        })
        .collect();
    affected::sync_condition(
        ctx,
        &affected::GATEWAY,
        &w.gateways,
        filter_image::FILTER_COMPATIBLE,
        filter_image::FIELD_MANAGER,
        &desired,
    )
    .await
}
