//! Status types: `XAccessPolicy.status` (Gateway API ancestor statuses) and the `Condition` XBackend shares.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use super::{DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, GROUP_PATTERN, KIND_PATTERN};

/// `XAccessPolicy.status` (v1alpha1 and v0alpha0): one entry per target (Gateway API policy status).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicyStatus {
    /// Ancestors are the targets of the policy and whether the policy is accepted for each.
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub ancestors: Vec<PolicyAncestorStatus>,
}

/// Gateway API `PolicyAncestorStatus`: the status of a policy for one ancestor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    /// AncestorRef is the ancestor (the Gateway or XBackend the policy targets).
    pub ancestor_ref: ParentReference,
    /// ControllerName is the controller that wrote this entry, `DOMAIN/PATH`.
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = 253),
            pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$")
        )
    )]
    pub controller_name: String,
    /// Conditions of the policy for this ancestor (`Accepted`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 8)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
}

/// Gateway API `ParentReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// Group of the referent; defaults to `gateway.networking.k8s.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = "gateway.networking.k8s.io"))
    )]
    pub group: Option<String>,
    /// Kind of the referent; defaults to `Gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Gateway"))
    )]
    pub kind: Option<String>,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(DNS_LABEL_PATTERN))
    )]
    pub namespace: Option<String>,
    /// Name of the referent.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// SectionName is a section of the referent (a Gateway listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN_PATTERN))
    )]
    pub section_name: Option<String>,
    /// Port of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<u16>,
}

/// Kubernetes `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, in CamelCase or `foo.example.com/CamelCase`.
    #[serde(rename = "type")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 316),
            pattern(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
        )
    )]
    pub condition_type: String,
    /// Status of the condition: `True`, `False` or `Unknown`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["True", "False", "Unknown"])))]
    pub status: String,
    /// ObservedGeneration is the `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub observed_generation: Option<i64>,
    /// LastTransitionTime is when the status last changed (RFC 3339).
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub last_transition_time: String,
    /// Reason is a CamelCase identifier of why the condition has its status.
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = 1024),
            pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
        )
    )]
    pub reason: String,
    /// Message is a human-readable explanation; it may be empty.
    #[cfg_attr(feature = "schema", schemars(length(max = 32768)))]
    pub message: String,
}
