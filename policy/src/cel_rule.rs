//! CEL authorization rules (docs/semantics.md §3, `authorization.type: CEL`), with the ecosystem's CEL for Rust
//! (the `cel` crate): checking an expression when a policy is compiled (syntax, and every variable
//! on the parsed expression against docs/semantics.md §3's list, a size bound), and evaluating it for a
//! `tools/call` with only the variables it uses.
//!
//! Variables: `request.mcp.tool_name`, `request.mcp.method`, `request.mcp.params` (the JSON
//! `params`, arguments included), `request.path` (with the query), `request.url_path`,
//! `request.method`, `request.host` (with the port as sent), `request.headers` (lower-case names;
//! repeated headers joined with `,`), `request.time`, `source.principal` (the caller's SPIFFE ID or
//! ""), `request.auth.claims` (the payload of the JWT Envoy's `jwt_authn` verified, a map; `{}`
//! without one) and `request.auth.principal` (`<iss>/<sub>` of that token, Istio's definition; ""
//! without one): docs/semantics.md §6b. Functions: CEL's standard ones, the strings extension, and `split` on a
//! list of strings too (each element split, the parts flattened: §6b). A result other than `true`, or an
//! error (e.g. a missing key), is "no match".

use crate::http_request::HttpRequest;

pub use imp::{compile, CelRule};

/// The variables an expression may use; below `OPEN` ones any field or key may be read.
pub const VARIABLES: [&str; 12] = [
    "request.mcp.tool_name",
    "request.mcp.method",
    "request.mcp.params",
    "request.path",
    "request.url_path",
    "request.method",
    "request.host",
    "request.headers",
    "request.time",
    "source.principal",
    "request.auth.claims",
    "request.auth.principal",
];
#[cfg_attr(not(feature = "cel"), allow(dead_code))]
const OPEN: [&str; 3] = [
    "request.mcp.params",
    "request.headers",
    "request.auth.claims",
];

/// Bounds checked when an expression is compiled, so that evaluating it is bounded by the request
/// (a body of at most the plan's limit): the expression's size, and comprehensions (`all`,
/// `exists`, `map`, `filter`) not nested in one another.
pub const MAX_NODES: usize = 500;
pub const MAX_COMPREHENSION_DEPTH: usize = 1;

/// Which variables an expression reads: what the filter must collect for it (the headers, `params`),
/// found when the plan loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uses {
    pub tool_name: bool,
    pub mcp_method: bool,
    pub params: bool,
    pub path: bool,
    pub url_path: bool,
    pub method: bool,
    pub host: bool,
    pub headers: bool,
    pub time: bool,
    pub principal: bool,
    /// `request.auth.claims` or `request.auth.principal`.
    pub auth: bool,
}

impl Uses {
    #[cfg_attr(not(feature = "cel"), allow(dead_code))]
    fn mark(&mut self, variable: &str) {
        match variable {
            "request.mcp.tool_name" => self.tool_name = true,
            "request.mcp.method" => self.mcp_method = true,
            "request.mcp.params" => self.params = true,
            "request.path" => self.path = true,
            "request.url_path" => self.url_path = true,
            "request.method" => self.method = true,
            "request.host" => self.host = true,
            "request.headers" => self.headers = true,
            "request.time" => self.time = true,
            "request.auth.claims" | "request.auth.principal" => self.auth = true,
            _ => self.principal = true,
        }
    }

    pub fn union(self, o: Uses) -> Uses {
        Uses {
            tool_name: self.tool_name || o.tool_name,
            mcp_method: self.mcp_method || o.mcp_method,
            params: self.params || o.params,
            path: self.path || o.path,
            url_path: self.url_path || o.url_path,
            method: self.method || o.method,
            host: self.host || o.host,
            headers: self.headers || o.headers,
            time: self.time || o.time,
            principal: self.principal || o.principal,
            auth: self.auth || o.auth,
        }
    }
}

/// What a CEL rule is evaluated against: one `tools/call` message of a request.
pub struct Input<'a> {
    pub req: &'a HttpRequest<'a>,
    pub method: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    /// The raw JSON text of `params`.
    pub params: Option<&'a str>,
}

