//! Writing the outputs of one kind: apply what is missing or different, delete what is no longer
//! wanted, and never touch an object the controller does not own.
//!
//! The controller's objects are those labelled `app.kubernetes.io/managed-by: toolgate`
//! (`output::is_managed`); its watches see only those. An output whose name is not among them may
//! still be taken by an object someone else wrote (a name is predictable): before creating one, the
//! controller reads that name. An object without the label is left as it is and reported
//! (`Failure::Conflict`: the policies it would carry are not Programmed, the Gateway says
//! `OutputConflict`); the pass fails, so it is retried until the name is free. The create itself is
//! a server-side apply without force, so an object written in between by another field manager with
//! other values makes it fail rather than be overwritten. Labelled objects are adopted: rewritten
//! when wanted, deleted when not (so outputs an older version named otherwise are cleaned up).
//!
//! The watch cache is trusted only while its watch is established (`Cache`): after a watch error
//! (the API server away, the kind's CRD deleted) each output is read from the API server until the
//! watch is back, so an output that is gone is never taken for written and current.
//!
//! Two sources never get one name (`names`), but were it to happen, the first is written and the
//! name reported as a conflict for both, rather than written in turn forever.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::Client;
use tokio::sync::Notify;

use super::affected::Conflicts;
use super::output::{self, Desired, FIELD_MANAGER, MANAGED_BY};
use super::programmed::{Failure, Failures};

/// The controller's objects of one kind, as its watch (labelled `MANAGED_BY`) last saw them, and
/// whether that watch is established.
pub(super) struct Cache {
    pub store: Store<DynamicObject>,
    current: Arc<AtomicBool>,
}

impl Cache {
    pub fn watch(client: &Client, ar: ApiResource, changed: Arc<Notify>, selector: &str) -> Self {
        let current = Arc::new(AtomicBool::new(false));
        Cache {
            store: super::watch_with(client, ar, changed, Some(selector), current.clone()),
            current,
        }
    }

    fn trusted(&self) -> bool {
        self.current.load(Ordering::Relaxed)
    }
}

/// Makes the managed objects of one kind what `desired` says: applies the missing or different
/// ones, deletes the others. Returns the writes made; an output not written is recorded in
/// `failures` (the pass goes on, so statuses can say so, and fails at its end).
pub(super) async fn sync(
    ctx: &super::Context,
    ar: &ApiResource,
    kind: &str,
    desired: &[Desired],
    cache: &Cache,
    failures: &mut Failures,
) -> usize {
    let existing = cache.store.state();
    let trusted = cache.trusted();
    let mut writes = 0;
    let mut claimed: BTreeMap<(&str, &str), &Desired> = BTreeMap::new();
    for d in desired {
        let key = (kind.to_string(), d.namespace.clone(), d.name.clone());
        if let Some(first) = claimed.insert((&d.namespace, &d.name), d) {
            let message = format!(
                "the outputs of Gateways {} and {} have this name",
                first.gateway, d.gateway
            );
            failures.insert(key, Failure::Conflict(message));
            continue;
        }
        let find = |o: &&Arc<DynamicObject>| {
            o.metadata.namespace.as_deref() == Some(&d.namespace)
                && o.metadata.name.as_deref() == Some(&d.name)
        };
        let current = if trusted {
            existing.iter().find(find)
        } else {
            None
        };
        let cached = Cached {
            current: current.map(AsRef::as_ref),
            trusted,
        };
        if apply(ctx, ar, kind, d, cached, key, failures).await {
            writes += 1;
        }
    }
    writes + delete_unwanted(ctx, ar, kind, desired, &existing, failures).await
}

/// What the cache says of an output: its current object (None when the cache is not trusted), and
/// whether the cache is current.
#[derive(Clone, Copy)]
struct Cached<'a> {
    current: Option<&'a DynamicObject>,
    trusted: bool,
}

