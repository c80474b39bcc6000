//! `--leader-elect`: one writer among several controller replicas, by a `coordination.k8s.io/v1`
//! Lease, with the algorithm of client-go's `leaderelection` (the one kube-controller-manager uses):
//! read the Lease; take it when it is free (no holder: released) or when its record has not changed
//! for its `leaseDurationSeconds` as measured on this replica's own clock (no comparison of clocks
//! across machines); renew it every retry period while leading; write with the `resourceVersion`
//! read, so that of two candidates only one wins (the other gets 409 Conflict).
//!
//! A leader that cannot renew for `renew_deadline` (shorter than the lease duration) stops leading
//! before anyone else may take the Lease. On shutdown the leader releases the Lease (holder cleared),
//! so a follower takes over at its next try instead of after the lease duration.
//!
//! Why not the ecosystem crate `kube-lease-manager`: tried against a real kube-apiserver, it keeps
//! leading when it can no longer renew (no renew deadline), compares wall clocks across machines,
//! renews without `resourceVersion`, and needs `patch` on the Lease (docs/controller.md, "Why not
//! `kube-lease-manager`"). This module needs only get, create and replace.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use tokio::sync::{oneshot, watch};

/// Where the Lease is and how candidates behave.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This replica's name in `holderIdentity` (the pod name).
    pub identity: String,
    /// How long a follower waits, from when it last saw the Lease record change, before taking it.
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try to take, and leaders to renew, the Lease.
    pub retry_period: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("--leader-elect-renew-deadline ({renew:?}) must be shorter than --leader-elect-lease-duration ({lease:?})")]
    RenewDeadline { renew: Duration, lease: Duration },
    #[error("--leader-elect-retry-period ({retry:?}) must be shorter than --leader-elect-renew-deadline ({renew:?})")]
    RetryPeriod { retry: Duration, renew: Duration },
    #[error("--leader-elect-identity must not be empty")]
    Identity,
}

impl LeaseConfig {
    /// The rules client-go enforces: the lease outlives a leader's renewal deadline, which spans
    /// more than one retry.
    pub fn validate(&self) -> Result<(), LeaseError> {
        if self.identity.is_empty() {
            return Err(LeaseError::Identity);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaseError::RenewDeadline {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(LeaseError::RetryPeriod {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written: whole seconds, rounded up.
    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_millis().div_ceil(1000))
            .unwrap_or(i32::MAX)
            .max(1)
    }
}

/// The default identity: the pod name (`POD_NAME`, from the downward API in deploy/), else the host
/// name (a pod's host name is its name).
pub fn default_identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "toolgate-controller".to_string())
}

/// What a candidate does with the Lease it read.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Write this record (renewing our own lease, or taking a free or expired one).
    Take(LeaseSpec),
    /// Another replica leads.
    Follow { holder: String },
}

fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// The next step for `identity` given the Lease's record. `expired`: the record has not changed for
/// its lease duration (see [`Observer`]).
pub fn decide(
    current: &LeaseSpec,
    identity: &str,
    expired: bool,
    now: Timestamp,
    duration_seconds: i32,
) -> Decision {
    match holder(current) {
        Some(h) if h == identity => Decision::Take(LeaseSpec {
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(duration_seconds),
            acquire_time: current.acquire_time.clone().or(Some(MicroTime(now))),
            ..current.clone()
        }),
        Some(h) if !expired => Decision::Follow {
            holder: h.to_string(),
        },
        _ => Decision::Take(LeaseSpec {
            holder_identity: Some(identity.to_string()),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(duration_seconds),
            lease_transitions: Some(current.lease_transitions.unwrap_or(0) + 1),
            ..current.clone()
        }),
    }
}

/// When this replica last saw the Lease record change: a record unchanged for its lease duration
/// has expired. Only this replica's monotonic clock is used.
#[derive(Debug, Default)]
pub struct Observer {
    record: Option<(LeaseSpec, Instant)>,
}

impl Observer {
    pub fn observe(&mut self, spec: &LeaseSpec, now: Instant) {
        if self.record.as_ref().is_none_or(|(r, _)| r != spec) {
            self.record = Some((spec.clone(), now));
        }
    }

