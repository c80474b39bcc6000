//! Policy regular expressions with RE2's syntax and semantics.
//!
//! Header and path matchers' expressions are RE2 syntax (Gateway API, Envoy) and match the whole
//! value (docs/semantics.md §3). The evaluator runs them with the Rust `regex` crate, whose syntax is a superset
//! of RE2's in places and whose Unicode mode gives `\d`, `\w`, `\s`, `\b` Unicode meanings. So an
//! expression is first parsed on its own (never inside our `^(?:…)$` wrapper, which would balance
//! `a)|(b`), checked against RE2's grammar, and rewritten so that the Rust engine matches what RE2
//! matches:
//!
//! - rejected, as RE2 rejects them: repetition counts over 1000 and nested counted repetitions whose
//!   counts multiply past 1000 (`(a{2}){501}`), stacked repetition operators (`a**`, `a{2}{3}`),
//!   Unicode classes RE2 does not know (`\p{Alphabetic}`, `\p{sc=Greek}`, `\p{greek}`, `\p{Cn}`,
//!   `\p{LC}`, scripts newer than RE2's Unicode tables), flags other than `i`, `m`, `s`, `U`,
//!   `\u`/`\U` escapes, back-references (`\1`), group names RE2 refuses (`(?P<a.b>x)`);
//! - rejected because RE2 reads them as something else (literal text), so they are ambiguous:
//!   nested classes and class set operations (`[[a]]`, `[a-z&&[^aeiou]]`, `[a~~b]`), `\<`, `\>`,
//!   `\b{start}` and the other `\b{…}` forms, `{,n}`;
//! - rejected although RE2 accepts them (stricter, with a message saying so): `\Q…\E`, `\C`, empty
//!   `(?)`, duplicate or digit-leading group names, `{` as a literal (`a{`, `a{x}`, `a{,}`: escape
//!   it), a `-` after a class in a class (`[\d-z]`), `[` as a literal in a class (`[a[]`);
//! - rewritten to RE2's ASCII meaning: `\d` = `[0-9]`, `\w` = `[0-9A-Za-z_]`, `\s` = `[\t\n\f\r ]`
//!   (no `\v`), their negations, also inside brackets; `\b`, `\B` = ASCII word boundaries;
//!   `\p{C}` = `Cc|Cf|Co|Cs` (RE2's C has no unassigned code points); octal escapes (`\123`, `\0`)
//!   as RE2 reads them.
//!
//! Envoy 1.40's own RE2 (route `safe_regex`) parses patterns as Latin-1 and rejects `\x{100}` and
//! above; policies match UTF-8 text, so this module follows RE2's UTF-8 mode (see
//! tests/regex/expressions.txt, `latin1:` entries).
//!
//! Everything else keeps Unicode mode, as RE2 does on UTF-8: `.` is one code point and `(?i)` uses
//! Unicode simple case folding. The one remaining difference is the Unicode version of the tables
//! (`regex-syntax` may know characters newer than Envoy's RE2).

use regex::Regex;
use regex_syntax::ast::{
    self, parse::ParserBuilder, print::Printer, Ast, ClassBracketed, ClassPerl, ClassPerlKind,
    ClassSet, ClassSetItem, ClassSetRange, ClassSetUnion, ClassUnicode, ClassUnicodeKind, Flag,
    Flags, FlagsItem, FlagsItemKind, Group, GroupKind, HexLiteralKind, Literal, LiteralKind,
    RepetitionKind, RepetitionRange, Span,
};

/// RE2's limit on a repetition count, and on the product of nested counted repetitions.
pub const MAX_REPEAT: u32 = 1000;

/// Compiled size limit for one expression (bytes of the Rust engine's program).
const SIZE_LIMIT: usize = 1 << 20;

mod names;

use names::{CATEGORIES, SCRIPTS};

/// Compiles an RE2 expression that must match the whole input, with RE2's syntax and semantics.
/// The error names the expression and the problem.
pub fn full_match_regex(expr: &str) -> Result<Regex, String> {
    let fail = |reason: String| format!("invalid regular expression {expr:?}: {reason}");
    let rewritten = to_rust_syntax(expr).map_err(fail)?;
    regex::RegexBuilder::new(&format!("^(?:{rewritten})$"))
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| {
            // The parser's message spans lines and shows our ^(?:...)$ wrapper: keep its last line.
            let text = e.to_string();
            fail(
                text.lines()
                    .last()
                    .unwrap_or("")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_string(),
            )
        })
}

