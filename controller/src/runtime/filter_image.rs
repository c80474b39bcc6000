//! Whether the filter that gateways load can read the plans this controller writes, reported on each
//! enforced Gateway as `toolgate.dev/FilterCompatible`.
//!
//! A filter reads one plan version (`toolgate_policy::plan::PLAN_VERSION`); given another it refuses
//! the plan and denies every call (fail closed), which Envoy's log alone shows. `make release` puts
//! the version the filter reads in its OCI image's manifest, as the annotation
//! `dev.toolgate.plan-version`. When `--wasm-url` is `oci://`, the controller reads that manifest
//! from the registry (as Istio's agent will) and compares:
//!
//! - `True`/`Compatible`: the image reads the version this controller writes;
//! - `False`/`FilterTooOld` (or `FilterTooNew`): it reads another; the message says what to upgrade;
//! - `Unknown`/`FilterVersionUnknown`: the manifest could not be read (the registry's answer is in
//!   the message) or has no such annotation (an image `make release` did not build).
//!
//! Other URLs (`file://`, `http(s)://`) get no condition: nothing says which version they read.
//! The registry is read anonymously (with the bearer-token exchange registries use for anonymous
//! pulls); a registry that needs credentials gives `Unknown`. Plain HTTP is used for loopback
//! registries and those in `--wasm-insecure-registries` (Istio's `WASM_INSECURE_REGISTRIES`), HTTPS
//! with the Mozilla roots otherwise (the controller's image has no CA bundle). A digest-pinned URL's
//! manifest is checked against the digest.
//!
//! The manifest is read with hyper, which the controller has already: an OCI client crate (e.g.
//! oci-client) brings reqwest and a second TLS stack with a C build into the static binary, for one
//! GET.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_policy::api::Condition;
use toolgate_policy::plan::PLAN_VERSION;

pub const FILTER_COMPATIBLE: &str = "toolgate.dev/FilterCompatible";
/// The field manager of the condition (beside `affected::FIELD_MANAGER`'s).
pub const FIELD_MANAGER: &str = "toolgate-filter-status";
/// The manifest annotation `make release` writes (release/release.py).
pub const PLAN_VERSION_ANNOTATION: &str = "dev.toolgate.plan-version";
/// Manifests are a few hundred bytes; a larger answer is not one.
const MAX_BODY: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);
const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// An `oci://` URL as Istio reads it: `oci://registry[:port]/repository[:tag][@sha256:digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub registry: String,
    pub repository: String,
    /// A tag, or the digest (`sha256:…`) when the URL has one.
    pub reference: String,
    pub digest: Option<String>,
}

/// `None` when the URL is not `oci://`.
pub fn parse(url: &str) -> Option<Result<ImageRef, String>> {
    let rest = url.strip_prefix("oci://")?;
    Some(parse_ref(rest).ok_or_else(|| format!("{url}: not an OCI image reference")))
}

fn parse_ref(rest: &str) -> Option<ImageRef> {
    let (name, digest) = match rest.split_once('@') {
        Some((n, d)) => {
            let hex = d.strip_prefix("sha256:")?;
            (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
            (n, Some(d.to_ascii_lowercase()))
        }
        None => (rest, None),
    };
    let (registry, path) = match name.split_once('/') {
        // Docker's rule: the first component is a registry when it has a dot or a port, or is localhost.
        Some((first, path)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_string(), path)
        }
        _ => ("index.docker.io".to_string(), name),
    };
    // A tag follows the last ':' after the last '/'.
    let slash = path.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match path[slash..].rfind(':') {
        Some(i) => (&path[..slash + i], Some(&path[slash + i + 1..])),
        None => (path, None),
    };
    let repository = if registry == "index.docker.io" && !repository.contains('/') {
        format!("library/{repository}")
    } else {
        repository.to_string()
    };
    if repository.is_empty() || tag == Some("") {
        return None;
    }
    let reference = match (&digest, tag) {
        (Some(d), _) => d.clone(),
        (None, t) => t.unwrap_or("latest").to_string(),
    };
    Some(ImageRef {
        registry,
        repository,
        reference,
        digest,
    })
}

/// What the image's manifest says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterVersion {
    Reads(u32),
    NoAnnotation,
    Unreadable(String),
}

/// The plan version the manifest declares.
pub fn version_of(manifest: &Value) -> FilterVersion {
    match manifest
        .get("annotations")
        .and_then(|a| a.get(PLAN_VERSION_ANNOTATION))
    {
        None => FilterVersion::NoAnnotation,
        Some(v) => match v.as_str().and_then(|s| s.parse().ok()) {
            Some(n) => FilterVersion::Reads(n),
            None => FilterVersion::Unreadable(format!(
                "its {PLAN_VERSION_ANNOTATION} annotation is {v}, not a version number"
            )),
        },
    }
}

