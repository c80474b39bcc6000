//! Glue over `cel` + `kube-cel` for the CRDs' `x-kubernetes-validations` rules: the project holds no
//! CEL lexer, parser or interpreter of its own. The `cel` crate parses and evaluates, in an
//! environment with the Kubernetes CEL libraries of `kube-cel` (strings, lists, sets, regex, urls, ip,
//! semver, format, quantity, ...), as the API server's CRD environment has them. What is here: turning
//! a `serde_json::Value` into the CEL value of `self` (property names escaped as the API server does:
//! `namespace` is `self.__namespace__`), compiling each rule once per thread, evaluating it, and error
//! texts.
//!
//! kube-cel 0.8 is built against cel 0.13, so this module uses that `cel` through kube-cel's re-export
//! (`kube_cel::cel`); `policy/` has its own cel 0.15 for the authorization rules.
//!
//! One difference of `cel` 0.13 from the API server is mended here: its `size()` of a string counts
//! UTF-8 bytes, CEL (cel-go) counts code points; a `size` function registered into the environment
//! counts code points.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Program};
use kube_cel::KubeCelExt;
use serde_json::Value as Json;

pub use kube_cel::cel::Value;

/// `v` as the CEL value of `self`, for a node of schema `schema`: the properties of objects with
/// `properties` are escaped as the API server escapes them; the keys of maps (`additionalProperties`)
/// are data, kept as they are.
pub fn to_value(v: &Json, schema: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(a) => {
            let items = schema.get("items").unwrap_or(&Json::Null);
            Value::List(Arc::new(a.iter().map(|x| to_value(x, items)).collect()))
        }
        Json::Object(m) => {
            let props = schema.get("properties").and_then(Json::as_object);
            let extra = schema
                .get("additionalProperties")
                .filter(|s| s.is_object())
                .unwrap_or(&Json::Null);
            let map: HashMap<Key, Value> = m
                .iter()
                .map(|(k, x)| match props {
                    Some(p) => (
                        Key::String(Arc::new(escape(k))),
                        to_value(x, p.get(k).unwrap_or(&Json::Null)),
                    ),
                    None => (Key::String(Arc::new(k.clone())), to_value(x, extra)),
                })
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// The part of `this` (converted by [`to_value`]) that is the property `key` of an object.
pub fn field<'a>(this: &'a Value, key: &str) -> Option<&'a Value> {
    match this {
        Value::Map(m) => m.map.get(&Key::String(Arc::new(escape(key)))),
        _ => None,
    }
}

/// The part of `this` that is the item `i` of a list.
pub fn item(this: &Value, i: usize) -> Option<&Value> {
    match this {
        Value::List(l) => l.get(i),
        _ => None,
    }
}

/// A property name as CEL sees it on the API server (k8s.io/apiserver/pkg/cel `Escape`): reserved words
/// become `__word__`; `__`, `.`, `-` and `/` become `__underscores__`, `__dot__`, `__dash__`,
/// `__slash__`; other characters outside `[A-Za-z0-9_]` become `__{code point}__`.
fn escape(name: &str) -> String {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.contains("__") {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() + 8);
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            c => out.push_str(&format!("__{}__", c as u32)),
        }
    }
    out
}

/// CEL's `size()`: strings count code points (`cel` 0.13 counts bytes), lists and maps their entries.
fn size(ftx: &FunctionContext<'_, '_>, This(this): This<Value>) -> Result<i64, ExecutionError> {
    let n = match &this {
        Value::String(s) => s.chars().count(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        Value::Bytes(b) => b.len(),
        other => return Err(ftx.error(format!("no such overload: size({})", type_name(other)))),
    };
    Ok(n as i64)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null_type",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        _ => "dyn",
    }
}

thread_local! {
    // Building the environment registers a few hundred functions, and parsing a rule is not free either:
    // both are done once per thread (validating thousands of policies evaluates the same few dozen rules).
    static ENV: Context<'static> = {
        let mut ctx = Context::default().with_all();
        ctx.add_function("size", size);
        ctx
    };
    static PROGRAMS: RefCell<HashMap<String, Result<Rc<Program>, String>>> = Default::default();
}

/// `source` compiled, once per thread.
pub fn compile(source: &str) -> Result<Rc<Program>, String> {
    PROGRAMS.with(|cache| {
        if let Some(p) = cache.borrow().get(source) {
            return p.clone();
        }
        let p = Program::compile(source)
            .map(Rc::new)
            .map_err(|e| e.to_string().trim().to_string());
        cache.borrow_mut().insert(source.to_string(), p.clone());
        p
    })
}

