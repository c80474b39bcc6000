//! Token callers (docs/semantics.md §6b): the payload of a JWT that Envoy's `jwt_authn` filter
//! verified, read from the request's dynamic metadata. Toolgate never parses or verifies a token
//! itself; a claim exists only where Envoy wrote it.
//!
//! Where: filter metadata namespace [`JWT_METADATA_NAMESPACE`], one entry per verified token keyed
//! by its issuer, each a `google.protobuf.Struct` (the payload). This is where Istio's generated
//! `jwt_authn` configuration leaves it (`payload_in_metadata: <issuer>`, pilot/pkg/security/authn/
//! policy_applier.go), and where `toolgate render` configures it too, so the filter reads one place
//! under both.
//!
//! The host hands over the request's dynamic metadata as a serialised
//! `envoy.config.core.v3.Metadata` ([`crate::lifecycle::Host::dynamic_metadata`]); this decodes
//! the namespace's entries. Exactly one verified payload gives the caller's claims; none, or more
//! than one (two tokens of different issuers in one request: which one is "the caller" would be
//! the client's choice), give no claims. The native host, which cannot read the payload's Struct,
//! hands over the same `Metadata`, made by [`metadata_from_payload_header`] from the header
//! `jwt_authn` writes for it, and only where its configuration says that `jwt_authn` writes that
//! header ([`module_config`]): a header no `jwt_authn` writes is the client's to set.

use serde_json::{Map, Number, Value};

/// The filter metadata namespace Envoy's `jwt_authn` writes verified payloads under (the filter's
/// name), as Istio configures it.
pub const JWT_METADATA_NAMESPACE: &str = "envoy.filters.http.jwt_authn";

/// The verified token of a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Auth {
    /// The payload, a JSON object.
    pub claims: Value,
    /// `<iss>/<sub>` (Istio's `request.auth.principal`), "" unless both are strings.
    pub principal: String,
    /// The namespace's `Struct` as Envoy serialised it (issuer -> payload), for an authorizer's
    /// `metadata_context` (what Envoy's ext_authz sends with `metadata_context_namespaces`).
    pub raw: Vec<u8>,
}

impl Auth {
    /// The verified token in serialised `envoy.config.core.v3.Metadata`, if there is exactly one.
    pub fn from_metadata(metadata: &[u8]) -> Option<Auth> {
        let raw = metadata_namespace(metadata, JWT_METADATA_NAMESPACE)?;
        let mut payloads = Vec::new();
        for (field, value) in Fields(raw) {
            if field != Field::Len(1) {
                continue;
            }
            let (_, payload) = map_entry(value?)?;
            payloads.push(payload);
        }
        let [payload] = payloads[..] else { return None };
        // Each entry is a `Value` holding the payload's `Struct`.
        let claims = decode_value(payload?, 0).filter(Value::is_object)?;
        Some(Auth::of_claims(claims, raw.to_vec()))
    }

    /// The token whose payload is `claims` (`toolgate explain`'s `claims:`), with `raw` its
    /// namespace's Struct.
    pub fn of_claims(claims: Value, raw: Vec<u8>) -> Auth {
        let principal = match (claims.get("iss"), claims.get("sub")) {
            (Some(Value::String(iss)), Some(Value::String(sub))) => format!("{iss}/{sub}"),
            _ => String::new(),
        };
        Auth {
            claims,
            principal,
            raw,
        }
    }
}

/// The claims `jwt_authn` turns from a space-delimited string into a list of strings in the
/// metadata (`normalize_payload_in_metadata`), as Istio configures every provider
/// (`scope: "a b"` is `["a", "b"]`), and `toolgate render` too.
pub const SPACE_DELIMITED_CLAIMS: [&str; 2] = ["scope", "permission"];

/// A serialised `envoy.config.core.v3.Metadata` with `claims` (a JSON object, the token's payload)
/// as the one verified payload, keyed by its `iss` claim (or ""): what Envoy's `jwt_authn` leaves
/// (space-delimited claims as lists), for simulated hosts (`toolgate explain`'s `claims:`, tests).
pub fn metadata_with_claims(claims: &Value) -> Vec<u8> {
    metadata_of(
        claims.get("iss").and_then(Value::as_str).unwrap_or(""),
        claims,
    )
}

