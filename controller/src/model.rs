//! The Kubernetes objects Toolgate reads, typed: XAccessPolicy, XBackend, Gateway, HTTPRoute,
//! ReferenceGrant, and the data of Secrets and ConfigMaps. Every object comes here as a `RawObject`, from a file or from the
//! cluster (the controller watches `DynamicObject`s), so the CLI and the controller read alike.
//!
//! Gateway and HTTPRoute are the generated serde types of the `gateway-api` crate, 0.22 (Gateway API
//! v1.5.1, standard channel; the fields and enum values read here are the same in the v1.6.1 CRDs the
//! tests install). That release is built on kube 4.2 and k8s-openapi 0.28 and the controller on kube 5
//! and k8s-openapi 0.29, so both versions are in the build: k8s-openapi's `links` key names its version,
//! and the CLI gives 0.28 the Kubernetes version feature it needs through the renamed dependency
//! `k8s-openapi-gwapi` (Cargo.toml). Only the serde types are used, never the kube 4 `Resource` impls,
//! so kube 4 never meets the kube 5 client. The cost (`cargo build --release -p toolgate` from
//! clean, with and without): a longer build and a slightly larger binary (docs/layout.md,
//! "Kubernetes types and YAML"). The second kube and k8s-openapi go when a `gateway-api` release is
//! built on kube 5.
//!
//! The generated types are as strict as the CRD schema's required fields and enums, which the former
//! hand-written types were not: a Gateway or HTTPRoute the API server would refuse for a missing
//! required field or an unknown enum value (e.g. an experimental-channel filter type) is reported as
//! invalid, offline too. Two readings of the former types are kept (`gateway_spec`, `route_spec`):
//! `tls.frontend` without `default` is read, and ports and weights out of range are errors.

pub mod request_authentication;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::api::{AccessPolicySpec, BackendSpec, GATEWAY_GROUP, GROUP};

use crate::convert::read_spec;
use crate::inputs::RawObject;
use crate::validate::{admit, Admission, FieldError};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    /// RFC 3339; compared as text, which orders correctly for the `Z` form the API server writes.
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    #[serde(default)]
    pub generation: Option<i64>,
    /// Values as written (the API server stores strings; a YAML file may hold `true` unquoted).
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, Value>>,
}

/// A typed object with its namespace resolved.
#[derive(Clone, Debug)]
pub struct Object<T> {
    pub namespace: String,
    pub name: String,
    pub creation_timestamp: Option<String>,
    pub generation: Option<i64>,
    /// `metadata.annotations` (docs/semantics.md §6a reads `toolgate.dev/dry-run` and `toolgate.dev/default`).
    pub annotations: BTreeMap<String, String>,
    pub spec: T,
    pub origin: String,
}

impl<T> Object<T> {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

// Gateway API objects: the generated serde types of the `gateway-api` crate, under shorter names.
pub use gateway_api::apis::standard::gateways::{GatewayListeners as Listener, GatewaySpec};
use gateway_api::apis::standard::gateways::{
    GatewayListenersAllowedRoutesNamespacesFrom,
    GatewayListenersAllowedRoutesNamespacesSelector as NamespacesSelector,
    GatewayTlsFrontendDefaultValidationMode as DefaultMode,
    GatewayTlsFrontendPerPortTlsValidationMode as PerPortMode,
};
use gateway_api::apis::standard::httproutes::HttpRouteRulesMatchesMethod;
pub use gateway_api::apis::standard::httproutes::{
    HttpRouteRulesBackendRefs as BackendRef, HttpRouteRulesFiltersUrlRewrite as UrlRewrite,
    HttpRouteRulesMatches as RouteMatch, HttpRouteSpec,
};
pub use gateway_api::apis::standard::referencegrants::ReferenceGrantSpec;

/// A listener's port. Ports are checked to fit on reading (`gateway_spec`).
pub fn port(listener: &Listener) -> u16 {
    u16::try_from(listener.port).expect("listener ports are checked on reading")
}

/// `allowedRoutes.namespaces.from` (Gateway API): `Same` (default), `All`, or `Selector` over the labels
/// of the route's Namespace. A `Selector` that cannot be decided (the route's Namespace is not among the
/// objects read, or the selector is malformed) is an error: dropping the route would leave its backends
/// out of the plan while Istio still routes to them.
pub fn admits_routes_from(
    listener: &Listener,
    gateway_ns: &str,
    route_ns: &str,
    namespaces: &[Object<BTreeMap<String, String>>],
) -> Result<bool, String> {
    let Some(n) = listener
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return Ok(gateway_ns == route_ns);
    };
    match n.from.as_ref() {
        None | Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) => {
            Ok(gateway_ns == route_ns)
        }
        Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => Ok(true),
        Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
            let selector = n
                .selector
                .as_ref()
                .ok_or("allowedRoutes.namespaces.from is Selector but no selector is set")?;
            let ns = namespaces.iter().find(|o| o.name == route_ns).ok_or_else(|| {
                format!(
                    "allowedRoutes.namespaces.selector: the labels of Namespace {route_ns:?} are unknown (give its Namespace \
                     object) so whether its routes attach cannot be decided"
                )
            })?;
            let mut labels = ns.spec.clone();
            // The API server labels every Namespace with its name.
            labels
                .entry("kubernetes.io/metadata.name".into())
                .or_insert_with(|| route_ns.to_string());
            selects(selector, &labels)
        }
    }
}

