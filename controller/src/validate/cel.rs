//! A small interpreter for the CEL of `x-kubernetes-validations` rules, so that `toolgate validate`
//! evaluates the CRDs' rules offline with the API server's semantics.
//!
//! It covers the CEL the CRD rules use (and the common rest of the language): literals (including raw
//! and triple-quoted strings), `self` field selection and indexing, `has()`, the ternary operator,
//! `&&`/`||` with CEL's error absorption, comparisons and heterogeneous numeric equality, `in`,
//! arithmetic, string functions (`size`, `startsWith`, `endsWith`, `contains`, `matches` with RE2
//! semantics, `lowerAscii`, `upperAscii`, `trim`), and the `all`, `exists`, `exists_one`, `filter` and
//! `map` macros. A rule using anything else fails to parse, and a unit test parses every rule of the
//! generated CRDs, so a rule this interpreter cannot evaluate cannot reach `crds/` unnoticed.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value as Json;

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Rc<str>),
    List(Rc<Vec<Val>>),
    Map(Rc<BTreeMap<String, Val>>),
}

impl Val {
    pub fn from_json(v: &Json) -> Val {
        match v {
            Json::Null => Val::Null,
            Json::Bool(b) => Val::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Val::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Val::Uint(u)
                } else {
                    Val::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(s) => Val::Str(Rc::from(s.as_str())),
            Json::Array(a) => Val::List(Rc::new(a.iter().map(Val::from_json).collect())),
            Json::Object(m) => Val::Map(Rc::new(m.iter().map(|(k, v)| (k.clone(), Val::from_json(v))).collect())),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null_type",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Uint(_) => "uint",
            Val::Double(_) => "double",
            Val::Str(_) => "string",
            Val::List(_) => "list",
            Val::Map(_) => "map",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Macro {
    All,
    Exists,
    ExistsOne,
    Filter,
    Map,
}

#[derive(Clone, Debug)]
enum Expr {
    Lit(Val),
    Ident(String),
    Select(Box<Expr>, String),
    Has(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call { target: Option<Box<Expr>>, func: String, args: Vec<Expr> },
    List(Vec<Expr>),
    MapLit(Vec<(Expr, Expr)>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Comp { kind: Macro, range: Box<Expr>, var: String, body: Box<Expr> },
}

/// A parsed rule, ready to evaluate against `self`.
#[derive(Clone, Debug)]
pub struct Program {
    expr: Expr,
}

impl Program {
    pub fn parse(source: &str) -> Result<Program, String> {
        let tokens = lex(source)?;
        let mut p = Parser { tokens, pos: 0 };
        let expr = p.expr()?;
        if p.pos != p.tokens.len() {
            return Err(format!("unexpected {:?} at the end of the expression", p.tokens[p.pos]));
        }
        Ok(Program { expr })
    }

    /// Evaluates with `self` bound to `this`. `Ok(true)` = the rule holds.
    pub fn eval(&self, this: &Val) -> Result<Val, String> {
        let mut env = Env { vars: vec![("self".to_string(), this.clone())] };
        eval(&self.expr, &mut env)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}", "+", "-", "*",
    "/", "%",
];

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        // string literals, optionally raw (r/R prefix)
        let (raw, q_at) = if (c == 'r' || c == 'R') && matches!(chars.get(i + 1), Some('"') | Some('\'')) {
            (true, i + 1)
        } else {
            (false, i)
        };
        if matches!(chars.get(q_at), Some('"') | Some('\'')) && (raw || q_at == i) {
            let q = chars[q_at];
            let triple = chars.get(q_at + 1) == Some(&q) && chars.get(q_at + 2) == Some(&q);
            let mut j = if triple { q_at + 3 } else { q_at + 1 };
            let mut s = String::new();
            loop {
                if j >= chars.len() {
                    return Err("unterminated string literal".into());
                }
                if triple {
                    if chars[j] == q && chars.get(j + 1) == Some(&q) && chars.get(j + 2) == Some(&q) {
                        j += 3;
                        break;
                    }
                } else if chars[j] == q {
                    j += 1;
                    break;
                } else if chars[j] == '\n' {
                    return Err("newline in string literal".into());
                }
                if chars[j] == '\\' && !raw {
                    j += 1;
                    let e = *chars.get(j).ok_or("unterminated escape")?;
                    match e {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        'r' => s.push('\r'),
                        'a' => s.push('\x07'),
                        'b' => s.push('\x08'),
                        'f' => s.push('\x0c'),
                        'v' => s.push('\x0b'),
                        '\\' | '\'' | '"' | '`' | '?' => s.push(e),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String = chars.get(j + 1..j + 1 + n).ok_or("short escape")?.iter().collect();
                            let code = u32::from_str_radix(&hex, 16).map_err(|_| "bad escape")?;
                            s.push(char::from_u32(code).ok_or("bad code point")?);
                            j += n;
                        }
                        '0'..='3' => {
                            let oct: String = chars.get(j..j + 3).ok_or("short escape")?.iter().collect();
                            let code = u32::from_str_radix(&oct, 8).map_err(|_| "bad escape")?;
                            s.push(char::from_u32(code).ok_or("bad code point")?);
                            j += 2;
                        }
                        other => return Err(format!("unknown escape \\{other}")),
                    }
                    j += 1;
                    continue;
                }
                s.push(chars[j]);
                j += 1;
            }
            out.push(Tok::Str(s));
            i = j;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let start = i;
            if c == '0' && matches!(chars.get(i + 1), Some('x') | Some('X')) {
                i += 2;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let text: String = chars[start + 2..i].iter().collect();
                if chars.get(i) == Some(&'u') || chars.get(i) == Some(&'U') {
                    i += 1;
                    out.push(Tok::Uint(u64::from_str_radix(&text, 16).map_err(|e| e.to_string())?));
                } else {
                    out.push(Tok::Int(i64::from_str_radix(&text, 16).map_err(|e| e.to_string())?));
                }
                continue;
            }
            let mut is_double = false;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                is_double = true;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if matches!(chars.get(i), Some('e') | Some('E')) {
                is_double = true;
                i += 1;
                if matches!(chars.get(i), Some('+') | Some('-')) {
                    i += 1;
                }
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let text: String = chars[start..i].iter().collect();
            if is_double {
                out.push(Tok::Double(text.parse().map_err(|e: std::num::ParseFloatError| e.to_string())?));
            } else if matches!(chars.get(i), Some('u') | Some('U')) {
                i += 1;
                out.push(Tok::Uint(text.parse().map_err(|e: std::num::ParseIntError| e.to_string())?));
            } else {
                out.push(Tok::Int(text.parse().map_err(|e: std::num::ParseIntError| e.to_string())?));
            }
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                out.push(Tok::Punct(p));
                i += p.chars().count();
            }
            None => return Err(format!("unexpected character {c:?}")),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Parser (CEL grammar precedence: ?: < || < && < relations < +- < */% < unary < member)

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }
    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Punct(q)) if *q == p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!("expected {p:?}, found {:?}", self.peek()))
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.or()?;
        if self.eat("?") {
            let t = self.expr()?;
            self.expect(":")?;
            let f = self.expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(t), Box::new(f)));
        }
        Ok(c)
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut l = self.and()?;
        while self.eat("||") {
            let r = self.and()?;
            l = Expr::Or(Box::new(l), Box::new(r));
        }
        Ok(l)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut l = self.rel()?;
        while self.eat("&&") {
            let r = self.rel()?;
            l = Expr::And(Box::new(l), Box::new(r));
        }
        Ok(l)
    }
    fn rel(&mut self) -> Result<Expr, String> {
        let mut l = self.add()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Punct("==")) => BinOp::Eq,
                Some(Tok::Punct("!=")) => BinOp::Ne,
                Some(Tok::Punct("<")) => BinOp::Lt,
                Some(Tok::Punct("<=")) => BinOp::Le,
                Some(Tok::Punct(">")) => BinOp::Gt,
                Some(Tok::Punct(">=")) => BinOp::Ge,
                Some(Tok::Ident(k)) if k == "in" => BinOp::In,
                _ => return Ok(l),
            };
            self.pos += 1;
            let r = self.add()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }
    fn add(&mut self) -> Result<Expr, String> {
        let mut l = self.mul()?;
        loop {
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.eat("-") {
                BinOp::Sub
            } else {
                return Ok(l);
            };
            let r = self.mul()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }
    fn mul(&mut self) -> Result<Expr, String> {
        let mut l = self.unary()?;
        loop {
            let op = if self.eat("*") {
                BinOp::Mul
            } else if self.eat("/") {
                BinOp::Div
            } else if self.eat("%") {
                BinOp::Rem
            } else {
                return Ok(l);
            };
            let r = self.unary()?;
            l = Expr::Bin(op, Box::new(l), Box::new(r));
        }
    }
    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(match self.unary()? {
                Expr::Lit(Val::Int(i)) => Expr::Lit(Val::Int(-i)),
                Expr::Lit(Val::Double(d)) => Expr::Lit(Val::Double(-d)),
                e => Expr::Neg(Box::new(e)),
            });
        }
        self.member()
    }
    fn member(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let name = match self.tokens.get(self.pos) {
                    Some(Tok::Ident(n)) => n.clone(),
                    other => return Err(format!("expected a field or method name, found {other:?}")),
                };
                self.pos += 1;
                if self.eat("(") {
                    let args = self.args(")")?;
                    e = self.method(e, name, args)?;
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(idx));
            } else {
                return Ok(e);
            }
        }
    }
    fn method(&mut self, target: Expr, name: String, mut args: Vec<Expr>) -> Result<Expr, String> {
        let kind = match name.as_str() {
            "all" => Some(Macro::All),
            "exists" => Some(Macro::Exists),
            "exists_one" => Some(Macro::ExistsOne),
            "filter" => Some(Macro::Filter),
            "map" => Some(Macro::Map),
            _ => None,
        };
        if let Some(kind) = kind {
            if args.len() == 3 && kind == Macro::Map {
                // map(x, pred, expr) = filter then map
                let body = args.pop().unwrap();
                let pred = args.pop().unwrap();
                let var = match args.pop().unwrap() {
                    Expr::Ident(v) => v,
                    _ => return Err("macro variable must be an identifier".into()),
                };
                let filtered =
                    Expr::Comp { kind: Macro::Filter, range: Box::new(target), var: var.clone(), body: Box::new(pred) };
                return Ok(Expr::Comp { kind: Macro::Map, range: Box::new(filtered), var, body: Box::new(body) });
            }
            if args.len() != 2 {
                return Err(format!("{name}() takes 2 arguments"));
            }
            let body = args.pop().unwrap();
            let var = match args.pop().unwrap() {
                Expr::Ident(v) => v,
                _ => return Err("macro variable must be an identifier".into()),
            };
            return Ok(Expr::Comp { kind, range: Box::new(target), var, body: Box::new(body) });
        }
        Ok(Expr::Call { target: Some(Box::new(target)), func: name, args })
    }
    fn args(&mut self, close: &str) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok(args);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self.tokens.get(self.pos).cloned().ok_or("unexpected end of expression")?;
        self.pos += 1;
        match tok {
            Tok::Int(i) => Ok(Expr::Lit(Val::Int(i))),
            Tok::Uint(u) => Ok(Expr::Lit(Val::Uint(u))),
            Tok::Double(d) => Ok(Expr::Lit(Val::Double(d))),
            Tok::Str(s) => Ok(Expr::Lit(Val::Str(Rc::from(s.as_str())))),
            Tok::Ident(id) => match id.as_str() {
                "true" => Ok(Expr::Lit(Val::Bool(true))),
                "false" => Ok(Expr::Lit(Val::Bool(false))),
                "null" => Ok(Expr::Lit(Val::Null)),
                _ if self.eat("(") => {
                    let mut args = self.args(")")?;
                    if id == "has" {
                        return match (args.len(), args.pop()) {
                            (1, Some(Expr::Select(e, f))) => Ok(Expr::Has(e, f)),
                            _ => Err("has() takes one field selection, e.g. has(self.field)".into()),
                        };
                    }
                    Ok(Expr::Call { target: None, func: id, args })
                }
                _ => Ok(Expr::Ident(id)),
            },
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Punct("[") => Ok(Expr::List(self.args("]")?)),
            Tok::Punct("{") => {
                let mut entries = Vec::new();
                if !self.eat("}") {
                    loop {
                        let k = self.expr()?;
                        self.expect(":")?;
                        let v = self.expr()?;
                        entries.push((k, v));
                        if self.eat("}") {
                            break;
                        }
                        self.expect(",")?;
                        if self.eat("}") {
                            break;
                        }
                    }
                }
                Ok(Expr::MapLit(entries))
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

struct Env {
    vars: Vec<(String, Val)>,
}

impl Env {
    fn get(&self, name: &str) -> Option<&Val> {
        self.vars.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

fn no_overload(func: &str, args: &[&Val]) -> String {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    format!("no such overload: {func}({})", types.join(", "))
}

fn eval(e: &Expr, env: &mut Env) -> Result<Val, String> {
    match e {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::Ident(name) => env.get(name).cloned().ok_or_else(|| format!("undeclared reference to '{name}'")),
        Expr::Select(target, field) => match eval(target, env)? {
            Val::Map(m) => m.get(field).cloned().ok_or_else(|| format!("no such key: {field}")),
            other => Err(no_overload("_._", &[&other])),
        },
        Expr::Has(target, field) => match eval(target, env)? {
            Val::Map(m) => Ok(Val::Bool(m.contains_key(field))),
            other => Err(no_overload("has", &[&other])),
        },
        Expr::Index(target, idx) => {
            let t = eval(target, env)?;
            let i = eval(idx, env)?;
            match (&t, &i) {
                (Val::List(l), Val::Int(n)) => usize::try_from(*n)
                    .ok()
                    .and_then(|n| l.get(n))
                    .cloned()
                    .ok_or_else(|| format!("index out of bounds: {n}")),
                (Val::List(l), Val::Uint(n)) => {
                    l.get(*n as usize).cloned().ok_or_else(|| format!("index out of bounds: {n}"))
                }
                (Val::Map(m), Val::Str(k)) => m.get(&**k).cloned().ok_or_else(|| format!("no such key: {k}")),
                _ => Err(no_overload("_[_]", &[&t, &i])),
            }
        }
        Expr::List(items) => Ok(Val::List(Rc::new(items.iter().map(|x| eval(x, env)).collect::<Result<_, _>>()?))),
        Expr::MapLit(entries) => {
            let mut m = BTreeMap::new();
            for (k, v) in entries {
                let key = match eval(k, env)? {
                    Val::Str(s) => s.to_string(),
                    other => return Err(format!("unsupported map key type {}", other.type_name())),
                };
                m.insert(key, eval(v, env)?);
            }
            Ok(Val::Map(Rc::new(m)))
        }
        Expr::Not(x) => match eval(x, env)? {
            Val::Bool(b) => Ok(Val::Bool(!b)),
            other => Err(no_overload("!_", &[&other])),
        },
        Expr::Neg(x) => match eval(x, env)? {
            Val::Int(i) => i.checked_neg().map(Val::Int).ok_or_else(|| "integer overflow".into()),
            Val::Double(d) => Ok(Val::Double(-d)),
            other => Err(no_overload("-_", &[&other])),
        },
        Expr::And(l, r) => {
            let lv = eval(l, env);
            if let Ok(Val::Bool(false)) = lv {
                return Ok(Val::Bool(false));
            }
            let rv = eval(r, env);
            match (lv, rv) {
                (_, Ok(Val::Bool(false))) => Ok(Val::Bool(false)),
                (Ok(Val::Bool(true)), Ok(Val::Bool(true))) => Ok(Val::Bool(true)),
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(a), Ok(b)) => Err(no_overload("_&&_", &[&a, &b])),
            }
        }
        Expr::Or(l, r) => {
            let lv = eval(l, env);
            if let Ok(Val::Bool(true)) = lv {
                return Ok(Val::Bool(true));
            }
            let rv = eval(r, env);
            match (lv, rv) {
                (_, Ok(Val::Bool(true))) => Ok(Val::Bool(true)),
                (Ok(Val::Bool(false)), Ok(Val::Bool(false))) => Ok(Val::Bool(false)),
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(a), Ok(b)) => Err(no_overload("_||_", &[&a, &b])),
            }
        }
        Expr::Cond(c, t, f) => match eval(c, env)? {
            Val::Bool(true) => eval(t, env),
            Val::Bool(false) => eval(f, env),
            other => Err(no_overload("_?_:_", &[&other])),
        },
        Expr::Bin(op, l, r) => {
            let a = eval(l, env)?;
            let b = eval(r, env)?;
            binary(*op, &a, &b)
        }
        Expr::Comp { kind, range, var, body } => {
            let items: Vec<Val> = match eval(range, env)? {
                Val::List(l) => l.as_ref().clone(),
                Val::Map(m) => m.keys().map(|k| Val::Str(Rc::from(k.as_str()))).collect(),
                other => return Err(no_overload("comprehension", &[&other])),
            };
            comprehension(*kind, &items, var, body, env)
        }
        Expr::Call { target, func, args } => {
            let t = match target {
                Some(t) => Some(eval(t, env)?),
                None => None,
            };
            let argv: Vec<Val> = args.iter().map(|a| eval(a, env)).collect::<Result<_, _>>()?;
            call(func, t.as_ref(), &argv)
        }
    }
}

fn comprehension(kind: Macro, items: &[Val], var: &str, body: &Expr, env: &mut Env) -> Result<Val, String> {
    let mut first_err: Option<String> = None;
    let mut count = 0usize;
    let mut out = Vec::new();
    for item in items {
        env.vars.push((var.to_string(), item.clone()));
        let r = eval(body, env);
        env.vars.pop();
        match kind {
            Macro::All => match r {
                Ok(Val::Bool(true)) => {}
                Ok(Val::Bool(false)) => return Ok(Val::Bool(false)),
                Ok(other) => keep_first(&mut first_err, no_overload("all", &[&other])),
                Err(e) => keep_first(&mut first_err, e),
            },
            Macro::Exists => match r {
                Ok(Val::Bool(true)) => return Ok(Val::Bool(true)),
                Ok(Val::Bool(false)) => {}
                Ok(other) => keep_first(&mut first_err, no_overload("exists", &[&other])),
                Err(e) => keep_first(&mut first_err, e),
            },
            Macro::ExistsOne => match r? {
                Val::Bool(true) => count += 1,
                Val::Bool(false) => {}
                other => return Err(no_overload("exists_one", &[&other])),
            },
            Macro::Filter => match r? {
                Val::Bool(true) => out.push(item.clone()),
                Val::Bool(false) => {}
                other => return Err(no_overload("filter", &[&other])),
            },
            Macro::Map => out.push(r?),
        }
    }
    match kind {
        Macro::All => first_err.map_or(Ok(Val::Bool(true)), Err),
        Macro::Exists => first_err.map_or(Ok(Val::Bool(false)), Err),
        Macro::ExistsOne => Ok(Val::Bool(count == 1)),
        Macro::Filter | Macro::Map => Ok(Val::List(Rc::new(out))),
    }
}

fn keep_first(slot: &mut Option<String>, err: String) {
    if slot.is_none() {
        *slot = Some(err);
    }
}

fn num_cmp(a: &Val, b: &Val) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        (Val::Uint(x), Val::Uint(y)) => Some(x.cmp(y)),
        (Val::Int(x), Val::Uint(y)) => Some(if *x < 0 { std::cmp::Ordering::Less } else { (*x as u64).cmp(y) }),
        (Val::Uint(x), Val::Int(y)) => Some(if *y < 0 { std::cmp::Ordering::Greater } else { x.cmp(&(*y as u64)) }),
        (Val::Double(x), _) => to_f64(b).and_then(|y| x.partial_cmp(&y)),
        (_, Val::Double(y)) => to_f64(a).and_then(|x| x.partial_cmp(y)),
        _ => None,
    }
}

