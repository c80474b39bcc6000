//! XAccessPolicy versions: v1alpha1 is what Toolgate works with; v0alpha0 objects are converted on
//! read (SPEC §1).

use serde_json::Value;
use toolgate_policy::api::v0alpha0;

use crate::inputs::RawObject;

/// The v1alpha1 `spec` of an XAccessPolicy object of any served version.
pub fn policy_spec_v1alpha1(raw: &RawObject) -> Result<Value, String> {
    let spec = raw.value.get("spec").cloned().unwrap_or(Value::Null);
    match raw.api_version().rsplit('/').next() {
        Some("v1alpha1") => Ok(spec),
        Some("v0alpha0") => {
            let old: v0alpha0::AccessPolicySpec = serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?;
            let converted = old.to_v1alpha1();
            if converted.external_auth.is_some() {
                // Dropping the authorizer would let through what it should judge: refuse instead.
                return Err("v0alpha0 ExternalAuth rules are not enforced by this version of Toolgate; \
                            write the policy as v1alpha1"
                    .into());
            }
            serde_json::to_value(converted.allow).map_err(|e| e.to_string())
        }
        Some(other) => Err(format!("apiVersion {other} of XAccessPolicy is not supported")),
        None => Err("apiVersion missing".into()),
    }
}