/// A label selector (`matchLabels` and `matchExpressions`, ANDed) against a Namespace's labels.
fn selects(
    selector: &NamespacesSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let mut by_expressions = true;
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let value = labels.get(&e.key);
        by_expressions &= match e.operator.as_str() {
            "In" if !values.is_empty() => value.is_some_and(|v| values.contains(v)),
            "NotIn" if !values.is_empty() => !value.is_some_and(|v| values.contains(v)),
            "Exists" if values.is_empty() => value.is_some(),
            "DoesNotExist" if values.is_empty() => value.is_none(),
            op => return Err(format!("allowedRoutes.namespaces.selector: operator {op:?} with values {values:?} is not valid")),
        };
    }
    Ok(by_labels && by_expressions)
}

/// A client-certificate CA reference of `spec.tls.frontend` (`default` and `perPort` have one type each).
#[derive(Clone, Copy, Debug)]
pub struct CaRef<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
}

impl<'a> CaRef<'a> {
    fn new(kind: &'a str, name: &'a str, namespace: &'a Option<String>) -> Self {
        CaRef {
            kind,
            name,
            namespace: namespace.as_deref(),
        }
    }
}

/// The client-certificate CA references in force for a listener port (`perPort` wins over `default`).
pub fn client_ca_refs(gateway: &GatewaySpec, port: i32) -> Vec<CaRef<'_>> {
    let Some(frontend) = gateway.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return Vec::new();
    };
    match frontend.per_port.iter().flatten().find(|p| p.port == port) {
        Some(p) => p
            .tls
            .validation
            .iter()
            .flat_map(|v| &v.ca_certificate_refs)
            .map(|r| CaRef::new(&r.kind, &r.name, &r.namespace))
            .collect(),
        None => frontend
            .default
            .validation
            .iter()
            .flat_map(|v| &v.ca_certificate_refs)
            .map(|r| CaRef::new(&r.kind, &r.name, &r.namespace))
            .collect(),
    }
}

/// Whether the client validation in force for a listener port (`perPort` wins over `default`, as in
/// [`client_ca_refs`]) lets clients through whose certificate is missing or fails verification:
/// `mode: AllowInsecureFallback`.
pub fn insecure_client_fallback(gateway: &GatewaySpec, port: i32) -> bool {
    let Some(frontend) = gateway.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return false;
    };
    match frontend.per_port.iter().flatten().find(|p| p.port == port) {
        Some(p) => {
            p.tls.validation.as_ref().and_then(|v| v.mode.as_ref())
                == Some(&PerPortMode::AllowInsecureFallback)
        }
        None => {
            frontend
                .default
                .validation
                .as_ref()
                .and_then(|v| v.mode.as_ref())
                == Some(&DefaultMode::AllowInsecureFallback)
        }
    }
}

pub fn is_xbackend(b: &BackendRef) -> bool {
    b.group.as_deref() == Some(GROUP) && b.kind.as_deref() == Some("XBackend")
}

pub fn is_service(b: &BackendRef) -> bool {
    b.group.as_deref().unwrap_or("").is_empty()
        && b.kind.as_deref().unwrap_or("Service") == "Service"
}