/// Evaluates every rule of `sources` with `self` = `this` (bound once for them all), in order.
pub fn eval_all<'s>(
    sources: impl Iterator<Item = &'s str>,
    this: &Value,
) -> Vec<Result<Value, String>> {
    ENV.with(|env| {
        let mut scope = env.new_inner_scope();
        scope.add_variable_from_value("self", this.clone());
        sources
            .map(|source| compile(source).and_then(|p| p.execute(&scope).map_err(|e| describe(&e))))
            .collect()
    })
}

/// An evaluation error in the API server's words where they differ from `cel`'s.
fn describe(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::UndeclaredReference(n) => format!("undeclared reference to '{n}'"),
        ExecutionError::NoSuchOverload => "no such overload".into(),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(Value::Int(i)) => format!("index out of bounds: {i}"),
        ExecutionError::IndexOutOfBounds(Value::UInt(i)) => format!("index out of bounds: {i}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: &str, this: Json) -> Result<Value, String> {
        eval_all(std::iter::once(rule), &to_value(&this, &Json::Null)).remove(0)
    }

    #[test]
    fn evaluates_the_rule_shapes_of_our_crds() {
        let refs = json!([{"kind": "Gateway"}, {"kind": "XBackend"}]);
        assert_eq!(
            run("self.all(ref, ref.kind == self[0].kind)", refs),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run("self.all(ref, ref.kind == self[0].kind)", json!([])),
            Ok(Value::Bool(true))
        );
        let rules = json!([{"name": "a"}, {"name": "a"}]);
        assert_eq!(
            run(
                "self.all(r, self.filter(x, x.name == r.name).size() == 1)",
                rules
            ),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(
                "[has(self.serviceName),has(self.hostname)].filter(x,x==true).size() == 1",
                json!({"hostname": "h"})
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run(
                "self.type == 'CEL' ? has(self.cel) : true",
                json!({"type": "CEL"})
            ),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(
                "has(self.params) && self.params.size() > 0 ? self.name in ['prompts/get', 'tools/call'] : true",
                json!({"name": "prompts/list", "params": ["x"]})
            ),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(
                r#"self.value.matches(r"""^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$""")"#,
                json!({"value": "/a b"})
            ),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(
                "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
                json!({"group": "", "kind": "Service"})
            ),
            Ok(Value::Bool(false))
        );
        // error absorption
        assert_eq!(
            run("false && self.missing", json!({})),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run("self.missing || true", json!({})),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run("self.missing == 1", json!({})),
            Err("no such key: missing".into())
        );
        assert_eq!(
            run("self[1] == 1", json!([1])),
            Err("index out of bounds: 1".into())
        );
        assert_eq!(
            run("'a' != 1 && 1 == 1 && 2u == 2u", json!({})),
            Ok(Value::Bool(true))
        );
    }

    /// A known difference (docs/cli.md, "The CRDs"): `cel` 0.13 has no heterogeneous numeric
    /// equality, cel-go's runtime has (`1 == 1.0`). The API server's type checker refuses such
    /// comparisons in CRD rules except on `dyn` values, and no rule of ours compares numbers of two types.
    #[test]
    fn mixed_numeric_equality_is_false() {
        assert_eq!(
            run("1 == 1.0 || 2u == 2 || 1 in [1.0]", json!({})),
            Ok(Value::Bool(false))
        );
        assert_eq!(run("1 < 2.5 && 2u < 3", json!({})), Ok(Value::Bool(true)));
    }

    #[test]
    fn sizes_count_code_points() {
        assert_eq!(
            run(
                "size(self.s) == 2 && self.s.size() == 2",
                json!({"s": "éé"})
            ),
            Ok(Value::Bool(true))
        );
    }

    #[test]
    fn kubernetes_libraries_are_there() {
        assert_eq!(
            run(
                "'a,b'.split(',') == ['a', 'b'] && [1, 2].isSorted()",
                json!({})
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run(
                "quantity('1Gi').isGreaterThan(quantity('500Mi'))",
                json!({})
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run(
                "isURL('https://a.example/x') && ip('10.0.0.1').family() == 4",
                json!({})
            ),
            Ok(Value::Bool(true))
        );
    }

    #[test]
    fn properties_are_escaped_as_the_api_server_does() {
        let schema = json!({"properties": {"namespace": {}, "a-b": {}, "labels": {"additionalProperties": {"type": "string"}}}});
        let this = to_value(
            &json!({"namespace": "n", "a-b": 1, "labels": {"x-y": "z"}}),
            &schema,
        );
        let r = eval_all(
            std::iter::once(
                "self.__namespace__ == 'n' && self.a__dash__b == 1 && self.labels['x-y'] == 'z'",
            ),
            &this,
        );
        assert_eq!(r[0], Ok(Value::Bool(true)));
        assert_eq!(
            field(&this, "namespace"),
            Some(&Value::String(Arc::new("n".into())))
        );
    }
}