/// The condition for a filter image at `url` (its `lastTransitionTime` is `now`).
pub fn condition(url: &str, version: &FilterVersion, now: &str) -> Condition {
    let (status, reason, message) = match version {
        FilterVersion::Reads(n) if *n == PLAN_VERSION => (
            "True",
            "Compatible",
            format!(
                "the filter image {url} reads plan version {n}, the version this controller writes"
            ),
        ),
        FilterVersion::Reads(n) => {
            let (reason, fix) = if *n < PLAN_VERSION {
                (
                    "FilterTooOld",
                    "upgrade the filter to this controller's release",
                )
            } else {
                (
                    "FilterTooNew",
                    "upgrade the controller to the filter's release",
                )
            };
            (
                "False",
                reason,
                format!(
                    "the filter image {url} reads plan version {n}, this controller writes version \
                     {PLAN_VERSION}: the gateway's filter refuses the plans and denies every call \
                     through this Gateway until the two match; {fix} (helm upgrade pins both)"
                ),
            )
        }
        FilterVersion::NoAnnotation => (
            "Unknown",
            "FilterVersionUnknown",
            format!(
                "the filter image {url} has no {PLAN_VERSION_ANNOTATION} annotation (not built by \
                 make release?): whether it reads plan version {PLAN_VERSION} is not known"
            ),
        ),
        FilterVersion::Unreadable(e) => (
            "Unknown",
            "FilterVersionUnknown",
            format!("cannot read the filter image {url}: {e}"),
        ),
    };
    Condition {
        condition_type: FILTER_COMPATIBLE.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: None,
        last_transition_time: now.to_string(),
    }
}

/// Reads the plan version of the image at `image` from its registry.
pub async fn read(image: &ImageRef, insecure: &[String]) -> FilterVersion {
    match tokio::time::timeout(TIMEOUT, manifest(image, insecure)).await {
        Ok(Ok(m)) => version_of(&m),
        Ok(Err(e)) => FilterVersion::Unreadable(e),
        Err(_) => FilterVersion::Unreadable(format!("no answer from {} in 10 s", image.registry)),
    }
}

fn plain_http(registry: &str, insecure: &[String]) -> bool {
    let host = registry
        .rsplit_once(':')
        .map_or(registry, |(h, _)| h)
        .trim_matches(['[', ']']);
    matches!(host, "localhost" | "127.0.0.1" | "::1")
        || insecure.iter().any(|r| r == "*" || r == registry)
}