/// An HTTP method as written in an HTTPRoute match.
pub fn method_name(method: &HttpRouteRulesMatchesMethod) -> &'static str {
    use HttpRouteRulesMatchesMethod::*;
    match method {
        Get => "GET",
        Head => "HEAD",
        Post => "POST",
        Put => "PUT",
        Delete => "DELETE",
        Connect => "CONNECT",
        Options => "OPTIONS",
        Trace => "TRACE",
        Patch => "PATCH",
    }
}

/// Every object the commands read, typed. Unknown kinds are ignored.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub policies: Vec<Object<AccessPolicySpec>>,
    pub backends: Vec<Object<BackendSpec>>,
    pub gateways: Vec<Object<GatewaySpec>>,
    pub routes: Vec<Object<HttpRouteSpec>>,
    /// ReferenceGrants (gateway.networking.k8s.io v1beta1 or v1): who may point into their namespace.
    pub grants: Vec<Object<ReferenceGrantSpec>>,
    /// Secrets and ConfigMaps as `(kind, namespace/name) -> data` with values decoded to text.
    pub secrets: Vec<Object<BTreeMap<String, String>>>,
    pub config_maps: Vec<Object<BTreeMap<String, String>>>,
    /// XAccessPolicies that fail the CRD validation: never enforced, reported as `Invalid`.
    pub rejected_policies: Vec<RejectedPolicy>,
    /// Istio RequestAuthentications (security.istio.io/v1): `toolgate render` configures Envoy's
    /// jwt_authn from those targeting a Gateway (docs/semantics.md §6b).
    pub request_authentications: Vec<Object<request_authentication::RequestAuthenticationSpec>>,
    /// Namespaces with their labels (`allowedRoutes.namespaces.selector`).
    pub namespaces: Vec<Object<BTreeMap<String, String>>>,
}

#[derive(Clone, Debug)]
pub struct RejectedPolicy {
    pub namespace: String,
    pub name: String,
    /// As far as they could be read, for status.
    pub target_refs: Vec<toolgate_policy::api::PolicyTargetRef>,
    /// `field: message; ...` as the API server would report them.
    pub message: String,
}

/// An object that could not be read into its type.
#[derive(Debug, thiserror::Error)]
#[error("{origin} {kind} {namespace}/{name}: {message}")]
pub struct ModelError {
    pub origin: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub message: String,
}

/// One object read into its type, or why it could not be.
enum Typed {
    Policy(Object<AccessPolicySpec>),
    Backend(Object<BackendSpec>),
    Gateway(Object<GatewaySpec>),
    Route(Object<HttpRouteSpec>),
    Grant(Object<ReferenceGrantSpec>),
    Secret(Object<BTreeMap<String, String>>),
    ConfigMap(Object<BTreeMap<String, String>>),
    RequestAuthentication(Object<request_authentication::RequestAuthenticationSpec>),
    Namespace(Object<BTreeMap<String, String>>),
    /// An XAccessPolicy the API server would refuse.
    Rejected(RejectedPolicy),
    Invalid(ModelError),
    /// A kind Toolgate does not read.
    Ignored,
}

impl Inventory {
    /// Types the objects. `default_ns` applies to objects without `metadata.namespace`.
    /// XAccessPolicy v0alpha0 objects are converted to v1alpha1 first.
    pub fn from_raw(objects: Vec<RawObject>, default_ns: &str) -> (Self, Vec<ModelError>) {
        let mut inv = Inventory::default();
        let mut errors = Vec::new();
        // Objects are typed (validation is most of the work) and dropped independently: in
        // parallel, then collected in input order.
        for typed in crate::par::map(objects, |raw| type_object(raw, default_ns)) {
            match typed {
                Typed::Policy(o) => inv.policies.push(o),
                Typed::Backend(o) => inv.backends.push(o),
                Typed::Gateway(o) => inv.gateways.push(o),
                Typed::Route(o) => inv.routes.push(o),
                Typed::Grant(o) => inv.grants.push(o),
                Typed::Secret(o) => inv.secrets.push(o),
                Typed::ConfigMap(o) => inv.config_maps.push(o),
                Typed::RequestAuthentication(o) => inv.request_authentications.push(o),
                Typed::Namespace(o) => inv.namespaces.push(o),
                Typed::Rejected(r) => inv.rejected_policies.push(r),
                Typed::Invalid(e) => errors.push(e),
                Typed::Ignored => {}
            }
        }
        (inv, errors)
    }