/// The payload as `jwt_authn` writes it to the metadata: [`SPACE_DELIMITED_CLAIMS`] that are strings
/// become lists of their non-empty space-separated parts.
fn metadata_of(issuer: &str, claims: &Value) -> Vec<u8> {
    let mut claims = claims.clone();
    if let Value::Object(map) = &mut claims {
        for name in SPACE_DELIMITED_CLAIMS {
            if let Some(Value::String(s)) = map.get(name) {
                let parts = s
                    .split(' ')
                    .filter(|p| !p.is_empty())
                    .map(|p| Value::String(p.to_string()))
                    .collect();
                map.insert(name.to_string(), Value::Array(parts));
            }
        }
    }
    let payload = message(|b| value(b, &claims));
    let namespace = message(|b| entry(b, 1, issuer, &payload));
    message(|b| entry(b, 1, JWT_METADATA_NAMESPACE, &namespace))
}

/// The request header `jwt_authn` writes the verified payload to for the native host
/// (`forward_payload_header`, base64url of the payload's JSON), which `toolgate render
/// --native-module` configures, removes from the client's request before `jwt_authn` and removes
/// again before the upstream (docs/semantics.md §6b).
pub const JWT_PAYLOAD_HEADER: &str = "x-toolgate-jwt-payload";

/// Who writes [`JWT_PAYLOAD_HEADER`] on a host that reads claims from it: what the dynamic module's
/// configuration says ([`module_config`]). The module cannot see the filters before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadHeader {
    /// Nobody said: a `jwt_authn` without `forward_payload_header` (Istio's without
    /// `outputPayloadToHeader`, a hand-written one) leaves the header as the client sent it, so it is
    /// never read and there are no claims.
    Unknown,
    /// Every `jwt_authn` provider before the module has `forward_payload_header:
    /// x-toolgate-jwt-payload` (`toolgate render --native-module`): `jwt_authn` removes a client's
    /// copy of every provider's payload header and writes the verified payload after verification.
    JwtAuthn,
}

/// The configuration of the dynamic module (its `filter_config`): the plan, or the plan with what
/// the module may rely on beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleConfig<'a> {
    /// The plan's bytes, as the Wasm filter gets them.
    pub plan: &'a [u8],
    pub payload_header: PayloadHeader,
}

/// The key of the plan in the module's configuration object.
pub const MODULE_PLAN: &str = "plan";
/// The key that says `jwt_authn` writes the verified payload to [`JWT_PAYLOAD_HEADER`] (its value is
/// that header's name, the only one the module reads).
pub const MODULE_JWT_PAYLOAD_HEADER: &str = "jwtPayloadHeader";

/// Reads the dynamic module's configuration: a bare plan (what `render` wrote before the module read
/// claims only where told, and what a hand-written configuration holds), or an object with the plan
/// under [`MODULE_PLAN`] and [`MODULE_JWT_PAYLOAD_HEADER`]. Anything that is not such an object is a
/// bare plan, for the plan loader to accept or refuse; an object with `plan` and an unknown key, or
/// another header, is refused (a misspelt key must not quietly drop the claims, nor a hand-written
/// header name make the module trust a header it does not read).
pub fn module_config(config: &[u8]) -> Result<ModuleConfig<'_>, String> {
    use serde_json::value::RawValue;
    let bare = ModuleConfig {
        plan: config,
        payload_header: PayloadHeader::Unknown,
    };
    let Ok(fields) =
        serde_json::from_slice::<std::collections::BTreeMap<String, &RawValue>>(config)
    else {
        return Ok(bare);
    };
    let Some(plan) = fields.get(MODULE_PLAN) else {
        return Ok(bare);
    };
    let mut out = ModuleConfig {
        plan: plan.get().as_bytes(),
        payload_header: PayloadHeader::Unknown,
    };
    for (key, value) in &fields {
        match key.as_str() {
            MODULE_PLAN => {}
            MODULE_JWT_PAYLOAD_HEADER if serde_json::from_str::<&str>(value.get()).ok() == Some(JWT_PAYLOAD_HEADER) => {
                out.payload_header = PayloadHeader::JwtAuthn;
            }
            MODULE_JWT_PAYLOAD_HEADER => {
                return Err(format!("{MODULE_JWT_PAYLOAD_HEADER} must be {JWT_PAYLOAD_HEADER}, the header the module reads"));
            }
            other => {
                return Err(format!(
                    "unknown key {} beside the plan (known: {MODULE_PLAN}, {MODULE_JWT_PAYLOAD_HEADER})",
                    crate::log_safe::Quoted(other)
                ))
            }
        }
    }
    Ok(out)
}