/// Headers as one map, repeated names joined with "," in the order they came, as Envoy's ext_authz
/// does: `request.headers` here, and the CheckRequest reference the authz tests decode against.
#[cfg(any(feature = "cel", test))]
pub(crate) fn joined_headers<'h>(
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
) -> std::collections::HashMap<String, String> {
    let mut joined = std::collections::HashMap::<String, String>::new();
    for (name, value) in headers {
        joined
            .entry(name.to_string())
            .and_modify(|v| {
                v.push(',');
                v.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    joined
}

#[cfg(feature = "cel")]
mod imp {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::{Arc, OnceLock};

    use cel::common::ast::{Expr, IdedExpr, LiteralValue};
    use cel::common::types::{CelBool, CelList, CelNull, CelString, LIST_TYPE, STRING_TYPE};
    use cel::common::value::{CowVal, Val};
    use cel::context::VariableResolver;
    use cel::parser::PrattParser;
    use cel::ExecutionError;
    use cel::{Context, Env, Value};

    use super::{Input, Uses, MAX_COMPREHENSION_DEPTH, MAX_NODES, OPEN, VARIABLES};

    thread_local! {
        /// The standard environment plus the strings extension (`lowerAscii`, `upperAscii`, `replace`,
        /// `split`, `trim`, ...), RE2's `matches` and `split` on a list of strings ([`split_each`]).
        static ENV: Arc<Env> = {
            let mut env = Env::stdlib();
            // Declaring these into a fresh standard environment cannot conflict.
            let _ = env.add_extension(cel::extensions::strings);
            let _ = env.add_overload(RE2_MATCHES, "toolgate_re2_matches_string_string", vec![STRING_TYPE, STRING_TYPE], re2_matches);
            let _ = env.add_member_overload("split", "toolgate_list_split_string", LIST_TYPE, vec![STRING_TYPE], split_each);
            Arc::new(env)
        };
    }

    /// A checked, compiled expression.
    #[derive(Debug)]
    pub struct CelRule {
        expression: IdedExpr,
        pub uses: Uses,
    }

    /// Compiles and checks `expression`. The error names the problem (the expression itself is named
    /// by the caller's field path).
    pub fn compile(expression: &str) -> Result<CelRule, String> {
        // The crate's hand-written (Pratt) parser, with the standard macros: its ANTLR parser, the
        // default, is most of the crate's size in the Wasm module (docs/design/cel-and-size.md;
        // `make wasm-size`), and the filter parses every expression of a plan when it loads.
        let mut expression = PrattParser::new().parse(expression).map_err(|e| {
            let text = e.to_string();
            format!("syntax error: {}", text.lines().next().unwrap_or("").trim())
        })?;
        rewrite(&mut expression, &mut Vec::new(), &mut |e, scope| {
            use_re2_matches(e, scope);
            fold_has(e, scope);
        });
        let mut check = Check {
            uses: Uses::default(),
            nodes: 0,
            scope: Vec::new(),
            depth: 0,
            problem: None,
        };
        check.walk(&expression);
        match check.problem {
            Some(problem) => Err(problem),
            None if check.nodes > MAX_NODES => Err(format!(
                "the expression has {} nodes; at most {MAX_NODES} are allowed",
                check.nodes
            )),
            None => Ok(CelRule {
                expression,
                uses: check.uses,
            }),
        }
    }

    /// The name `matches` calls are given: CEL's `matches` with RE2's semantics (docs/semantics.md §3: RE2's grammar,
    /// ASCII `\d`, `\w`, `\s`, `\b`), through Toolgate's one RE2 home (`crate::re2`); the `cel` crate's
    /// own `matches` uses the Rust `regex` crate's Unicode classes.
    const RE2_MATCHES: &str = "toolgate.re2_matches";

    fn re2_matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
        let text = |i: usize| {
            args.get(i)
                .and_then(|a| a.downcast_ref::<CelString<'_>>())
                .map(|s| s.inner().to_string())
        };
        let (Some(subject), Some(pattern)) = (text(0), text(1)) else {
            return Err(ExecutionError::function_error(
                "matches",
                "expects two strings",
            ));
        };
        let matched = compiled_pattern(&pattern, |regex| regex.is_match(&subject))
            .map_err(|e| ExecutionError::function_error("matches", e))?;
        Ok(CowVal::owned(CelBool::from(matched)))
    }

    /// `list.split(sep)`: every element, a string, split as `string.split(sep)` splits it, the parts
    /// in one list (docs/semantics.md §6b). So `claims.scope.split(' ')` reads a scope claim whether
    /// it is a space-separated string or already a list (`jwt_authn`'s `normalize_payload_in_metadata`).
    /// An element that is not a string is an error (no match).
    fn split_each<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
        let failed = |why: &str| ExecutionError::function_error("split", why);
        let [list, sep] = args.as_slice() else {
            return Err(failed("expects a list and a separator"));
        };
        let sep = sep
            .downcast_ref::<CelString<'_>>()
            .ok_or_else(|| failed("the separator must be a string"))?
            .inner();
        let items = list.as_iterable().ok_or_else(|| failed("expects a list"))?;
        let mut parts: Vec<Box<dyn Val>> = Vec::new();
        let mut elements = items.iter();
        while let Some(element) = elements.next() {
            let text = element
                .downcast_ref::<CelString<'_>>()
                .ok_or_else(|| failed("a list element is not a string"))?
                .inner();
            // The strings extension's `split`: an empty separator splits between code points.
            let pieces: Vec<&str> = if sep.is_empty() {
                text.char_indices()
                    .map(|(i, c)| &text[i..i + c.len_utf8()])
                    .collect()
            } else {
                text.split(sep).collect()
            };
            parts.extend(
                pieces
                    .into_iter()
                    .map(|p| Box::new(CelString::from(p.to_owned())) as Box<dyn Val>),
            );
        }
        Ok(CowVal::owned(CelList::from(parts)))
    }

    /// How many compiled `matches` patterns a VM keeps: an expression's patterns are almost always
    /// literals, so each is compiled once rather than per evaluation; patterns built from request data
    /// cannot grow the cache past this (it is emptied when full).
    pub(super) const PATTERN_CACHE: usize = 64;

    thread_local! {
        pub(super) static PATTERNS: RefCell<HashMap<String, Result<regex::Regex, String>>> = RefCell::new(HashMap::new());
    }

    /// `with` applied to `pattern` compiled with RE2's semantics (docs/semantics.md §3), unanchored as CEL's
    /// `matches` is (a search), through the cache; or why the pattern is refused.
    fn compiled_pattern<T>(
        pattern: &str,
        with: impl FnOnce(&regex::Regex) -> T,
    ) -> Result<T, String> {
        PATTERNS.with(|cache| {
            let mut cache = cache.borrow_mut();
            if !cache.contains_key(pattern) {
                if cache.len() >= PATTERN_CACHE {
                    cache.clear();
                }
                let compiled = crate::re2::to_rust_syntax(pattern)
                    .and_then(|rust| {
                        regex::RegexBuilder::new(&rust)
                            .size_limit(1 << 20)
                            .build()
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|e| format!("{pattern:?}: {e}"));
                cache.insert(pattern.to_string(), compiled);
            }
            match &cache[pattern] {
                Ok(regex) => Ok(with(regex)),
                Err(e) => Err(e.clone()),
            }
        })
    }

    /// The timestamp functions that take a time zone argument.
    const TIME_ZONE_FUNCTIONS: [&str; 10] = [
        "getFullYear",
        "getMonth",
        "getDayOfYear",
        "getDayOfMonth",
        "getDate",
        "getDayOfWeek",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
    ];

    /// Whether this build knows the time zone `zone` (an IANA name the build kept, `UTC`, or a
    /// `[+-]HH:MM` offset), asked of the `cel` crate itself so that the answer is the filter's.
    fn check_time_zone(zone: &str) -> Result<(), String> {
        let mut ctx = ENV.with(|env| Context::with_env(env.clone()));
        ctx.add_variable_from_value(
            "t",
            Value::Timestamp(chrono::DateTime::UNIX_EPOCH.fixed_offset()),
        );
        ctx.add_variable_from_value("zone", Value::String(Arc::new(zone.to_string())));
        let probe = PrattParser::new()
            .parse("t.getHours(zone)")
            .map_err(|e| e.to_string())?;
        Value::resolve(&probe, &ctx).map(|_| ()).map_err(|_| {
            format!(
                "time zone {zone:?} is not known to this build: use UTC, a fixed offset such as '+01:00', \
                 or a zone of the list in docs/policies.md (CEL rules, time zones)"
            )
        })
    }

    /// Every `s.matches(re)` and `matches(s, re)` of the expression calls [`re2_matches`].
    fn use_re2_matches(e: &mut IdedExpr, _scope: &[String]) {
        if let Expr::Call(call) = &mut e.expr {
            if call.func_name == "matches" {
                if let Some(target) = call.target.take() {
                    call.args.insert(0, *target);
                }
                call.func_name = RE2_MATCHES.to_string();
            }
        }
    }

    /// `has()` of a whole variable (`has(request.mcp.tool_name)`) is `true`: every variable exists
    /// (an absent tool name is ""), and [`Vars`] has no `request` or `request.mcp` map to test it on.
    fn fold_has(e: &mut IdedExpr, scope: &[String]) {
        let Expr::Select(select) = &e.expr else {
            return;
        };
        if !select.test {
            return;
        }
        if let Some(path) = qualified(e) {
            let root = path.split('.').next().unwrap_or(&path);
            if VARIABLES.contains(&path.as_str()) && !scope.iter().any(|s| s == root) {
                e.expr = Expr::Literal(LiteralValue::Boolean(CelBool::from(true)));
            }
        }
    }

    /// Calls `f` on every node of `e`, a node before its children, with the names that enclosing
    /// comprehensions bind there.
    fn rewrite(
        e: &mut IdedExpr,
        scope: &mut Vec<String>,
        f: &mut impl FnMut(&mut IdedExpr, &[String]),
    ) {
        f(e, scope);
        match &mut e.expr {
            Expr::Call(call) => {
                if let Some(t) = call.target.as_mut() {
                    rewrite(t, scope, f);
                }
                call.args.iter_mut().for_each(|a| rewrite(a, scope, f));
            }
            Expr::Select(s) => rewrite(&mut s.operand, scope, f),
            Expr::Comprehension(c) => {
                rewrite(&mut c.iter_range, scope, f);
                rewrite(&mut c.accu_init, scope, f);
                let outer = scope.len();
                scope.push(c.iter_var.clone());
                scope.extend(c.iter_var2.clone());
                scope.push(c.accu_var.clone());
                for part in [&mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                    rewrite(part, scope, f);
                }
                scope.truncate(outer);
            }
            Expr::List(l) => l.elements.iter_mut().for_each(|el| rewrite(el, scope, f)),
            Expr::Map(m) => {
                for entry in &mut m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &mut entry.expr {
                        rewrite(&mut me.key, scope, f);
                        rewrite(&mut me.value, scope, f);
                    }
                }
            }
            _ => {}
        }
    }

    struct Check {
        uses: Uses,
        nodes: usize,
        /// Names bound by enclosing comprehensions.
        scope: Vec<String>,
        depth: usize,
        problem: Option<String>,
    }

    impl Check {
        fn fail(&mut self, problem: String) {
            self.problem.get_or_insert(problem);
        }

        fn walk(&mut self, e: &IdedExpr) {
            self.nodes += 1;
            if self.problem.is_some() {
                return;
            }
            match &e.expr {
                Expr::Ident(_) | Expr::Select(_) => {
                    if let Some(path) = qualified(e) {
                        return self.variable(&path);
                    }
                    if let Expr::Select(s) = &e.expr {
                        self.walk(&s.operand);
                    }
                }
                Expr::Call(call) => {
                    if let Some(target) = &call.target {
                        self.walk(target);
                    }
                    for arg in &call.args {
                        self.walk(arg);
                    }
                    self.literal_arguments(call);
                }
                Expr::Comprehension(c) => {
                    self.walk(&c.iter_range);
                    self.walk(&c.accu_init);
                    self.depth += 1;
                    if self.depth > MAX_COMPREHENSION_DEPTH {
                        self.fail(format!("comprehensions (all, exists, map, filter) may not be nested (at most {MAX_COMPREHENSION_DEPTH} deep)"));
                    }
                    let bound = 2 + usize::from(c.iter_var2.is_some());
                    self.scope.push(c.iter_var.clone());
                    self.scope.extend(c.iter_var2.clone());
                    self.scope.push(c.accu_var.clone());
                    self.walk(&c.loop_cond);
                    self.walk(&c.loop_step);
                    self.walk(&c.result);
                    self.scope.truncate(self.scope.len().saturating_sub(bound));
                    self.depth -= 1;
                }
                Expr::List(list) => {
                    for el in &list.elements {
                        self.walk(el);
                    }
                }
                Expr::Map(map) => {
                    for entry in &map.entries {
                        if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                            self.walk(&m.key);
                            self.walk(&m.value);
                        }
                    }
                }
                Expr::Struct(_) => self.fail("message literals are not supported".into()),
                Expr::Literal(_) | Expr::Unspecified => {}
            }
        }

        /// Literal arguments the evaluation would only reject at run time (as "no match", silently):
        /// a `matches` pattern RE2 refuses, a time zone this build does not know.
        fn literal_arguments(&mut self, call: &cel::common::ast::CallExpr) {
            let literal = |i: usize| match call.args.get(i).map(|a| &a.expr) {
                Some(Expr::Literal(LiteralValue::String(s))) => Some(s.inner().to_string()),
                _ => None,
            };
            if call.func_name == RE2_MATCHES {
                if let Some(Err(e)) = literal(1).map(|pattern| compiled_pattern(&pattern, |_| ())) {
                    self.fail(format!("matches: {e}"));
                }
            } else if TIME_ZONE_FUNCTIONS.contains(&call.func_name.as_str())
                && call.target.is_some()
            {
                if let Some(Err(e)) = literal(0).map(|zone| check_time_zone(&zone)) {
                    self.fail(e);
                }
            }
        }

        /// A dotted name `path` read as a variable.
        fn variable(&mut self, path: &str) {
            let root = path.split('.').next().unwrap_or(path);
            if self.scope.iter().any(|s| s == root) {
                return;
            }
            if let Some(v) = VARIABLES.iter().find(|v| **v == path) {
                return self.uses.mark(v);
            }
            if let Some(v) = OPEN.iter().find(|v| {
                path.strip_prefix(**v)
                    .is_some_and(|rest| rest.starts_with('.'))
            }) {
                return self.uses.mark(v);
            }
            let known = VARIABLES.join(", ");
            self.fail(format!("{path} is not a variable (known: {known})"));
        }
    }

    /// The dotted name a chain of field selections from an identifier spells (`a.b.c`), if it is one.
    fn qualified(e: &IdedExpr) -> Option<String> {
        match &e.expr {
            Expr::Ident(name) => Some(name.clone()),
            Expr::Select(s) if !s.test => {
                qualified(&s.operand).map(|base| format!("{base}.{}", s.field))
            }
            // `has(a.b.c)`: the chain `a.b.c`.
            Expr::Select(s) => qualified(&s.operand).map(|base| format!("{base}.{}", s.field)),
            _ => None,
        }
    }

    impl CelRule {
        /// Whether the rule matches: the expression yields `true` (anything else, errors included, is
        /// no match).
        pub fn matches(&self, input: &Input<'_>) -> bool {
            let vars = Vars {
                input,
                params: OnceLock::new(),
                headers: OnceLock::new(),
                time: OnceLock::new(),
                claims: OnceLock::new(),
            };
            let mut ctx = ENV.with(|env| Context::with_env(env.clone()));
            ctx.set_variable_resolver(&vars);
            matches!(
                Value::resolve(&self.expression, &ctx),
                Ok(Value::Bool(true))
            )
        }
    }

    /// The variables of one evaluation, each made when the expression first reads it, by its full
    /// name (the `cel` crate resolves `request.mcp.params.arguments` as the variable
    /// `request.mcp.params` and the field `arguments`): strings borrowed from the request, not
    /// copied; `params` decoded, `headers` and `time` built once and only when read. No `request`
    /// or `mcp` map is built (measured: most of a `tool_name` rule's cost per request when it was);
    /// `has()` on a whole variable is answered when the expression is compiled ([`fold_has`]).
    struct Vars<'i, 'r> {
        input: &'i Input<'r>,
        params: OnceLock<Box<dyn Val>>,
        headers: OnceLock<Box<dyn Val>>,
        time: OnceLock<Option<Box<dyn Val>>>,
        claims: OnceLock<Box<dyn Val>>,
    }

    impl VariableResolver for Vars<'_, '_> {
        fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
            let text = |v: &'b str| Some(CowVal::owned(CelString::from(v)));
            let (input, req) = (self.input, self.input.req);
            match variable {
                "request.mcp.tool_name" => text(input.tool_name.unwrap_or("")),
                "request.mcp.method" => text(input.method.unwrap_or("")),
                "request.path" => text(req.path),
                "request.url_path" => text(req.path.split_once('?').map_or(req.path, |(p, _)| p)),
                "request.method" => text(req.method),
                "request.host" => text(req.authority),
                "source.principal" => text(req.principal.unwrap_or("")),
                "request.auth.principal" => text(req.auth.map_or("", |a| a.principal.as_str())),
                "request.auth.claims" => Some(CowVal::Borrowed(&**self.claims.get_or_init(|| {
                    let claims = req
                        .auth
                        .and_then(|a| cel::to_value(&a.claims).ok())
                        .unwrap_or_else(|| Value::from(HashMap::<String, String>::new()));
                    boxed(claims)
                }))),
                "request.mcp.params" => Some(CowVal::Borrowed(&**self.params.get_or_init(|| {
                    let params = input
                        .params
                        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
                        .and_then(|v| cel::to_value(&v).ok())
                        .unwrap_or(Value::Null);
                    boxed(params)
                }))),
                "request.headers" => Some(CowVal::Borrowed(&**self.headers.get_or_init(|| {
                    let headers = super::joined_headers(
                        req.headers
                            .iter()
                            .copied()
                            .filter(|(n, _)| !n.starts_with(':')),
                    );
                    boxed(Value::from(headers))
                }))),
                "request.time" => self
                    .time
                    .get_or_init(|| {
                        let ms = i64::try_from(req.time_ms).unwrap_or(0);
                        chrono::DateTime::from_timestamp_millis(ms)
                            .map(|t| boxed(Value::Timestamp(t.fixed_offset())))
                    })
                    .as_deref()
                    .map(CowVal::Borrowed),
                _ => None,
            }
        }
    }

    fn boxed(value: Value) -> Box<dyn Val> {
        // Every `Value` the variables are made of (strings, maps, lists, numbers, null, timestamps)
        // converts; null stands in should one not.
        Box::<dyn Val>::try_from(value).unwrap_or_else(|_| Box::new(CelNull))
    }
}

/// A build without the `cel` feature (a smaller module): every CEL expression is refused, so a plan
/// with CEL rules is refused when it loads (never enforced partially).
#[cfg(not(feature = "cel"))]
mod imp {
    use super::{Input, Uses};

    #[derive(Debug)]
    pub struct CelRule {
        pub uses: Uses,
    }

    pub fn compile(_expression: &str) -> Result<CelRule, String> {
        Err("this build of Toolgate has no CEL support (cargo feature `cel`)".into())
    }

    impl CelRule {
        pub fn matches(&self, _input: &Input<'_>) -> bool {
            false
        }
    }
}

#[cfg(all(test, feature = "cel"))]
mod tests;
