//! XAccessPolicy versions: v1alpha1 is what Toolgate works with; v0alpha0 objects are converted on
//! read (docs/semantics.md §1).

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::api::{v0alpha0, AccessPolicySpec};

/// A spec (or what stands for it) read into its type, borrowing rather than copying the value.
pub fn read_spec<T: DeserializeOwned>(spec: &Value) -> Result<T, String> {
    T::deserialize(spec).map_err(|e| format!("spec: {e}"))
}

/// The v1alpha1 `spec` of an XAccessPolicy object of any served version.
pub fn policy_spec_v1alpha1(object: &Value) -> Result<AccessPolicySpec, String> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = object.get("spec").unwrap_or(&Value::Null);
    match api_version.rsplit('/').next() {
        Some("v1alpha1") => read_spec(spec),
        Some("v0alpha0") => {
            let old =
                v0alpha0::AccessPolicySpec::deserialize(spec).map_err(|e| format!("spec: {e}"))?;
            let converted = old.to_v1alpha1();
            if converted.external_auth.is_some() {
                // Dropping the authorizer would let through what it should judge: refuse instead.
                return Err(
                    "v0alpha0 ExternalAuth rules are not enforced by this version of Toolgate; \
                            write the policy as v1alpha1"
                        .into(),
                );
            }
            // Through JSON, as a v1alpha1 object would be read.
            read_spec(&serde_json::to_value(converted.allow).map_err(|e| e.to_string())?)
        }
        Some(other) => Err(format!(
            "apiVersion {other} of XAccessPolicy is not supported"
        )),
        None => Err("apiVersion missing".into()),
    }
}