fn to_f64(v: &Val) -> Option<f64> {
    match v {
        Val::Int(i) => Some(*i as f64),
        Val::Uint(u) => Some(*u as f64),
        Val::Double(d) => Some(*d),
        _ => None,
    }
}

/// CEL heterogeneous equality: numbers compare by value, other kinds must match.
fn equals(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::List(x), Val::List(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equals(p, q)),
        (Val::Map(x), Val::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equals(v, w)))
        }
        _ if to_f64(a).is_some() && to_f64(b).is_some() => num_cmp(a, b) == Some(std::cmp::Ordering::Equal),
        _ => a == b,
    }
}

fn binary(op: BinOp, a: &Val, b: &Val) -> Result<Val, String> {
    use std::cmp::Ordering::*;
    let name = match op {
        BinOp::Eq => return Ok(Val::Bool(equals(a, b))),
        BinOp::Ne => return Ok(Val::Bool(!equals(a, b))),
        BinOp::In => {
            return match b {
                Val::List(l) => Ok(Val::Bool(l.iter().any(|x| equals(a, x)))),
                Val::Map(m) => match a {
                    Val::Str(k) => Ok(Val::Bool(m.contains_key(&**k))),
                    _ => Ok(Val::Bool(false)),
                },
                _ => Err(no_overload("@in", &[a, b])),
            }
        }
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let ord = match (a, b) {
                (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
                (Val::Bool(x), Val::Bool(y)) => Some(x.cmp(y)),
                _ => num_cmp(a, b),
            };
            let Some(ord) = ord else {
                return Err(no_overload("_<_", &[a, b]));
            };
            return Ok(Val::Bool(match op {
                BinOp::Lt => ord == Less,
                BinOp::Le => ord != Greater,
                BinOp::Gt => ord == Greater,
                _ => ord != Less,
            }));
        }
        BinOp::Add => "_+_",
        BinOp::Sub => "_-_",
        BinOp::Mul => "_*_",
        BinOp::Div => "_/_",
        BinOp::Rem => "_%_",
    };
    let overflow = || "integer overflow".to_string();
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => match op {
            BinOp::Add => x.checked_add(*y).map(Val::Int).ok_or_else(overflow),
            BinOp::Sub => x.checked_sub(*y).map(Val::Int).ok_or_else(overflow),
            BinOp::Mul => x.checked_mul(*y).map(Val::Int).ok_or_else(overflow),
            BinOp::Div if *y == 0 => Err("division by zero".into()),
            BinOp::Rem if *y == 0 => Err("modulus by zero".into()),
            BinOp::Div => x.checked_div(*y).map(Val::Int).ok_or_else(overflow),
            _ => x.checked_rem(*y).map(Val::Int).ok_or_else(overflow),
        },
        (Val::Uint(x), Val::Uint(y)) => match op {
            BinOp::Add => x.checked_add(*y).map(Val::Uint).ok_or_else(overflow),
            BinOp::Sub => x.checked_sub(*y).map(Val::Uint).ok_or_else(overflow),
            BinOp::Mul => x.checked_mul(*y).map(Val::Uint).ok_or_else(overflow),
            BinOp::Div if *y == 0 => Err("division by zero".into()),
            BinOp::Rem if *y == 0 => Err("modulus by zero".into()),
            BinOp::Div => Ok(Val::Uint(x / y)),
            _ => Ok(Val::Uint(x % y)),
        },
        (Val::Double(x), Val::Double(y)) => match op {
            BinOp::Add => Ok(Val::Double(x + y)),
            BinOp::Sub => Ok(Val::Double(x - y)),
            BinOp::Mul => Ok(Val::Double(x * y)),
            BinOp::Div => Ok(Val::Double(x / y)),
            _ => Err(no_overload(name, &[a, b])),
        },
        (Val::Str(x), Val::Str(y)) if op == BinOp::Add => Ok(Val::Str(Rc::from(format!("{x}{y}").as_str()))),
        (Val::List(x), Val::List(y)) if op == BinOp::Add => {
            Ok(Val::List(Rc::new(x.iter().chain(y.iter()).cloned().collect())))
        }
        _ => Err(no_overload(name, &[a, b])),
    }
}