    /// The objects of a multi-document YAML text (documents split on `---` lines), which must all
    /// be readable: for tests.
    #[cfg(test)]
    pub fn from_yaml(yaml: &str) -> Self {
        let raw = yaml
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .enumerate()
            .map(|(doc, text)| RawObject {
                file: "t".into(),
                doc,
                value: yaml_serde::from_str(text).expect("YAML"),
            })
            .collect();
        let (inv, errors) = Inventory::from_raw(raw, "default");
        assert!(errors.is_empty(), "{errors:?}");
        inv
    }

    pub fn secret(&self, namespace: &str, name: &str) -> Option<&Object<BTreeMap<String, String>>> {
        self.secrets
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    pub fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&Object<BTreeMap<String, String>>> {
        self.config_maps
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }
}

fn type_object(raw: RawObject, default_ns: &str) -> Typed {
    // The API server's checks first: what it would refuse is never enforced; what it accepts is
    // read as it would store it (with defaults).
    let raw = match admit(&raw.value, default_ns) {
        Admission::NotOurs => raw,
        Admission::Stored(value) => RawObject { value, ..raw },
        Admission::Refused(errors) => return refused(&raw, default_ns, &errors),
    };
    read(&raw, default_ns)
        .unwrap_or_else(|message| Typed::Invalid(model_error(&raw, default_ns, message)))
}

/// An object the API server accepts (or that is not ours) read into its type.
fn read(raw: &RawObject, default_ns: &str) -> Result<Typed, String> {
    let group = raw.api_version().split('/').next().unwrap_or("");
    match (group, raw.kind()) {
        (GROUP, "XAccessPolicy") => typed(raw, default_ns, || {
            crate::convert::policy_spec_v1alpha1(&raw.value)
        })
        .map(Typed::Policy),
        (GROUP, "XBackend") => typed(raw, default_ns, || spec_of(raw)).map(Typed::Backend),
        (GATEWAY_GROUP, "Gateway") => {
            typed(raw, default_ns, || gateway_spec(raw)).map(Typed::Gateway)
        }
        (GATEWAY_GROUP, "HTTPRoute") => {
            typed(raw, default_ns, || route_spec(raw)).map(Typed::Route)
        }
        (GATEWAY_GROUP, "ReferenceGrant") => {
            typed(raw, default_ns, || spec_of(raw)).map(Typed::Grant)
        }
        ("v1", "Secret") => {
            typed(raw, default_ns, || read_spec(&data_of(raw, true))).map(Typed::Secret)
        }
        ("v1", "ConfigMap") => {
            typed(raw, default_ns, || read_spec(&data_of(raw, false))).map(Typed::ConfigMap)
        }
        ("v1", "Namespace") => typed(raw, default_ns, || labels_of(raw)).map(Typed::Namespace),
        (request_authentication::ISTIO_SECURITY_GROUP, "RequestAuthentication") => {
            typed(raw, default_ns, || spec_of(raw)).map(Typed::RequestAuthentication)
        }
        _ => Ok(Typed::Ignored),
    }
}

/// An object of ours the API server would refuse: a policy is kept for its status, anything else
/// is an error.
fn refused(raw: &RawObject, default_ns: &str, errors: &[FieldError]) -> Typed {
    let message = errors
        .iter()
        .map(|e| {
            if e.path.is_empty() {
                e.message.clone()
            } else {
                format!("{}: {}", e.path, e.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    if raw.kind() != "XAccessPolicy" {
        return Typed::Invalid(model_error(raw, default_ns, message));
    }
    let target_refs = raw
        .value
        .pointer("/spec/targetRefs")
        .and_then(|t| Deserialize::deserialize(t).ok())
        .unwrap_or_default();
    Typed::Rejected(RejectedPolicy {
        namespace: raw.namespace(default_ns).to_string(),
        name: raw.name().to_string(),
        target_refs,
        message,
    })
}

fn model_error(raw: &RawObject, default_ns: &str, message: String) -> ModelError {
    ModelError {
        origin: raw.origin(),
        kind: raw.kind().to_string(),
        namespace: raw.namespace(default_ns).to_string(),
        name: raw.name().to_string(),
        message,
    }
}

/// The object's `spec` read into its type.
fn spec_of<T: DeserializeOwned>(raw: &RawObject) -> Result<T, String> {
    read_spec(raw.value.get("spec").unwrap_or(&Value::Null))
}

/// A Gateway's `spec`, read as Toolgate read it with its own types before the `gateway-api` ones:
/// `tls.frontend` without `default` (Gateway API requires one) is read as with an empty `default`,
/// which asks for no client certificate, and ports must fit in 16 bits.
fn gateway_spec(raw: &RawObject) -> Result<GatewaySpec, String> {
    let spec = raw.value.get("spec").unwrap_or(&Value::Null);
    let frontend = spec.pointer("/tls/frontend").and_then(Value::as_object);
    let spec: GatewaySpec = if frontend.is_some_and(|f| !f.contains_key("default")) {
        let mut spec = spec.clone();
        spec["tls"]["frontend"]["default"] = Value::Object(serde_json::Map::new());
        read_spec(&spec)?
    } else {
        read_spec(spec)?
    };
    let per_port = spec
        .tls
        .iter()
        .flat_map(|t| &t.frontend)
        .flat_map(|f| f.per_port.iter().flatten())
        .map(|p| p.port);
    fits::<u16>(spec.listeners.iter().map(|l| l.port).chain(per_port), "u16")?;
    Ok(spec)
}

/// An HTTPRoute's `spec`; ports must fit in 16 bits and weights must not be negative, as when
/// Toolgate read them with its own types.
fn route_spec(raw: &RawObject) -> Result<HttpRouteSpec, String> {
    let spec: HttpRouteSpec = spec_of(raw)?;
    let backends = || {
        spec.rules
            .iter()
            .flatten()
            .flat_map(|r| r.backend_refs.iter().flatten())
    };
    let parent_ports = spec.parent_refs.iter().flatten().filter_map(|p| p.port);
    fits::<u16>(parent_ports.chain(backends().filter_map(|b| b.port)), "u16")?;
    fits::<u32>(backends().filter_map(|b| b.weight), "u32")?;
    Ok(spec)
}

/// The error serde gives for an integer out of the range of `T` (named `expected`).
fn fits<T: TryFrom<i32>>(
    mut values: impl Iterator<Item = i32>,
    expected: &str,
) -> Result<(), String> {
    match values.find(|&v| T::try_from(v).is_err()) {
        Some(v) => Err(format!(
            "spec: invalid value: integer `{v}`, expected {expected}"
        )),
        None => Ok(()),
    }
}

/// `spec` is only computed once `metadata` has been read, so that an object with both wrong is
/// reported for its metadata.
fn typed<T>(
    raw: &RawObject,
    default_ns: &str,
    spec: impl FnOnce() -> Result<T, String>,
) -> Result<Object<T>, String> {
    let meta = raw
        .value
        .get("metadata")
        .map(Meta::deserialize)
        .transpose()
        .map_err(|e| format!("metadata: {e}"))?
        .ok_or("metadata: missing")?;
    let spec = spec()?;
    Ok(Object {
        namespace: meta
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| default_ns.to_string()),
        name: meta.name,
        creation_timestamp: meta.creation_timestamp,
        generation: meta.generation,
        annotations: meta
            .annotations
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
            .collect(),
        spec,
        origin: raw.origin(),
    })
}

/// `metadata.labels` as text.
fn labels_of(raw: &RawObject) -> Result<BTreeMap<String, String>, String> {
    read_spec(
        raw.value
            .pointer("/metadata/labels")
            .unwrap_or(&Value::Null),
    )
    .map(Option::unwrap_or_default)
}

/// `data` (base64, for Secrets) merged with `stringData`, as text.
fn data_of(raw: &RawObject, base64: bool) -> Value {
    use base64::Engine;
    let mut out = serde_json::Map::new();
    if let Some(Value::Object(data)) = raw.value.get("data") {
        for (k, v) in data {
            let Some(s) = v.as_str() else { continue };
            let text = if base64 {
                base64::engine::general_purpose::STANDARD
                    .decode(s.split_whitespace().collect::<String>())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
            } else {
                Some(s.to_string())
            };
            if let Some(t) = text {
                out.insert(k.clone(), Value::String(t));
            }
        }
    }
    if let Some(Value::Object(data)) = raw.value.get("stringData") {
        for (k, v) in data {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}
