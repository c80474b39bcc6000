//! Request-derived text in decision summaries, log lines and `explain` output.
//!
//! The rendered access log prints the decision summary inside double quotes
//! (`toolgate="deny ..."`), so text a client chose (a key's name, a `content-encoding` value) must
//! not be able to close that field, start a new one or a new line, or end with a backslash that
//! escapes the closing quote. [`Quoted`] writes such text between single quotes with every byte
//! that could do so escaped, and bounds its length.

use std::fmt;

/// At most this many characters of request-derived text are shown.
pub const MAX_SHOWN: usize = 64;

/// Displays request-derived text as `'…'`: printable ASCII other than `"`, `'` and `\` as is;
/// `\` and `'` backslash-escaped; `"` as `\x22`; any other character as `\u{…}`; cut after
/// [`MAX_SHOWN`] characters (`...` marks the cut). The output never contains `"`, a control
/// character or a non-ASCII character.
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'")?;
        for (i, c) in self.0.chars().enumerate() {
            if i == MAX_SHOWN {
                f.write_str("...")?;
                break;
            }
            match c {
                '\\' => f.write_str("\\\\")?,
                '\'' => f.write_str("\\'")?,
                '"' => f.write_str("\\x22")?,
                ' '..='~' => fmt::Write::write_char(f, c)?,
                _ => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
        }
        f.write_str("'")
    }
}

/// Request-derived text for a denial's summary, kept without allocating (the filter's walk
/// allocates nothing for a denial: policy/tests/walk_alloc.rs): what is written to it, as long as
/// it fits in [`ShownText::CAP`] bytes, then `...`. Each write is kept whole or not at all, so
/// [`Quoted`] text stays log-safe when cut (none of its pieces ends in a backslash).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ShownText {
    len: u8,
    cut: bool,
    buf: [u8; ShownText::CAP],
}

impl ShownText {
    pub const CAP: usize = 160;

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl Default for ShownText {
    fn default() -> Self {
        ShownText {
            len: 0,
            cut: false,
            buf: [0; ShownText::CAP],
        }
    }
}

impl fmt::Write for ShownText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        const MORE: &[u8] = b"...";
        let len = usize::from(self.len);
        if self.cut {
            return Ok(());
        }
        if len + s.len() + MORE.len() <= Self::CAP {
            self.buf[len..len + s.len()].copy_from_slice(s.as_bytes());
            self.len = (len + s.len()) as u8;
        } else {
            self.buf[len..len + MORE.len()].copy_from_slice(MORE);
            self.len = (len + MORE.len()) as u8;
            self.cut = true;
        }
        Ok(())
    }
}

impl fmt::Display for ShownText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ShownText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Whether `s` can be printed inside a double-quoted access-log field as it is: printable ASCII
/// without `"`, and not ending in a backslash.
pub fn is_log_safe(s: &str) -> bool {
    s.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'"') && !s.ends_with('\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_cannot_leave_its_field() {
        for s in [
            "x\" forged=\"1",
            "a\nb",
            "\\",
            "ends\\",
            "é\u{0}\u{1b}[31m",
            "'",
            "\u{2028}",
        ] {
            let shown = Quoted(s).to_string();
            assert!(is_log_safe(&shown), "{s:?} -> {shown}");
            assert!(shown.starts_with('\'') && shown.ends_with('\''), "{shown}");
        }
        assert_eq!(Quoted("gzip").to_string(), "'gzip'");
        assert_eq!(
            Quoted("a\"b\\c'd\ne").to_string(),
            "'a\\x22b\\\\c\\'d\\u{a}e'"
        );
    }

    /// Every way request text reaches a denial summary (the reader's errors, an encoding) keeps the
    /// summary printable inside the access log's double quotes.
    #[test]
    fn denial_summaries_of_hostile_bodies_are_log_safe() {
        use crate::eval::{Decision, DenyReason, Level, Verdict};
        use crate::mcp::{read_body, NotMcp, ReadOptions};
        let hostile = [
            "{\"a\\\" forged=\\\"1\":1,\"a\\\" forged=\\\"1\":2}".to_string(),
            "{\"x\\n\\u0000\\\\\":1,\"x\\n\\u0000\\\\\":1}".to_string(),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"N\\u0061me\":\"\\\"\"}}"
                .to_string(),
            "{\"\u{e9}\":1,\"\u{e9}\":1}".to_string(),
        ];
        let mut errors: Vec<NotMcp> = hostile
            .iter()
            .map(|b| read_body(b.as_bytes(), ReadOptions::default()).unwrap_err())
            .collect();
        // Argument keys that fold together reach the summary too (when params are captured).
        let twins =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\
                     \"arguments\":{\"a\\\" forged=\\\"1\":1,\"A\\\" forged=\\\"1\":2}}}";
        errors.push(
            read_body(
                twins.as_bytes(),
                ReadOptions {
                    capture_params: true,
                },
            )
            .unwrap_err(),
        );
        assert!(
            matches!(errors.last(), Some(NotMcp::FoldedTwins { .. })),
            "{:?}",
            errors.last()
        );
        errors.push(NotMcp::Encoded {
            encoding: "gzip\" forged=\"1\\".into(),
        });
        for e in errors {
            let d = Decision {
                verdict: Verdict::Deny(DenyReason::NoRuleMatched {
                    level: Level::Gateway,
                    policies: 1,
                    request: Default::default(),
                    considered: "".into(),
                }),
                under_policy: true,
                message: None,
                gateway_rule: None,
                backend_rule: None,
                not_mcp: Some(e.to_string()),
                authorized: [None, None],
            };
            let summary = d.summary();
            assert!(is_log_safe(&summary), "{e:?} -> {summary}");
            assert!(summary.contains("body is not MCP"), "{summary}");
        }
    }

    #[test]
    fn long_text_is_cut() {
        let shown = Quoted(&"x".repeat(1000)).to_string();
        assert_eq!(shown.len(), MAX_SHOWN + 5);
        assert!(shown.ends_with("...'"));
    }
}