    pub fn expired(&self, now: Instant, default: Duration) -> bool {
        let Some((spec, since)) = &self.record else {
            return true;
        };
        if holder(spec).is_none() {
            return true;
        }
        let duration = spec
            .lease_duration_seconds
            .filter(|s| *s > 0)
            .map_or(default, |s| Duration::from_secs(s as u64));
        now.duration_since(*since) >= duration
    }
}

/// The record a leader writes when it steps down: no holder, so the next candidate takes it at once.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_duration_seconds: Some(1),
        ..current.clone()
    }
}

/// One candidate.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    observer: Observer,
}

impl Elector {
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        Self {
            api,
            config,
            observer: Observer::default(),
        }
    }

    /// Takes or renews the Lease: true when this replica holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let (now, stamp) = (Instant::now(), Timestamp::now());
        let duration = self.config.duration_seconds();
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let spec = match decide(
                &LeaseSpec::default(),
                &self.config.identity,
                true,
                stamp,
                duration,
            ) {
                Decision::Take(spec) => spec,
                Decision::Follow { .. } => return Ok(false),
            };
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observer.observe(&spec, now);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let current = lease.spec.clone().unwrap_or_default();
        self.observer.observe(&current, now);
        let expired = self.observer.expired(now, self.config.lease_duration);
        match decide(&current, &self.config.identity, expired, stamp, duration) {
            Decision::Follow { .. } => Ok(false),
            Decision::Take(spec) => {
                lease.spec = Some(spec.clone());
                // The resourceVersion read is sent back: if anyone wrote in between, 409.
                match self
                    .api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => {
                        self.observer.observe(&spec, now);
                        Ok(true)
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Clears the holder when it is this replica.
    pub async fn release(&mut self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(false);
        };
        let current = lease.spec.clone().unwrap_or_default();
        if holder(&current) != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(released(&current, Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        Ok(true)
    }

    /// Runs the candidate until `stop` fires, publishing whether this replica leads on `leading`;
    /// then releases the Lease if it leads.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut stop: oneshot::Receiver<()>) {
        let (name, ns, id) = (
            self.config.name.clone(),
            self.config.namespace.clone(),
            self.config.identity.clone(),
        );
        tracing::info!(lease_namespace = %ns, lease = %name, identity = %id, "leader election: Lease {ns}/{name}, identity {id}");
        let mut last_renewal: Option<Instant> = None;
        loop {
            let attempt = Instant::now();
            let result =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()).await;
            let is_leader = *leading.borrow();
            match result {
                Ok(Ok(true)) => {
                    last_renewal = Some(attempt);
                    if !is_leader {
                        tracing::info!(lease_namespace = %ns, lease = %name, identity = %id, "leading (Lease {ns}/{name} held by {id})");
                        leading.send_replace(true);
                    }
                }
                Ok(Ok(false)) => {
                    if is_leader {
                        tracing::warn!(lease_namespace = %ns, lease = %name, "no longer leading: Lease {ns}/{name} taken by another replica");
                        leading.send_replace(false);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease_namespace = %ns, lease = %name, "Lease {ns}/{name}: {e}")
                }
                Err(_) => {
                    tracing::warn!(lease_namespace = %ns, lease = %name, "Lease {ns}/{name}: no answer within the renew deadline")
                }
            }
            if *leading.borrow()
                && last_renewal.is_none_or(|t| t.elapsed() >= self.config.renew_deadline)
            {
                tracing::warn!(lease_namespace = %ns, lease = %name, "no longer leading: Lease {ns}/{name} not renewed within the renew deadline");
                leading.send_replace(false);
            }
            // Every retry period, after a failure too (client-go's): no backoff here, since the protocol's
            // timing rests on it (a leader that cannot renew stops within the renew deadline; a follower
            // takes an expired or released Lease within a retry). Failed passes back off (retry.rs).
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        if *leading.borrow() {
            leading.send_replace(false);
            match self.release().await {
                Ok(true) => {
                    tracing::info!(lease_namespace = %ns, lease = %name, "released Lease {ns}/{name}")
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(lease_namespace = %ns, lease = %name, "releasing Lease {ns}/{name}: {e}")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn held(by: &str, at: i64, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            acquire_time: Some(MicroTime(t(at))),
            renew_time: Some(MicroTime(t(at))),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_free_lease_is_taken() {
        let Decision::Take(spec) = decide(&LeaseSpec::default(), "a", false, t(5), 15) else {
            panic!("not taken")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(
            (spec.acquire_time, spec.renew_time),
            (Some(MicroTime(t(5))), Some(MicroTime(t(5))))
        );
        // A released lease (holder cleared, or empty) is free even though it is not expired.
        for holder in [None, Some(String::new())] {
            let released = LeaseSpec {
                holder_identity: holder,
                ..released(&held("b", 0, 3), t(1))
            };
            let Decision::Take(spec) = decide(&released, "a", false, t(2), 15) else {
                panic!("not taken")
            };
            assert_eq!(
                (spec.holder_identity.as_deref(), spec.lease_transitions),
                (Some("a"), Some(4))
            );
        }
    }

    #[test]
    fn another_holder_is_followed_until_its_lease_expires() {
        let lease = held("b", 0, 2);
        assert_eq!(
            decide(&lease, "a", false, t(100), 15),
            Decision::Follow { holder: "b".into() }
        );
        let Decision::Take(spec) = decide(&lease, "a", true, t(100), 15) else {
            panic!("expired lease not taken")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(
            spec.lease_transitions,
            Some(3),
            "a change of holder is a transition"
        );
        assert_eq!(spec.acquire_time, Some(MicroTime(t(100))));
    }

    #[test]
    fn the_holder_renews_keeping_acquire_time_and_transitions() {
        let lease = held("a", 0, 7);
        // Even when the record looks expired to us: it is ours.
        for expired in [false, true] {
            let Decision::Take(spec) = decide(&lease, "a", expired, t(9), 15) else {
                panic!("not renewed")
            };
            assert_eq!(spec.renew_time, Some(MicroTime(t(9))));
            assert_eq!(spec.acquire_time, Some(MicroTime(t(0))));
            assert_eq!(spec.lease_transitions, Some(7));
        }
    }

    #[test]
    fn expiry_is_measured_from_the_last_change_seen_on_the_local_clock() {
        let start = Instant::now();
        let mut o = Observer::default();
        assert!(
            o.expired(start, Duration::from_secs(15)),
            "nothing seen yet"
        );
        let lease = held("b", 0, 1);
        o.observe(&lease, start);
        assert!(!o.expired(start + Duration::from_secs(14), Duration::from_secs(99)));
        // The same record seen again does not restart the clock; the record's duration counts.
        o.observe(&lease, start + Duration::from_secs(10));
        assert!(o.expired(start + Duration::from_secs(15), Duration::from_secs(99)));
        // A renewal (a new record) restarts it, whatever the timestamps in the record say (a skewed
        // clock on the holder's machine does not matter).
        let renewed = LeaseSpec {
            renew_time: Some(MicroTime(t(-3600))),
            ..lease.clone()
        };
        o.observe(&renewed, start + Duration::from_secs(15));
        assert!(!o.expired(start + Duration::from_secs(29), Duration::from_secs(99)));
        assert!(o.expired(start + Duration::from_secs(30), Duration::from_secs(99)));
        // A released record is free at once.
        o.observe(&released(&renewed, t(0)), start + Duration::from_secs(31));
        assert!(o.expired(start + Duration::from_secs(31), Duration::from_secs(99)));
    }

    #[test]
    fn release_clears_the_holder_only() {
        let r = released(&held("a", 0, 4), t(50));
        assert_eq!(r.holder_identity, None);
        assert_eq!(r.lease_transitions, Some(4));
        assert_eq!(r.lease_duration_seconds, Some(1));
    }

    #[test]
    fn timings_are_checked() {
        let ok = LeaseConfig {
            name: "l".into(),
            namespace: "ns".into(),
            identity: "a".into(),
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(200),
        };
        assert!(ok.validate().is_ok());
        assert_eq!(ok.duration_seconds(), 2, "whole seconds, rounded up");
        let c = LeaseConfig {
            renew_deadline: ok.lease_duration,
            ..ok.clone()
        };
        assert!(matches!(
            c.validate(),
            Err(LeaseError::RenewDeadline { .. })
        ));
        let c = LeaseConfig {
            retry_period: ok.renew_deadline,
            ..ok.clone()
        };
        assert!(matches!(c.validate(), Err(LeaseError::RetryPeriod { .. })));
        let c = LeaseConfig {
            identity: String::new(),
            ..ok
        };
        assert!(matches!(c.validate(), Err(LeaseError::Identity)));
    }
}
