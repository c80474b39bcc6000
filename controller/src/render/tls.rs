//! The downstream TLS of an HTTPS listener: server certificate, key and client CAs written to `certs/`.

use std::path::PathBuf;

use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;
use serde_json::{json, Value};

use super::Ctx;
use crate::cli::{self, Failure};
use crate::model::{self, CaRef, Listener};
use crate::topology::GatewayOut;

impl Ctx<'_> {
    pub(super) fn downstream_tls(
        &self,
        gw: &GatewayOut,
        listener: &Listener,
    ) -> Result<Value, Failure> {
        let ns = &gw.gateway.namespace;
        let tls = listener.tls.as_ref();
        if let Some(GatewayListenersTlsMode::Passthrough) = tls.and_then(|t| t.mode.as_ref()) {
            eprintln!(
                "error: listener {}: TLS mode Passthrough is not supported (Terminate only)",
                listener.name
            );
            return Err(Failure::Invalid);
        }
        let cert_ref = tls
            .and_then(|t| t.certificate_refs.as_ref())
            .and_then(|refs| refs.first())
            .ok_or_else(|| {
                eprintln!(
                    "error: listener {}: HTTPS needs tls.certificateRefs",
                    listener.name
                );
                Failure::Invalid
            })?;
        let secret_ns = cert_ref.namespace.as_deref().unwrap_or(ns);
        let secret = self.inv.secret(secret_ns, &cert_ref.name).ok_or_else(|| {
            eprintln!(
                "error: listener {}: Secret {secret_ns}/{} not found in the input",
                listener.name, cert_ref.name
            );
            Failure::Invalid
        })?;
        let (Some(crt), Some(key)) = (secret.spec.get("tls.crt"), secret.spec.get("tls.key"))
        else {
            eprintln!(
                "error: Secret {secret_ns}/{}: needs tls.crt and tls.key",
                cert_ref.name
            );
            return Err(Failure::Invalid);
        };
        let base = format!("{}-{}", listener.name, cert_ref.name);
        let crt_path = self.write_cert(&format!("{base}.crt"), crt)?;
        let key_path = self.write_cert(&format!("{base}.key"), key)?;
        let mut context = json!({
            "common_tls_context": {
                "tls_certificates": [{ "certificate_chain": { "filename": crt_path }, "private_key": { "filename": key_path } }],
            },
        });
        let refs = model::client_ca_refs(&gw.gateway.spec, listener.port);
        let ca = match refs.as_slice() {
            [] => self.options.client_ca.map(str::to_string),
            refs => Some(self.client_ca_bundle(ns, refs)?),
        };
        if let Some(ca) = ca {
            let ca_path = self.write_cert(&format!("{}-client-ca.crt", listener.name), &ca)?;
            context["require_client_certificate"] = json!(true);
            context["common_tls_context"]["validation_context"] =
                json!({ "trusted_ca": { "filename": ca_path } });
        }
        context["@type"] = json!(
            "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
        );
        Ok(json!({ "name": "envoy.transport_sockets.tls", "typed_config": context }))
    }

    fn client_ca_bundle(&self, ns: &str, refs: &[CaRef<'_>]) -> Result<String, Failure> {
        let mut bundle = String::new();
        for r in refs {
            let ref_ns = r.namespace.unwrap_or(ns);
            let kind = r.kind;
            let data = match kind {
                "ConfigMap" => self.inv.config_map(ref_ns, r.name),
                "Secret" => self.inv.secret(ref_ns, r.name),
                _ => None,
            };
            let pem = data.and_then(|d| d.spec.get("ca.crt")).ok_or_else(|| {
                eprintln!(
                    "error: client CA {kind} {ref_ns}/{} with key ca.crt not found in the input",
                    r.name
                );
                Failure::Invalid
            })?;
            bundle.push_str(pem);
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
        }
        Ok(bundle)
    }

    fn write_cert(&self, name: &str, pem: &str) -> Result<PathBuf, Failure> {
        let path = self.dir.join("certs").join(name);
        cli::write_file(&path, pem.as_bytes())?;
        Ok(path)
    }
}