/// Checks `expr` against RE2's grammar and returns the equivalent expression in the Rust
/// `regex` crate's syntax (not yet anchored).
pub fn to_rust_syntax(expr: &str) -> Result<String, String> {
    let mut ast = ParserBuilder::new().octal(true).empty_min_range(true).build().parse(expr).map_err(|e| {
        let at = &expr[e.span().start.offset.min(expr.len())..];
        if at.starts_with(r"\Q") || at.starts_with(r"\E") {
            r"\Q...\E quoting is not supported (RE2 accepts it; Toolgate does not): escape each character instead".to_string()
        } else if at.starts_with(r"\C") {
            r"\C (any byte) is not supported (RE2 accepts it; Toolgate does not)".to_string()
        } else {
            e.kind().to_string()
        }
    })?;
    Walker { src: expr }.ast(&mut ast, MAX_REPEAT)?;
    let mut out = String::new();
    Printer::new()
        .print(&ast, &mut out)
        .map_err(|_| "cannot print the expression".to_string())?;
    Ok(out)
}

struct Walker<'a> {
    src: &'a str,
}

impl Walker<'_> {
    fn text(&self, span: &Span) -> &str {
        self.src
            .get(span.start.offset..span.end.offset)
            .unwrap_or("")
    }

    /// `budget`: what is left of RE2's 1000 after dividing by the enclosing counted repetitions.
    /// One flat match over the kinds of node (long, each arm what RE2 says of that kind).
    fn ast(&self, node: &mut Ast, budget: u32) -> Result<(), String> {
        match node {
            Ast::Empty(_) | Ast::Dot(_) => Ok(()),
            Ast::Flags(set) => self.flags(&set.flags),
            Ast::Literal(lit) => self.literal(lit),
            Ast::Assertion(a) => {
                use ast::AssertionKind::*;
                match a.kind {
                    StartLine | EndLine | StartText | EndText => Ok(()),
                    WordBoundary | NotWordBoundary => {
                        // RE2's \b and \B are ASCII: (?-u:\b) is the Rust crate's ASCII word boundary.
                        let span = a.span;
                        let inner = Ast::assertion((**a).clone());
                        *node = Ast::group(Group {
                            span,
                            kind: GroupKind::NonCapturing(Flags {
                                span,
                                items: vec![
                                    FlagsItem {
                                        span,
                                        kind: FlagsItemKind::Negation,
                                    },
                                    FlagsItem {
                                        span,
                                        kind: FlagsItemKind::Flag(Flag::Unicode),
                                    },
                                ],
                            }),
                            ast: Box::new(inner),
                        });
                        Ok(())
                    }
                    _ => {
                        let text = self.text(&a.span);
                        let re2 = if text.starts_with(r"\b") {
                            r"\b then literal text"
                        } else {
                            "a literal < or >"
                        };
                        Err(format!("{text} is ambiguous: RE2 reads it as {re2}, the Rust engine as a word boundary"))
                    }
                }
            }
            Ast::ClassUnicode(u) => {
                if let Some(class) = self.unicode(u)? {
                    *node = Ast::class_bracketed(class);
                }
                Ok(())
            }
            Ast::ClassPerl(p) => {
                *node = Ast::class_bracketed(perl_class(p));
                Ok(())
            }
            Ast::ClassBracketed(b) => self.class_set(&mut b.kind),
            Ast::Repetition(rep) => {
                if matches!(*rep.ast, Ast::Repetition(_)) {
                    return Err(format!(
                        "bad repetition operator: {} (RE2 does not stack repetition operators)",
                        self.text(&rep.op.span)
                    ));
                }
                let mut budget = budget;
                if let RepetitionKind::Range(range) = &rep.op.kind {
                    let op = self.text(&rep.op.span);
                    if op.starts_with("{,") {
                        return Err(format!(
                            "{op} is ambiguous: RE2 reads it as literal text, the Rust engine as {{0,n}}: write {{0,n}} or escape the brace"
                        ));
                    }
                    let (min, max) = match *range {
                        RepetitionRange::Exactly(n) => (n, Some(n)),
                        RepetitionRange::AtLeast(n) => (n, None),
                        RepetitionRange::Bounded(a, b) => (a, Some(b)),
                    };
                    let count = min.max(max.unwrap_or(0));
                    if count > MAX_REPEAT {
                        return Err(format!(
                            "repetition count {count} exceeds RE2's limit of {MAX_REPEAT}"
                        ));
                    }
                    // RE2's RepetitionWalker: divide by each nested count (max, or min when unbounded).
                    if let Some(left) = budget.checked_div(max.unwrap_or(min)) {
                        budget = left;
                        if budget == 0 {
                            return Err(format!("nested repetition counts multiply past RE2's limit of {MAX_REPEAT} (at {op})"));
                        }
                    }
                }
                self.ast(&mut rep.ast, budget)
            }
            Ast::Group(g) => {
                match &g.kind {
                    GroupKind::CaptureIndex(_) => {}
                    GroupKind::CaptureName { name, .. } => {
                        if !name.name.chars().all(|c| c == '_' || c.is_alphanumeric()) {
                            return Err(format!(
                                "invalid group name {:?}: RE2 allows only word characters",
                                name.name
                            ));
                        }
                    }
                    GroupKind::NonCapturing(flags) => self.flags(flags)?,
                }
                self.ast(&mut g.ast, budget)
            }
            Ast::Alternation(alt) => alt.asts.iter_mut().try_for_each(|a| self.ast(a, budget)),
            Ast::Concat(cat) => cat.asts.iter_mut().try_for_each(|a| self.ast(a, budget)),
        }
    }

    fn flags(&self, flags: &Flags) -> Result<(), String> {
        for item in &flags.items {
            if let FlagsItemKind::Flag(Flag::Unicode | Flag::CRLF | Flag::IgnoreWhitespace) =
                item.kind
            {
                return Err(format!(
                    "flag {:?} is not RE2 syntax (RE2 has only i, m, s and U)",
                    self.text(&item.span)
                ));
            }
        }
        Ok(())
    }

    fn literal(&self, lit: &mut Literal) -> Result<(), String> {
        match lit.kind {
            LiteralKind::HexFixed(HexLiteralKind::X) | LiteralKind::HexBrace(HexLiteralKind::X) => {
                Ok(())
            }
            LiteralKind::HexFixed(_) | LiteralKind::HexBrace(_) => Err(format!(
                r"{} is not RE2 syntax: write \x{{...}}",
                self.text(&lit.span)
            )),
            LiteralKind::Octal => {
                let text = self.text(&lit.span);
                if text.len() == 2 && !text.ends_with('0') {
                    return Err(format!(
                        "{text}: back-references are not supported (RE2 rejects them)"
                    ));
                }
                // RE2 reads \0, \0NN and \NNN (first digit 1-7) as octal, as the Rust parser does
                // with octal on; print it in hex, which the final (non-octal) parse accepts.
                lit.kind = LiteralKind::HexBrace(HexLiteralKind::X);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `None`: keep the class as it is; `Some`: replace it with this bracketed class.
    fn unicode(&self, u: &mut ClassUnicode) -> Result<Option<ClassBracketed>, String> {
        // RE2's \p{^Greek} is \P{Greek}; the Rust parser keeps the ^ in the name.
        if let ClassUnicodeKind::Named(n) = &u.kind {
            if let Some(rest) = n.strip_prefix('^') {
                u.kind = ClassUnicodeKind::Named(rest.to_string());
                u.negated = !u.negated;
            }
        }
        let name = match &u.kind {
            ClassUnicodeKind::OneLetter(c) => c.to_string(),
            ClassUnicodeKind::Named(n) => n.clone(),
            ClassUnicodeKind::NamedValue { .. } => String::new(),
        };
        if !(name == "Any"
            || CATEGORIES.contains(&name.as_str())
            || SCRIPTS.contains(&name.as_str()))
        {
            return Err(format!(
                "{} is not a Unicode class RE2 knows",
                self.text(&u.span)
            ));
        }
        let span = u.span;
        let items: Vec<ClassSetItem> = match name.as_str() {
            // Rust's \p{C} includes unassigned code points (Cn); RE2's C is Cc, Cf, Co and Cs (no
            // surrogate is a char, so Cs adds nothing).
            "C" => ["Cc", "Cf", "Co"]
                .iter()
                .map(|n| {
                    ClassSetItem::Unicode(ClassUnicode {
                        span,
                        negated: false,
                        kind: ClassUnicodeKind::Named(n.to_string()),
                    })
                })
                .collect(),
            // Surrogates: the Rust parser has no such class; it matches no char. Write it as
            // "not any char" (negated below).
            "Cs" => {
                let lit = |c: char| Literal {
                    span,
                    kind: LiteralKind::HexBrace(HexLiteralKind::X),
                    c,
                };
                let all = ClassSetItem::Range(ClassSetRange {
                    span,
                    start: lit('\0'),
                    end: lit(char::MAX),
                });
                return Ok(Some(ClassBracketed {
                    span,
                    negated: !u.is_negated(),
                    kind: ClassSet::Item(ClassSetItem::Union(ClassSetUnion {
                        span,
                        items: vec![all],
                    })),
                }));
            }
            _ => return Ok(None),
        };
        Ok(Some(ClassBracketed {
            span,
            negated: u.is_negated(),
            kind: ClassSet::Item(ClassSetItem::Union(ClassSetUnion { span, items })),
        }))
    }

    fn class_set(&self, set: &mut ClassSet) -> Result<(), String> {
        match set {
            ClassSet::BinaryOp(op) => Err(format!(
                "{} is ambiguous: RE2 reads &&, -- and ~~ in a class as literal characters, the Rust engine as set operations",
                self.text(&op.span)
            )),
            ClassSet::Item(item) => self.class_item(item),
        }
    }

    fn class_item(&self, item: &mut ClassSetItem) -> Result<(), String> {
        match item {
            ClassSetItem::Empty(_) | ClassSetItem::Ascii(_) => Ok(()),
            ClassSetItem::Literal(lit) => self.literal(lit),
            ClassSetItem::Range(ClassSetRange { start, end, .. }) => {
                self.literal(start)?;
                self.literal(end)
            }
            ClassSetItem::Unicode(u) => {
                if let Some(class) = self.unicode(u)? {
                    *item = ClassSetItem::Bracketed(Box::new(class));
                }
                Ok(())
            }
            ClassSetItem::Perl(p) => {
                *item = ClassSetItem::Bracketed(Box::new(perl_class(p)));
                Ok(())
            }
            ClassSetItem::Bracketed(b) => Err(format!(
                r"{} is ambiguous: RE2 reads [ in a class as a literal, the Rust engine as a nested class: escape it as \[",
                self.text(&b.span)
            )),
            ClassSetItem::Union(u) => u.items.iter_mut().try_for_each(|i| self.class_item(i)),
        }
    }
}

/// RE2's ASCII `\d`, `\w`, `\s` (and negations) as an explicit class.
fn perl_class(p: &ClassPerl) -> ClassBracketed {
    let span = p.span;
    let lit = |c: char| Literal {
        span,
        kind: LiteralKind::HexBrace(HexLiteralKind::X),
        c,
    };
    let range = |a: char, b: char| {
        ClassSetItem::Range(ClassSetRange {
            span,
            start: lit(a),
            end: lit(b),
        })
    };
    let items = match p.kind {
        ClassPerlKind::Digit => vec![range('0', '9')],
        ClassPerlKind::Word => vec![
            range('0', '9'),
            range('A', 'Z'),
            range('a', 'z'),
            ClassSetItem::Literal(lit('_')),
        ],
        // \t \n \f \r and space: no \v, unlike the Rust engine's ASCII \s.
        ClassPerlKind::Space => vec![
            range('\t', '\n'),
            range('\x0C', '\r'),
            ClassSetItem::Literal(lit(' ')),
        ],
    };
    ClassBracketed {
        span,
        negated: p.negated,
        kind: ClassSet::Item(ClassSetItem::Union(ClassSetUnion { span, items })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejects(expr: &str, why: &str) {
        match full_match_regex(expr) {
            Ok(_) => panic!("{expr:?} accepted"),
            Err(e) => {
                assert!(
                    e.starts_with(&format!("invalid regular expression {expr:?}: ")),
                    "{e}"
                );
                assert!(e.contains(why), "{expr:?}: {e:?} does not say {why:?}");
            }
        }
    }

    fn re(expr: &str) -> Regex {
        full_match_regex(expr).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn rejects_what_re2_rejects() {
        rejects("a)|(b", "unopened group");
        rejects("(a", "unclosed group");
        rejects(
            "a{1001}",
            "repetition count 1001 exceeds RE2's limit of 1000",
        );
        rejects("a{5,1001}", "repetition count 1001");
        rejects("a{1001,}", "repetition count 1001");
        rejects("(a{2}){501}", "multiply past RE2's limit of 1000");
        rejects("((a{10}){10}){11}", "multiply past");
        rejects("(a{500}|b){3}", "multiply past");
        rejects(
            r"\p{Alphabetic}",
            r"\p{Alphabetic} is not a Unicode class RE2 knows",
        );
        rejects(r"\p{sc=Greek}", "not a Unicode class RE2 knows");
        rejects(r"\p{Lowercase_Letter}", "not a Unicode class RE2 knows");
        rejects(r"\p{greek}", "not a Unicode class RE2 knows");
        rejects(r"\p{Grek}", "not a Unicode class RE2 knows");
        rejects(r"\p{Cn}", "not a Unicode class RE2 knows");
        rejects(r"\p{LC}", "not a Unicode class RE2 knows");
        rejects(r"\p{Garay}", "not a Unicode class RE2 knows");
        rejects(r"[\p{Alphabetic}]", "not a Unicode class RE2 knows");
        rejects("(?x)a b", "flag \"x\" is not RE2 syntax");
        rejects("(?u)a", "flag \"u\"");
        rejects("(?-u:a)", "flag \"u\"");
        rejects("(?R)a", "flag \"R\"");
        rejects("(?i-x:a)", "flag \"x\"");
        rejects("a**", "bad repetition operator");
        rejects("a*??", "bad repetition operator");
        rejects("a{2}{3}", "bad repetition operator");
        rejects(r"\u0041", r"\u0041 is not RE2 syntax");
        rejects(r"\U00000041", "is not RE2 syntax");
        rejects(r"\u{41}", "is not RE2 syntax");
        rejects(r"\1", "back-references");
        rejects(r"\8", "");
        rejects("(?=a)", "");
        rejects("(?P<a.b>x)", "invalid group name");
        rejects(r"\e", "");
        rejects(r"\Z", "");
        rejects("[]", "");
        rejects("[z-a]", "");
        rejects("a\\", "");
    }

    #[test]
    fn rejects_what_re2_reads_differently() {
        rejects("[a-z&&[^aeiou]]", "ambiguous");
        rejects("[[a]]", "nested class");
        rejects("[a~~b]", "set operations");
        rejects("[a--b]", "set operations");
        rejects(r"\<a\>", "ambiguous");
        rejects(r"a\>", "ambiguous");
        rejects(r"\b{start}", r"\b{start} is ambiguous");
        rejects(r"\b{end}x", "ambiguous");
        rejects(r"\b{start-half}x", "ambiguous");
        rejects("a{,5}", "{,5} is ambiguous");
    }

    #[test]
    fn rejects_some_re2_forms_with_a_clear_message() {
        rejects(r"\Qa.b\E", r"\Q...\E quoting is not supported");
        rejects(r"a\C", r"\C (any byte) is not supported");
    }

    #[test]
    fn perl_classes_and_word_boundaries_are_ascii() {
        let d = re(r"\d+");
        assert!(d.is_match("42"));
        assert!(!d.is_match("٣"), "Arabic-Indic digit");
        assert!(!d.is_match("１"), "fullwidth digit");
        assert!(re(r"\D").is_match("٣"));
        assert!(!re(r"\w").is_match("é"));
        assert!(re(r"\w+").is_match("aZ09_"));
        assert!(re(r"\W").is_match("é"));
        let s = re(r"\s");
        for c in ["\t", "\n", "\x0C", "\r", " "] {
            assert!(s.is_match(c), "{c:?}");
        }
        assert!(!s.is_match("\u{b}"), "vertical tab");
        assert!(!s.is_match("\u{a0}"), "no-break space");
        assert!(!s.is_match("\u{2003}"));
        assert!(re(r"\S").is_match("\u{b}"));
        // Inside brackets too.
        assert!(!re(r"[\d_]+").is_match("١_"));
        assert!(re(r"[\d_]+").is_match("1_"));
        assert!(re(r"[^\s]").is_match("\u{b}"));
        assert!(!re(r"[^\s]").is_match(" "));
        assert!(re(r"[\D]").is_match("٣"));
        assert!(!re(r"[\D]").is_match("3"));
        assert!(!re(r"[\w]").is_match("é"));
        // \b: é is not a word character in RE2, so there is a boundary between é and f.
        assert!(re(r".\bfoo\b").is_match("éfoo"));
        assert!(!re(r".\bfoo\b").is_match("afoo"));
        assert!(re(r".\Bfoo").is_match("afoo"));
        assert!(!re(r".\Bfoo").is_match("éfoo"));
        // (?i) still folds the ASCII classes as RE2 does (K, k and the Kelvin sign).
        assert!(re(r"(?i)\w").is_match("\u{212A}"));
    }

    #[test]
    fn accepts_re2_forms() {
        assert!(re("(?i)abc").is_match("AbC"));
        assert!(re("[[:alpha:]]+").is_match("abZ"));
        assert!(!re("[[:alpha:]]+").is_match("é"));
        assert!(re(r"\pL").is_match("é"));
        assert!(re(r"\p{L}\PL").is_match("é1"));
        assert!(re(r"\p{Greek}+").is_match("αβ"));
        assert!(re(r"\p{^Greek}").is_match("a"));
        assert!(re(r"\pN").is_match("٣"));
        assert!(re(r"\p{Any}").is_match("☃"));
        assert!(re(r"\p{Lu}").is_match("É"));
        assert!(re("(?P<n>x)(?<m>y)").is_match("xy"));
        assert!(re("a{2,1000}").is_match("aaa"));
        assert!(re("a{1000,}").is_match(&"a".repeat(1000)));
        assert!(re("((a{10}){10}){10}").is_match(&"a".repeat(1000)));
        assert!(re("(?s).").is_match("\n"));
        assert!(!re(".").is_match("\n"));
        assert!(re(".").is_match("é"));
        assert!(re("(?i)ß").is_match("ẞ"));
        assert!(re("(?U)a+").is_match("aa"));
        assert!(re("(?m)^a$").is_match("a"));
        assert!(re("[]a]+").is_match("]a"));
        assert!(re("[a-]+").is_match("-a"));
        assert!(re(r"\x41\x{42}").is_match("AB"));
        assert!(re(r"\101\0").is_match("A\0"), "octal as RE2 reads it");
        assert!(re(r"[\101-\103]").is_match("C"));
        assert!(re(r"\_\-\%\ ").is_match("_-% "));
        assert!(re(r"\Aa\z").is_match("a"));
        assert!(re("()|(|)").is_match(""));
        assert!(re("x{0}").is_match(""));
        assert!(re(r"\p{C}").is_match("\u{7}"));
        // RE2's C has no unassigned code points.
        assert!(!re(r"\p{C}").is_match("\u{378}"));
        assert!(!re(r"[\pC]").is_match("\u{378}"));
        assert!(re(r"\PC").is_match("\u{378}"));
        assert!(!re(r"\p{Cs}").is_match("a"));
        assert!(re(r"\P{Cs}").is_match("a"));
        assert!(re(r"[^\p{Cs}]").is_match("a"));
    }

    #[test]
    fn whole_value_only() {
        let r = re("a|b");
        assert!(r.is_match("a") && r.is_match("b"));
        assert!(!r.is_match("ab"));
        assert!(!re("abc").is_match("xabcx"));
    }
}