async fn manifest(image: &ImageRef, insecure: &[String]) -> Result<Value, String> {
    let scheme = if plain_http(&image.registry, insecure) {
        "http"
    } else {
        "https"
    };
    let url = format!(
        "{scheme}://{}/v2/{}/manifests/{}",
        image.registry, image.repository, image.reference
    );
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .build();
    let client: HttpsClient = Client::builder(TokioExecutor::new()).build(tls);
    let (mut status, challenge, mut body) = get(&client, &url, ACCEPT, None).await?;
    if status == StatusCode::UNAUTHORIZED {
        // Anonymous pulls: the registry names a token service in its challenge (distribution's
        // token authentication), which hands out a pull token without credentials.
        let token_url = challenge.as_deref().and_then(token_url).ok_or_else(|| {
            format!("GET {url}: 401 without a bearer challenge (credentials needed)")
        })?;
        let (s, _, b) = get(&client, &token_url, "application/json", None).await?;
        if !s.is_success() {
            return Err(format!("GET {token_url}: {s} (credentials needed)"));
        }
        let token: Value = serde_json::from_slice(&b).map_err(|e| format!("{token_url}: {e}"))?;
        let token = token
            .get("token")
            .or_else(|| token.get("access_token"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{token_url}: no token in the answer"))?;
        (status, _, body) = get(&client, &url, ACCEPT, Some(token)).await?;
    }
    if !status.is_success() {
        return Err(format!("GET {url}: {status}"));
    }
    if let Some(d) = &image.digest {
        let got = format!("sha256:{:x}", Sha256::digest(&body));
        if &got != d {
            return Err(format!(
                "GET {url}: the manifest's digest is {got}, not the URL's"
            ));
        }
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not a manifest: {e}"))
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// GET: the status, the `WWW-Authenticate` challenge and the body (at most `MAX_BODY`).
async fn get(
    client: &HttpsClient,
    url: &str,
    accept: &str,
    token: Option<&str>,
) -> Result<(StatusCode, Option<String>, Bytes), String> {
    let mut req = Request::get(url).header("accept", accept);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req
        .body(Empty::new())
        .map_err(|e| format!("GET {url}: {e}"))?;
    let resp = client
        .request(req)
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let status = resp.status();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?
        .to_bytes();
    Ok((status, challenge, body))
}

/// The token URL of a `Bearer realm="…",service="…",scope="…"` challenge.
fn token_url(challenge: &str) -> Option<String> {
    let params = challenge.strip_prefix("Bearer ")?;
    let mut realm = None;
    let mut query = Vec::new();
    // key="value" pairs; values are quoted and may hold commas (scope lists).
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let after = after.strip_prefix('"')?;
        let (value, tail) = after.split_once('"')?;
        match key.trim() {
            "realm" => realm = Some(value.to_string()),
            k @ ("service" | "scope") => query.push(format!("{k}={}", encode(value))),
            _ => {}
        }
        rest = tail.trim_start_matches([',', ' ']);
    }
    let realm = realm?;
    let sep = if realm.contains('?') { '&' } else { '?' };
    Some(if query.is_empty() {
        realm
    } else {
        format!("{realm}{sep}{}", query.join("&"))
    })
}

/// Percent-encoding of a query value (what a scope such as `repository:a/b:pull` needs).
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Reads the filter image's plan version in the background (`filter_image`), again every minute
/// while it cannot be read and every ten minutes after (a tag may move; a digest may not, so a
/// digest-pinned image read once is done); each new answer wakes the reconciler.
pub(super) fn watch_filter_image(
    args: &super::ControllerArgs,
    state: &Arc<std::sync::Mutex<Option<FilterVersion>>>,
    changed: &Arc<Notify>,
) {
    let Some(image) = parse(&args.wasm_url) else {
        return;
    };
    let (state, changed) = (state.clone(), changed.clone());
    let insecure = args.wasm_insecure_registries.clone();
    let url = args.wasm_url.clone();
    tokio::spawn(async move {
        loop {
            let (version, pinned) = match &image {
                Ok(image) => (read(image, &insecure).await, image.digest.is_some()),
                Err(e) => (FilterVersion::Unreadable(e.clone()), true),
            };
            let readable = !matches!(version, FilterVersion::Unreadable(_));
            if let Ok(mut s) = state.lock() {
                if s.as_ref() != Some(&version) {
                    tracing::info!(url = %url, "filter image: {version:?}");
                    *s = Some(version);
                    changed.notify_one();
                }
            }
            if pinned && (readable || image.is_err()) {
                return;
            }
            let minutes = if readable { 10 } else { 1 };
            tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn oci_urls_as_istio_reads_them() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let r = parse(&format!(
            "oci://127.0.0.1:5000/toolgate/toolgate-filter@{d}"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.reference.as_str()
            ),
            ("127.0.0.1:5000", "toolgate/toolgate-filter", d.as_str())
        );
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        let r = parse("oci://ghcr.io/org/filter:0.1.0").unwrap().unwrap();
        assert_eq!(
            (r.repository.as_str(), r.reference.as_str()),
            ("org/filter", "0.1.0")
        );
        let r = parse("oci://localhost/filter").unwrap().unwrap();
        assert_eq!(
            (r.registry.as_str(), r.reference.as_str()),
            ("localhost", "latest")
        );
        let r = parse("oci://filter:1").unwrap().unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("index.docker.io", "library/filter")
        );
        assert!(parse("file:///x.wasm").is_none());
        assert!(parse("oci://ghcr.io/org/filter@sha256:short")
            .unwrap()
            .is_err());
        assert!(parse("oci://ghcr.io/org/filter:").unwrap().is_err());
    }

    #[test]
    fn the_manifest_annotation_decides() {
        let m = |v: Value| json!({"annotations": {PLAN_VERSION_ANNOTATION: v}});
        assert_eq!(version_of(&m(json!("1"))), FilterVersion::Reads(1));
        assert_eq!(version_of(&json!({})), FilterVersion::NoAnnotation);
        assert!(matches!(
            version_of(&m(json!("x"))),
            FilterVersion::Unreadable(_)
        ));
        let now = "2026-01-01T00:00:00Z";
        let c = condition("oci://r/f", &FilterVersion::Reads(PLAN_VERSION), now);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Compatible")
        );
        let c = condition("oci://r/f", &FilterVersion::Reads(PLAN_VERSION - 1), now);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "FilterTooOld")
        );
        assert!(c.message.contains("denies every call"), "{}", c.message);
        let c = condition("oci://r/f", &FilterVersion::Reads(PLAN_VERSION + 1), now);
        assert_eq!(c.reason, "FilterTooNew");
        let c = condition("oci://r/f", &FilterVersion::NoAnnotation, now);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "FilterVersionUnknown")
        );
    }

    #[test]
    fn anonymous_token_challenges() {
        assert_eq!(
            token_url(r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/f:pull""#)
                .as_deref(),
            Some("https://auth.docker.io/token?service=registry.docker.io&scope=repository%3Alibrary%2Ff%3Apull")
        );
        assert_eq!(token_url("Basic realm=\"x\""), None);
        assert_eq!(token_url("Bearer service=\"s\""), None);
    }

    #[test]
    fn loopback_and_listed_registries_are_plain_http() {
        assert!(plain_http("127.0.0.1:5000", &[]));
        assert!(plain_http("localhost:5000", &[]));
        assert!(plain_http("[::1]:5000", &[]));
        assert!(!plain_http("ghcr.io", &[]));
        assert!(plain_http(
            "reg.internal:5000",
            &["reg.internal:5000".into()]
        ));
        assert!(plain_http("ghcr.io", &["*".into()]));
    }
}