fn call(func: &str, target: Option<&Val>, args: &[Val]) -> Result<Val, String> {
    let s = |v: &Val| -> Option<Rc<str>> {
        match v {
            Val::Str(s) => Some(s.clone()),
            _ => None,
        }
    };
    match (func, target, args) {
        ("size", None, [x]) | ("size", Some(x), []) => match x {
            Val::Str(s) => Ok(Val::Int(s.chars().count() as i64)),
            Val::List(l) => Ok(Val::Int(l.len() as i64)),
            Val::Map(m) => Ok(Val::Int(m.len() as i64)),
            other => Err(no_overload("size", &[other])),
        },
        ("startsWith" | "endsWith" | "contains" | "matches", Some(t), [a]) => {
            let (Some(t), Some(a)) = (s(t), s(a)) else {
                return Err(no_overload(func, &[t, a]));
            };
            Ok(Val::Bool(match func {
                "startsWith" => t.starts_with(&*a),
                "endsWith" => t.ends_with(&*a),
                "contains" => t.contains(&*a),
                _ => regex::Regex::new(&a).map_err(|e| format!("invalid regular expression: {e}"))?.is_match(&t),
            }))
        }
        ("matches", None, [t, a]) => call("matches", Some(t), std::slice::from_ref(a)),
        ("lowerAscii" | "upperAscii" | "trim", Some(t), []) => {
            let Some(t) = s(t) else {
                return Err(no_overload(func, &[t]));
            };
            let out = match func {
                "lowerAscii" => t.to_ascii_lowercase(),
                "upperAscii" => t.to_ascii_uppercase(),
                _ => t.trim().to_string(),
            };
            Ok(Val::Str(Rc::from(out.as_str())))
        }
        ("string", None, [x]) => Ok(Val::Str(Rc::from(
            match x {
                Val::Str(s) => s.to_string(),
                Val::Int(i) => i.to_string(),
                Val::Uint(u) => u.to_string(),
                Val::Double(d) => d.to_string(),
                Val::Bool(b) => b.to_string(),
                other => return Err(no_overload("string", &[other])),
            }
            .as_str(),
        ))),
        ("int", None, [x]) => match x {
            Val::Int(i) => Ok(Val::Int(*i)),
            Val::Uint(u) => i64::try_from(*u).map(Val::Int).map_err(|_| "integer overflow".into()),
            Val::Double(d) => Ok(Val::Int(*d as i64)),
            Val::Str(s) => s.parse().map(Val::Int).map_err(|e| format!("{e}")),
            other => Err(no_overload("int", &[other])),
        },
        _ => {
            let mut all: Vec<&Val> = target.into_iter().collect();
            all.extend(args.iter());
            Err(no_overload(func, &all))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rule: &str, this: Json) -> Result<Val, String> {
        Program::parse(rule).expect("parses").eval(&Val::from_json(&this))
    }

    #[test]
    fn evaluates_the_rule_shapes_of_our_crds() {
        let refs = serde_json::json!([{"kind": "Gateway"}, {"kind": "XBackend"}]);
        assert_eq!(run("self.all(ref, ref.kind == self[0].kind)", refs), Ok(Val::Bool(false)));
        assert_eq!(run("self.all(ref, ref.kind == self[0].kind)", serde_json::json!([])), Ok(Val::Bool(true)));
        let rules = serde_json::json!([{"name": "a"}, {"name": "a"}]);
        assert_eq!(run("self.all(r, self.filter(x, x.name == r.name).size() == 1)", rules), Ok(Val::Bool(false)));
        assert_eq!(
            run(
                "[has(self.serviceName),has(self.hostname)].filter(x,x==true).size() == 1",
                serde_json::json!({"hostname": "h"})
            ),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("self.type == 'CEL' ? has(self.cel) : true", serde_json::json!({"type": "CEL"})),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run(
                "has(self.params) && self.params.size() > 0 ? self.name in ['prompts/get', 'tools/call'] : true",
                serde_json::json!({"name": "prompts/list", "params": ["x"]})
            ),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run(
                r#"self.value.matches(r"""^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$""")"#,
                serde_json::json!({"value": "/a b"})
            ),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run(
                "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
                serde_json::json!({"group": "", "kind": "Service"})
            ),
            Ok(Val::Bool(false))
        );
        // error absorption
        assert_eq!(run("false && self.missing", serde_json::json!({})), Ok(Val::Bool(false)));
        assert_eq!(run("self.missing || true", serde_json::json!({})), Ok(Val::Bool(true)));
        assert!(run("self.missing == 1", serde_json::json!({})).is_err());
        assert_eq!(run("1 == 1.0 && 2u == 2 && 'a' != 1", serde_json::json!({})), Ok(Val::Bool(true)));
    }
}