/// The dynamic module's configuration for `plan_json` where every `jwt_authn` provider before the
/// module writes the verified payload to [`JWT_PAYLOAD_HEADER`] (`forward_payload_header`).
pub fn module_config_with_payload_header(plan_json: &str) -> String {
    format!(
        r#"{{"{MODULE_JWT_PAYLOAD_HEADER}":"{JWT_PAYLOAD_HEADER}","{MODULE_PLAN}":{plan_json}}}"#
    )
}

/// For a host that cannot read the payload's `Struct` (the dynamic module: Envoy 1.40's ABI reads a
/// metadata namespace's keys and top-level scalars only): the serialised `Metadata` the Wasm host
/// would hand over, made from what `jwt_authn` wrote where that host can read it. `issuers` are the
/// keys of the [`JWT_METADATA_NAMESPACE`] namespace (only Envoy's filters write dynamic metadata),
/// `payloads` the values of every [`JWT_PAYLOAD_HEADER`] field of the request.
///
/// The header is read only where `jwt_authn` writes it ([`PayloadHeader::JwtAuthn`]), and counts only
/// beside the metadata: exactly one verified issuer, exactly one header field, a base64url JSON
/// object whose `iss` is that issuer. A header a client sent without a verified token (no issuer
/// in the metadata), or beside one (two fields, or another `iss`), gives no claims, whether or not
/// the configuration removed it first. Where nobody said `jwt_authn` writes it, a client's copy
/// beside its own valid token would pass all of that with the claims it likes: never read there.
pub fn metadata_from_payload_header(
    written_by: PayloadHeader,
    issuers: &[Vec<u8>],
    payloads: &[Vec<u8>],
) -> Option<Vec<u8>> {
    use base64::Engine as _;
    if written_by != PayloadHeader::JwtAuthn {
        return None;
    }
    let ([issuer], [payload]) = (issuers, payloads) else {
        return None;
    };
    let issuer = std::str::from_utf8(issuer).ok()?;
    // Envoy writes it unpadded unless `pad_forward_payload_header`; both are read.
    let trimmed = payload
        .strip_suffix(b"==")
        .or_else(|| payload.strip_suffix(b"="))
        .unwrap_or(payload);
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(trimmed)
        .ok()?;
    let claims: Value = serde_json::from_slice(&json)
        .ok()
        .filter(Value::is_object)?;
    if claims.get("iss").and_then(Value::as_str) != Some(issuer) {
        return None;
    }
    Some(metadata_of(issuer, &claims))
}

fn message(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = Vec::new();
    f(&mut b);
    b
}

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_len(b: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(b, u64::from(field << 3 | 2));
    put_varint(b, bytes.len() as u64);
    b.extend_from_slice(bytes);
}

/// A map entry (`key` -> the message `value`) as field `field`.
fn entry(b: &mut Vec<u8>, field: u32, key: &str, value: &[u8]) {
    let e = message(|e| {
        put_len(e, 1, key.as_bytes());
        put_len(e, 2, value);
    });
    put_len(b, field, &e);
}

/// A JSON value as a `google.protobuf.Value`'s fields.
fn value(b: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => {
            put_varint(b, 1 << 3);
            put_varint(b, 0);
        }
        Value::Number(n) => {
            put_varint(b, 2 << 3 | 1);
            b.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
        }
        Value::String(s) => put_len(b, 3, s.as_bytes()),
        Value::Bool(x) => {
            put_varint(b, 4 << 3);
            put_varint(b, u64::from(*x));
        }
        Value::Object(map) => {
            let st = message(|st| {
                for (k, v) in map {
                    let inner = message(|i| value(i, v));
                    entry(st, 1, k, &inner);
                }
            });
            put_len(b, 5, &st);
        }
        Value::Array(items) => {
            let list = message(|l| {
                for v in items {
                    let inner = message(|i| value(i, v));
                    put_len(l, 1, &inner);
                }
            });
            put_len(b, 6, &list);
        }
    }
}

/// The `Struct` of `namespace` in a serialised `Metadata` (`filter_metadata`, field 1).
fn metadata_namespace<'a>(metadata: &'a [u8], namespace: &str) -> Option<&'a [u8]> {
    let mut found = None;
    for (field, value) in Fields(metadata) {
        if field != Field::Len(1) {
            continue;
        }
        let (key, value) = map_entry(value?)?;
        if key == namespace.as_bytes() {
            found = Some(value?);
        }
    }
    found
}

