//! XAccessPolicy versions: v1alpha1 is what Toolgate works with; older versions are converted on read.

use serde_json::Value;

use crate::inputs::RawObject;

/// The v1alpha1 `spec` of an XAccessPolicy object of any served version.
pub fn policy_spec_v1alpha1(raw: &RawObject) -> Result<Value, String> {
    let spec = raw.value.get("spec").cloned().unwrap_or(Value::Null);
    match raw.api_version().rsplit('/').next() {
        Some("v1alpha1") => Ok(spec),
        Some(other) => Err(format!("apiVersion {other} of XAccessPolicy is not supported yet")),
        None => Err("apiVersion missing".into()),
    }
}
