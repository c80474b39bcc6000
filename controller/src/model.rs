//! The Kubernetes objects Toolgate reads, typed: XAccessPolicy, XBackend and the parts of Gateway,
//! HTTPRoute, Secret and ConfigMap that topology and rendering use.
//!
//! Gateway API types are declared here with only the fields we read rather than taken from the
//! `gateway-api` crate, which would bring kube and k8s-openapi into every CLI build.

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
}

/// A typed object with its namespace resolved.
#[derive(Clone, Debug)]
pub struct Object<T> {
    pub namespace: String,
    pub name: String,
    pub creation_timestamp: Option<String>,
    pub generation: Option<i64>,
    pub spec: T,
    pub origin: String,
}

impl<T> Object<T> {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub tls: Option<GatewayTls>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    pub port: u16,
    pub protocol: String,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: Option<RouteNamespaces>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (default), `All` or `Selector` (not supported offline: treated as `Same`).
    #[serde(default)]
    pub from: Option<String>,
}

impl Listener {
    pub fn admits_routes_from(&self, gateway_ns: &str, route_ns: &str) -> bool {
        let from = self.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref()).and_then(|n| n.from.as_deref());
        from == Some("All") || gateway_ns == route_ns
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<ObjectRef>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    #[serde(default)]
    pub frontend: Option<FrontendTls>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTls {
    #[serde(default)]
    pub default: Option<TlsConfig>,
    #[serde(default)]
    pub per_port: Vec<PerPortTls>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PerPortTls {
    pub port: u16,
    pub tls: TlsConfig,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsConfig {
    #[serde(default)]
    pub validation: Option<TlsValidation>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<ObjectRef>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

impl GatewaySpec {
    /// The client-certificate CA references in force for a listener port (`perPort` wins over `default`).
    pub fn client_ca_refs(&self, port: u16) -> &[ObjectRef] {
        let Some(frontend) = self.tls.as_ref().and_then(|t| t.frontend.as_ref()) else { return &[] };
        let config = frontend.per_port.iter().find(|p| p.port == port).map(|p| &p.tls).or(frontend.default.as_ref());
        config.and_then(|c| c.validation.as_ref()).map_or(&[], |v| &v.ca_certificate_refs)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<RouteRule>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub section_name: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRule {
    #[serde(default)]
    pub matches: Vec<RouteMatch>,
    #[serde(default)]
    pub filters: Vec<RouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
    #[serde(default)]
    pub timeouts: Option<RouteTimeouts>,
}

/// Gateway API `HTTPRouteTimeouts` (durations like `10s`, `1m30s`, `500ms`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTimeouts {
    #[serde(default)]
    pub request: Option<String>,
    #[serde(default)]
    pub backend_request: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    #[serde(default)]
    pub path: Option<RoutePathMatch>,
    #[serde(default)]
    pub headers: Vec<RouteHeaderMatch>,
    #[serde(default)]
    pub query_params: Vec<RouteHeaderMatch>,
    #[serde(default)]
    pub method: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutePathMatch {
    #[serde(rename = "type", default)]
    pub match_type: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteHeaderMatch {
    #[serde(rename = "type", default)]
    pub match_type: Option<String>,
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteFilter {
    #[serde(rename = "type")]
    pub filter_type: String,
    #[serde(default)]
    pub url_rewrite: Option<UrlRewrite>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    #[serde(rename = "type")]
    pub modifier_type: String,
    #[serde(default)]
    pub replace_full_path: Option<String>,
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub weight: Option<u32>,
}

impl BackendRef {
    pub fn is_xbackend(&self) -> bool {
        self.group.as_deref() == Some(GROUP) && self.kind.as_deref() == Some("XBackend")
    }
    pub fn is_service(&self) -> bool {
        self.group.as_deref().unwrap_or("").is_empty() && self.kind.as_deref().unwrap_or("Service") == "Service"
    }
}

/// Every object the commands read, typed. Unknown kinds are ignored.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub policies: Vec<Object<AccessPolicySpec>>,
    pub backends: Vec<Object<BackendSpec>>,
    pub gateways: Vec<Object<GatewaySpec>>,
    pub routes: Vec<Object<HttpRouteSpec>>,
    /// Secrets and ConfigMaps as `(kind, namespace/name) -> data` with values decoded to text.
    pub secrets: Vec<Object<BTreeMap<String, String>>>,
    pub config_maps: Vec<Object<BTreeMap<String, String>>>,
    /// XAccessPolicies that fail the CRD validation: never enforced, reported as `Invalid`.
    pub rejected_policies: Vec<RejectedPolicy>,
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
    Secret(Object<BTreeMap<String, String>>),
    ConfigMap(Object<BTreeMap<String, String>>),
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
                Typed::Secret(o) => inv.secrets.push(o),
                Typed::ConfigMap(o) => inv.config_maps.push(o),
                Typed::Rejected(r) => inv.rejected_policies.push(r),
                Typed::Invalid(e) => errors.push(e),
                Typed::Ignored => {}
            }
        }
        (inv, errors)
    }

    pub fn secret(&self, namespace: &str, name: &str) -> Option<&Object<BTreeMap<String, String>>> {
        self.secrets.iter().find(|s| s.namespace == namespace && s.name == name)
    }

    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&Object<BTreeMap<String, String>>> {
        self.config_maps.iter().find(|s| s.namespace == namespace && s.name == name)
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
    read(&raw, default_ns).unwrap_or_else(|message| Typed::Invalid(model_error(&raw, default_ns, message)))
}

/// An object the API server accepts (or that is not ours) read into its type.
fn read(raw: &RawObject, default_ns: &str) -> Result<Typed, String> {
    let group = raw.api_version().split('/').next().unwrap_or("");
    match (group, raw.kind()) {
        (GROUP, "XAccessPolicy") => {
            typed(raw, default_ns, || crate::convert::policy_spec_v1alpha1(&raw.value)).map(Typed::Policy)
        }
        (GROUP, "XBackend") => typed(raw, default_ns, || spec_of(raw)).map(Typed::Backend),
        (GATEWAY_GROUP, "Gateway") => typed(raw, default_ns, || spec_of(raw)).map(Typed::Gateway),
        (GATEWAY_GROUP, "HTTPRoute") => typed(raw, default_ns, || spec_of(raw)).map(Typed::Route),
        ("v1", "Secret") => typed(raw, default_ns, || read_spec(&data_of(raw, true))).map(Typed::Secret),
        ("v1", "ConfigMap") => typed(raw, default_ns, || read_spec(&data_of(raw, false))).map(Typed::ConfigMap),
        _ => Ok(Typed::Ignored),
    }
}

/// An object of ours the API server would refuse: a policy is kept for its status, anything else
/// is an error.
fn refused(raw: &RawObject, default_ns: &str, errors: &[FieldError]) -> Typed {
    let message = errors
        .iter()
        .map(|e| if e.path.is_empty() { e.message.clone() } else { format!("{}: {}", e.path, e.message) })
        .collect::<Vec<_>>()
        .join("; ");
    if raw.kind() != "XAccessPolicy" {
        return Typed::Invalid(model_error(raw, default_ns, message));
    }
    let target_refs =
        raw.value.pointer("/spec/targetRefs").and_then(|t| Deserialize::deserialize(t).ok()).unwrap_or_default();
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

/// `spec` is only computed once `metadata` has been read, so that an object with both wrong is
/// reported for its metadata.
fn typed<T>(raw: &RawObject, default_ns: &str, spec: impl FnOnce() -> Result<T, String>) -> Result<Object<T>, String> {
    let meta = raw
        .value
        .get("metadata")
        .map(Meta::deserialize)
        .transpose()
        .map_err(|e| format!("metadata: {e}"))?
        .ok_or("metadata: missing")?;
    let spec = spec()?;
    Ok(Object {
        namespace: meta.namespace.filter(|n| !n.is_empty()).unwrap_or_else(|| default_ns.to_string()),
        name: meta.name,
        creation_timestamp: meta.creation_timestamp,
        generation: meta.generation,
        spec,
        origin: raw.origin(),
    })
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