/// A map entry's key (field 1) and value (field 2, None if absent).
fn map_entry(entry: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (mut key, mut value) = (&[][..], None);
    for (field, v) in Fields(entry) {
        match field {
            Field::Len(1) => key = v?,
            Field::Len(2) => value = Some(v?),
            _ => {}
        }
    }
    Some((key, value))
}

const MAX_DEPTH: usize = 32;

/// A `google.protobuf.Struct` as a JSON object.
fn decode_struct(bytes: &[u8], depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut map = Map::new();
    for (field, entry) in Fields(bytes) {
        if field != Field::Len(1) {
            continue;
        }
        let (key, value) = map_entry(entry?)?;
        let key = std::str::from_utf8(key).ok()?.to_string();
        let value = match value {
            Some(v) => decode_value(v, depth + 1)?,
            None => Value::Null,
        };
        map.insert(key, value);
    }
    Some(Value::Object(map))
}

/// A `google.protobuf.Value`.
fn decode_value(bytes: &[u8], depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut out = Value::Null;
    for (field, v) in Fields(bytes) {
        out = match (field, v) {
            (Field::Varint(1), _) => Value::Null,
            (Field::Fixed64(2, bits), _) => {
                let n = f64::from_bits(bits);
                // Integral numbers (`exp`, `iat`) as integers, as they were in the token.
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Value::Number(Number::from(n as i64))
                } else {
                    Number::from_f64(n).map_or(Value::Null, Value::Number)
                }
            }
            (Field::Len(3), v) => Value::String(std::str::from_utf8(v?).ok()?.to_string()),
            (Field::Varint4(b), _) => Value::Bool(b != 0),
            (Field::Len(5), v) => decode_struct(v?, depth + 1)?,
            (Field::Len(6), v) => {
                let mut list = Vec::new();
                for (f, item) in Fields(v?) {
                    if f == Field::Len(1) {
                        list.push(decode_value(item?, depth + 1)?);
                    }
                }
                Value::Array(list)
            }
            _ => continue,
        };
    }
    Some(out)
}

/// A field's number and wire type (with the varint of field 4 and the fixed64 of field 2 carried:
/// the only scalars read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Varint(u32),
    Varint4(u64),
    Fixed64(u32, u64),
    Len(u32),
    Other,
}

/// The fields of a message; a length-delimited field's bytes, or `None` (and the end) where the
/// message is malformed.
struct Fields<'a>(&'a [u8]);

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

