//! Istio's `RequestAuthentication` (security.istio.io/v1) as the model types it: the fields Toolgate
//! reads. What a Gateway's RequestAuthentications become under plain Envoy (the `jwt_authn` filter)
//! is `crate::request_authn`, above the model (docs/semantics.md §6b).

use serde::Deserialize;

pub const ISTIO_SECURITY_GROUP: &str = "security.istio.io";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestAuthenticationSpec {
    #[serde(default)]
    pub target_refs: Vec<TargetRef>,
    #[serde(default)]
    pub jwt_rules: Vec<JwtRule>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct TargetRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtRule {
    pub issuer: String,
    #[serde(default)]
    pub audiences: Vec<String>,
    #[serde(default)]
    pub jwks: Option<String>,
    #[serde(default, alias = "jwks_uri")]
    pub jwks_uri: Option<String>,
    #[serde(default)]
    pub from_headers: Vec<JwtHeader>,
    #[serde(default)]
    pub from_params: Vec<String>,
    #[serde(default)]
    pub from_cookies: Vec<String>,
    #[serde(default)]
    pub forward_original_token: bool,
    #[serde(default)]
    pub output_payload_to_header: Option<String>,
    #[serde(default)]
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub space_delimited_claims: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct JwtHeader {
    pub name: String,
    #[serde(default)]
    pub prefix: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ClaimToHeader {
    pub header: String,
    pub claim: String,
}