/// Applies `d` (its `key`) unless it is up to date, a write of it is in flight, or its name is
/// someone else's; whether it was written. An output not written is recorded in `failures`.
async fn apply(
    ctx: &super::Context,
    ar: &ApiResource,
    kind: &str,
    d: &Desired,
    Cached { current, trusted }: Cached<'_>,
    key: (String, String, String),
    failures: &mut Failures,
) -> bool {
    if current
        .and_then(|c| serde_json::to_value(c).ok())
        .is_some_and(|c| output::up_to_date(&c, &d.object))
    {
        ctx.written.clear(&key);
        return false;
    }
    let cached_version = current.and_then(|c| c.metadata.resource_version.clone());
    // A write in flight is one the cache has not shown yet: only a current cache can say so.
    if trusted
        && ctx
            .written
            .pending(&key, &d.object, cached_version.as_deref())
    {
        return false;
    }
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &d.namespace, ar);
    // Not in a current cache of the controller's objects: what has the name?
    let owned = match current {
        Some(_) => true,
        None => match api
            .get_opt(&d.name)
            .await
            .map(|o| o.and_then(|o| serde_json::to_value(&o).ok()))
        {
            Ok(None) => false,
            Ok(Some(found)) if !output::is_managed(&found) => {
                let what = format!("exists and is not Toolgate's (no label {MANAGED_BY}={FIELD_MANAGER}); not overwritten");
                tracing::warn!(kind = %kind, namespace = %d.namespace, name = %d.name, "{what}");
                failures.insert(key, Failure::Conflict(what));
                return false;
            }
            Ok(Some(found)) if output::up_to_date(&found, &d.object) => {
                ctx.written.clear(&key);
                return false;
            }
            Ok(Some(_)) => true,
            Err(e) => {
                tracing::warn!(kind = %kind, namespace = %d.namespace, name = %d.name, "reading failed: {e}");
                failures.insert(key, Failure::Refused(e.to_string()));
                return false;
            }
        },
    };
    // Ours: force (another manager's edits to our fields are undone). New: no force.
    let params = if owned {
        PatchParams::apply(FIELD_MANAGER).force()
    } else {
        PatchParams::apply(FIELD_MANAGER)
    };
    match api.patch(&d.name, &params, &Patch::Apply(&d.object)).await {
        Ok(_) => {
            ctx.written.record(key, d.object.clone(), cached_version);
            tracing::info!(kind = %kind, namespace = %d.namespace, name = %d.name, "applied");
            true
        }
        Err(kube::Error::Api(e)) if !owned && e.code == 409 => {
            let what = format!(
                "created by someone else meanwhile; not overwritten ({})",
                e.message
            );
            tracing::warn!(kind = %kind, namespace = %d.namespace, name = %d.name, "{what}");
            failures.insert(key, Failure::Conflict(what));
            false
        }
        Err(e) => {
            tracing::warn!(kind = %kind, namespace = %d.namespace, name = %d.name, "apply failed: {e}");
            failures.insert(key, Failure::Refused(e.to_string()));
            false
        }
    }
}

/// Deletes the managed objects of the kind (`existing`, the cache's) that `desired` has not; the
/// deletes made.
async fn delete_unwanted(
    ctx: &super::Context,
    ar: &ApiResource,
    kind: &str,
    desired: &[Desired],
    existing: &[Arc<DynamicObject>],
    failures: &mut Failures,
) -> usize {
    let mut writes = 0;
    let wanted: BTreeSet<(String, String)> = desired
        .iter()
        .map(|d| (d.namespace.clone(), d.name.clone()))
        .collect();
    for o in existing.iter() {
        let (Some(ns), Some(name)) = (o.metadata.namespace.clone(), o.metadata.name.clone()) else {
            continue;
        };
        if !wanted.contains(&(ns.clone(), name.clone())) {
            ctx.written
                .clear(&(kind.to_string(), ns.clone(), name.clone()));
            let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, ar);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(kind = %kind, namespace = %ns, name = %name, "deleted");
                    writes += 1;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(kind = %kind, namespace = %ns, name = %name, "delete failed: {e}");
                    failures.insert(
                        (kind.to_string(), ns, name),
                        Failure::Refused(e.to_string()),
                    );
                }
            }
        }
    }
    writes
}

/// The outputs not written because their names are taken, by the Gateway they are for.
pub(super) fn conflicts<'a>(
    failures: &Failures,
    desired: impl IntoIterator<Item = (&'a str, &'a Desired)>,
) -> Conflicts {
    let mut out = Conflicts::new();
    for (kind, d) in desired {
        let key = (kind.to_string(), d.namespace.clone(), d.name.clone());
        if let Some(failure @ Failure::Conflict(_)) = failures.get(&key) {
            let line = format!("{kind} {}/{}: {failure}", d.namespace, d.name);
            let lines = out
                .entry((d.namespace.clone(), d.gateway.clone()))
                .or_default();
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired(gateway: &str, name: &str) -> Desired {
        Desired {
            namespace: "ns".into(),
            name: name.into(),
            gateway: gateway.into(),
            object: serde_json::json!({}),
        }
    }

    #[test]
    fn conflicts_are_reported_by_gateway() {
        let (a, b, c) = (
            desired("a", "toolgate-a-http"),
            desired("b", "toolgate-b"),
            desired("c", "toolgate-c"),
        );
        let mut failures = Failures::new();
        failures.insert(
            ("WasmPlugin".into(), "ns".into(), "toolgate-a-http".into()),
            Failure::Conflict("taken".into()),
        );
        failures.insert(
            ("EnvoyFilter".into(), "ns".into(), "toolgate-b".into()),
            Failure::Refused("forbidden".into()),
        );
        let found = conflicts(
            &failures,
            [("WasmPlugin", &a), ("EnvoyFilter", &b), ("EnvoyFilter", &c)],
        );
        assert_eq!(
            found,
            Conflicts::from([(
                ("ns".into(), "a".into()),
                vec!["WasmPlugin ns/toolgate-a-http: taken".to_string()]
            )])
        );
    }

    #[test]
    fn only_labelled_objects_are_the_controller_s() {
        let labelled = serde_json::json!({"metadata": {"labels": {MANAGED_BY: FIELD_MANAGER}}});
        assert!(output::is_managed(&labelled));
        for other in [
            serde_json::json!({"metadata": {}}),
            serde_json::json!({"metadata": {"labels": {MANAGED_BY: "helm"}}}),
            serde_json::json!({"metadata": {"annotations": {MANAGED_BY: FIELD_MANAGER}}}),
        ] {
            assert!(!output::is_managed(&other), "{other}");
        }
    }
}