impl<'a> Iterator for Fields<'a> {
    type Item = (Field, Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let fail = |s: &mut Self| {
            s.0 = &[];
            Some((Field::Other, None))
        };
        let Some(key) = varint(&mut self.0) else {
            return fail(self);
        };
        let number = u32::try_from(key >> 3).unwrap_or(0);
        match key & 7 {
            0 => {
                let Some(v) = varint(&mut self.0) else {
                    return fail(self);
                };
                Some((
                    if number == 4 {
                        Field::Varint4(v)
                    } else {
                        Field::Varint(number)
                    },
                    Some(&[]),
                ))
            }
            1 => {
                let Some((bytes, rest)) = self.0.split_first_chunk::<8>() else {
                    return fail(self);
                };
                self.0 = rest;
                Some((
                    Field::Fixed64(number, u64::from_le_bytes(*bytes)),
                    Some(&[]),
                ))
            }
            2 => {
                let Some(len) = varint(&mut self.0).and_then(|l| usize::try_from(l).ok()) else {
                    return fail(self);
                };
                if len > self.0.len() {
                    return fail(self);
                }
                let (v, rest) = self.0.split_at(len);
                self.0 = rest;
                Some((Field::Len(number), Some(v)))
            }
            5 => {
                if self.0.len() < 4 {
                    return fail(self);
                }
                self.0 = &self.0[4..];
                Some((Field::Other, Some(&[])))
            }
            _ => fail(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use toolgate_ext_authz_proto::envoy::config::core::v3::Metadata;
    use toolgate_ext_authz_proto::google::protobuf::{
        value::Kind, ListValue, Struct, Value as PValue,
    };

    fn s(fields: Vec<(&str, PValue)>) -> Struct {
        Struct {
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }
    fn v(kind: Kind) -> PValue {
        PValue { kind: Some(kind) }
    }
    fn metadata(namespaces: Vec<(&str, Struct)>) -> Vec<u8> {
        Metadata {
            filter_metadata: namespaces
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..Default::default()
        }
        .encode_to_vec()
    }
    fn payload() -> Struct {
        s(vec![
            ("iss", v(Kind::StringValue("https://issuer.test".into()))),
            ("sub", v(Kind::StringValue("agent-7".into()))),
            ("exp", v(Kind::NumberValue(1_900_000_000.0))),
            ("ratio", v(Kind::NumberValue(0.5))),
            ("admin", v(Kind::BoolValue(true))),
            ("none", v(Kind::NullValue(0))),
            (
                "aud",
                v(Kind::ListValue(ListValue {
                    values: vec![v(Kind::StringValue("toolgate".into()))],
                })),
            ),
            (
                "org",
                v(Kind::StructValue(s(vec![(
                    "team",
                    v(Kind::StringValue("blue".into())),
                )]))),
            ),
        ])
    }

    #[test]
    fn one_verified_payload_gives_claims_and_principal() {
        let bytes = metadata(vec![
            ("other", s(vec![("x", v(Kind::StringValue("y".into())))])),
            (
                JWT_METADATA_NAMESPACE,
                s(vec![(
                    "https://issuer.test",
                    v(Kind::StructValue(payload())),
                )]),
            ),
        ]);
        let auth = Auth::from_metadata(&bytes).expect("a payload");
        assert_eq!(
            auth.principal, "https://issuer.test/agent-7",
            "{:?}",
            auth.claims
        );
        assert_eq!(
            auth.claims,
            serde_json::json!({"iss": "https://issuer.test", "sub": "agent-7", "exp": 1_900_000_000, "ratio": 0.5,
                "admin": true, "none": null, "aud": ["toolgate"], "org": {"team": "blue"}})
        );
        let ns = Struct::decode(auth.raw.as_slice()).expect("the namespace's Struct");
        assert!(ns.fields.contains_key("https://issuer.test"));
    }

    #[test]
    fn no_payload_or_two_give_none() {
        assert_eq!(Auth::from_metadata(&[]), None);
        // The simulated hosts' encoding reads back as the claims.
        let claims = serde_json::json!({"iss": "i", "sub": "s", "n": 3, "f": 0.25, "l": [true, null, {"a": "b"}]});
        let auth = Auth::from_metadata(&metadata_with_claims(&claims)).expect("a payload");
        assert_eq!((auth.claims, auth.principal.as_str()), (claims, "i/s"));
        assert_eq!(
            Auth::from_metadata(&metadata(vec![("other", payload())])),
            None
        );
        let two = s(vec![
            ("a", v(Kind::StructValue(payload()))),
            ("b", v(Kind::StructValue(payload()))),
        ]);
        assert_eq!(
            Auth::from_metadata(&metadata(vec![(JWT_METADATA_NAMESPACE, two)])),
            None
        );
        // Malformed bytes: none, no panic.
        let good = metadata(vec![(
            JWT_METADATA_NAMESPACE,
            s(vec![("i", v(Kind::StructValue(payload())))]),
        )]);
        for cut in 0..good.len() {
            let _ = Auth::from_metadata(&good[..cut]);
        }
    }

    #[test]
    fn the_payload_header_counts_only_beside_one_verified_issuer() {
        use base64::Engine as _;
        let b64 = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(v.to_string())
                .into_bytes()
        };
        let claims = serde_json::json!({"iss": "https://issuer.test", "sub": "agent-7", "exp": 1_900_000_000, "scope": "a  b"});
        let two = [b"https://issuer.test".to_vec(), b"other".to_vec()];
        let issuer = &two[..1];
        let read = |issuers: &[Vec<u8>], payloads: &[Vec<u8>]| {
            metadata_from_payload_header(PayloadHeader::JwtAuthn, issuers, payloads)
                .and_then(|m| Auth::from_metadata(&m))
        };
        // What the Wasm host reads from the metadata, and the same namespace for an authorizer.
        let auth = read(issuer, &[b64(&claims)]).expect("claims");
        let wasm = Auth::from_metadata(&metadata_with_claims(&claims)).expect("claims");
        assert_eq!(auth, wasm);
        assert_eq!(auth.principal, "https://issuer.test/agent-7");
        // Space-delimited, as jwt_authn normalises it under Istio and render.
        assert_eq!(auth.claims["scope"], serde_json::json!(["a", "b"]));
        // Padded, as with `pad_forward_payload_header`.
        let mut padded = base64::engine::general_purpose::URL_SAFE
            .encode(claims.to_string())
            .into_bytes();
        assert_eq!(read(issuer, &[padded.clone()]), Some(wasm.clone()));
        padded.extend_from_slice(b"===");
        assert_eq!(read(issuer, &[padded]), None);
        // A client's header without a verified token, or beside one.
        assert_eq!(read(&[], &[b64(&claims)]), None);
        assert_eq!(read(issuer, &[b64(&claims), b64(&claims)]), None);
        assert_eq!(read(&two, &[b64(&claims)]), None);
        let other = serde_json::json!({"iss": "https://forged.test", "sub": "agent-7"});
        assert_eq!(read(issuer, &[b64(&other)]), None);
        assert_eq!(
            read(issuer, &[b64(&serde_json::json!({"sub": "agent-7"}))]),
            None
        );
        // Not base64url, not JSON, not an object: none, no panic.
        for bad in [&b"%%%"[..], b"", b"e30", b"WzFd", b"bm90IGpzb24"] {
            assert_eq!(read(issuer, &[bad.to_vec()]), None, "{bad:?}");
        }
        assert_eq!(read(issuer, &[]), None);
    }

    /// A header nobody said `jwt_authn` writes is never read: a caller with any valid token of the
    /// issuer adds the header with the claims it likes (`sub: admin`, a scope), which would pass every
    /// check beside the metadata. Only the module's configuration can say (render's, with
    /// `forward_payload_header` on every provider); a bare plan, Istio's and hand-written ones do not.
    #[test]
    fn a_payload_header_is_read_only_where_the_configuration_says_jwt_authn_writes_it() {
        use base64::Engine as _;
        let forged = serde_json::json!({"iss": "https://issuer.test", "sub": "admin", "scope": "tools:write"});
        let header = [base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(forged.to_string())
            .into_bytes()];
        let issuer = [b"https://issuer.test".to_vec()];
        let plan = br#"{"version":1,"listener":"l","gateway":{}}"#;
        let bare = module_config(plan).expect("a bare plan");
        assert_eq!(
            bare,
            ModuleConfig {
                plan,
                payload_header: PayloadHeader::Unknown
            }
        );
        assert_eq!(
            metadata_from_payload_header(bare.payload_header, &issuer, &header),
            None
        );
        let told = module_config_with_payload_header(std::str::from_utf8(plan).unwrap());
        let told = module_config(told.as_bytes()).expect("the plan with the payload header");
        assert_eq!(
            told,
            ModuleConfig {
                plan,
                payload_header: PayloadHeader::JwtAuthn
            }
        );
        let auth = metadata_from_payload_header(told.payload_header, &issuer, &header)
            .and_then(|m| Auth::from_metadata(&m));
        assert_eq!(
            auth.map(|a| a.principal),
            Some("https://issuer.test/admin".into())
        );
        // The plan as written, spaces and all; without the key, the header is not read.
        let spaced =
            br#" { "plan" : {"version": 1} , "jwtPayloadHeader" : "x-toolgate-jwt-payload" } "#;
        assert_eq!(
            module_config(spaced).unwrap(),
            ModuleConfig {
                plan: br#"{"version": 1}"#,
                payload_header: PayloadHeader::JwtAuthn
            }
        );
        assert_eq!(
            module_config(br#"{"plan":{}}"#).unwrap().payload_header,
            PayloadHeader::Unknown
        );
        // Not an object with a plan: a bare plan, for the loader to judge.
        for other in [
            &b"not json"[..],
            b"[]",
            b"",
            br#"{"version":1}"#,
            br#""plan""#,
        ] {
            assert_eq!(
                module_config(other),
                Ok(ModuleConfig {
                    plan: other,
                    payload_header: PayloadHeader::Unknown
                })
            );
        }
        // Another header, a misspelt or unknown key: refused, never a quiet default.
        for bad in [
            &br#"{"plan":{},"jwtPayloadHeader":"x-jwt-payload"}"#[..],
            br#"{"plan":{},"jwtPayloadHeader":true}"#,
            br#"{"plan":{},"jwtPayloadheader":"x-toolgate-jwt-payload"}"#,
            br#"{"plan":{},"claims":"x-toolgate-jwt-payload"}"#,
        ] {
            let e = module_config(bad).unwrap_err();
            assert!(!e.contains(['"', '\n']), "{e}");
        }
    }
}
