//! Gateway API host names (listener and HTTPRoute `hostname(s)`): `a.example.com`, `*.example.com`
//! (deeper names only, not `example.com` itself) or none (every host). The controller's one place
//! for what a host-name pattern matches, how two patterns overlap and which one wins.

use toolgate_policy::eval::host_suffix_covers as suffix_covers;
use toolgate_policy::plan::HostMatch;

/// The hosts a listener hostname matches (Gateway API: `*.example.com` matches deeper names only;
/// no hostname matches every host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hostname {
    Any,
    Exact(String),
    /// `*.example.com` as `.example.com`.
    Wildcard(String),
}

impl Hostname {
    /// Whether `host` (a request's host name, without port) is one of these; case-insensitive.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Hostname::Any => true,
            Hostname::Exact(h) => h.eq_ignore_ascii_case(host),
            Hostname::Wildcard(s) => suffix_covers(s, host),
        }
    }

    pub fn of(hostname: Option<&str>) -> Self {
        match hostname.map(str::to_ascii_lowercase) {
            None => Hostname::Any,
            Some(h) if h.is_empty() => Hostname::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => Hostname::Wildcard(suffix.to_string()),
                None => Hostname::Exact(h),
            },
        }
    }

    pub fn host_match(&self) -> Option<HostMatch> {
        match self {
            Hostname::Any => None,
            Hostname::Exact(h) => Some(HostMatch::Exact(h.clone())),
            Hostname::Wildcard(s) => Some(HostMatch::Suffix(s.clone())),
        }
    }

    /// No host matches both.
    pub fn disjoint(&self, other: &Hostname) -> bool {
        match (self, other) {
            (Hostname::Any, _) | (_, Hostname::Any) => false,
            (Hostname::Exact(a), Hostname::Exact(b)) => a != b,
            (Hostname::Exact(h), Hostname::Wildcard(s))
            | (Hostname::Wildcard(s), Hostname::Exact(h)) => !suffix_covers(s, h),
            (Hostname::Wildcard(a), Hostname::Wildcard(b)) => {
                !(a.ends_with(b.as_str()) || b.ends_with(a.as_str()))
            }
        }
    }

    /// Wins over `other` for the hosts both match: an exact name over a wildcard, a longer wildcard
    /// over a shorter one, anything over no hostname.
    pub fn more_specific(&self, other: &Hostname) -> bool {
        match (self, other) {
            (Hostname::Any, _) => false,
            (_, Hostname::Any) => true,
            (Hostname::Exact(_), Hostname::Wildcard(_)) => true,
            (Hostname::Wildcard(a), Hostname::Wildcard(b)) => a.len() > b.len(),
            _ => false,
        }
    }

    /// The hosts matched by both `self` and a rule's host matcher, as one matcher (None: none).
    pub fn narrow(&self, m: &HostMatch) -> Option<HostMatch> {
        match (self, m) {
            (Hostname::Any, m) => Some(m.clone()),
            (Hostname::Exact(h), HostMatch::Exact(x)) => (h == x).then(|| m.clone()),
            (Hostname::Exact(h), HostMatch::Suffix(s)) => {
                suffix_covers(s, h).then(|| HostMatch::Exact(h.clone()))
            }
            (Hostname::Wildcard(s), HostMatch::Exact(x)) => suffix_covers(s, x).then(|| m.clone()),
            (Hostname::Wildcard(a), HostMatch::Suffix(b)) => {
                if b.ends_with(a.as_str()) {
                    Some(m.clone())
                } else if a.ends_with(b.as_str()) {
                    Some(HostMatch::Suffix(a.clone()))
                } else {
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Hostname {
        Hostname::of(if s.is_empty() { None } else { Some(s) })
    }

    #[test]
    fn what_a_pattern_matches() {
        assert!(h("a.example.com").matches("A.Example.com"));
        assert!(!h("a.example.com").matches("b.example.com"));
        assert!(h("*.example.com").matches("x.y.Example.com"));
        assert!(
            !h("*.example.com").matches("example.com"),
            "deeper names only"
        );
        assert!(!h("*.example.com").matches("xexample.com"));
        assert!(h("").matches("anything.org"));
    }

    #[test]
    fn hostnames_as_sets() {
        assert!(h("a.example.com").disjoint(&h("b.example.com")));
        assert!(!h("a.example.com").disjoint(&h("A.example.com")));
        assert!(!h("a.example.com").disjoint(&h("*.example.com")));
        assert!(
            h("example.com").disjoint(&h("*.example.com")),
            "a wildcard matches deeper names only"
        );
        assert!(h("*.a.com").disjoint(&h("*.b.com")));
        assert!(!h("*.x.a.com").disjoint(&h("*.a.com")));
        assert!(
            h("*.xa.com").disjoint(&h("*.a.com")),
            "suffixes compare at label boundaries (.a.com)"
        );
        assert!(!h("").disjoint(&h("a.com")));
        assert!(h("a.example.com").more_specific(&h("*.example.com")));
        assert!(h("*.x.example.com").more_specific(&h("*.example.com")));
        assert!(!h("*.example.com").more_specific(&h("a.example.com")));
        assert!(h("*.example.com").more_specific(&h("")));
        assert!(!h("").more_specific(&h("a.com")));
        let w = h("*.example.com");
        assert_eq!(
            w.narrow(&HostMatch::Exact("a.example.com".into())),
            Some(HostMatch::Exact("a.example.com".into()))
        );
        assert_eq!(w.narrow(&HostMatch::Exact("example.com".into())), None);
        assert_eq!(
            w.narrow(&HostMatch::Suffix(".com".into())),
            Some(HostMatch::Suffix(".example.com".into()))
        );
        assert_eq!(
            w.narrow(&HostMatch::Suffix(".x.example.com".into())),
            Some(HostMatch::Suffix(".x.example.com".into()))
        );
        assert_eq!(
            h("a.example.com").narrow(&HostMatch::Suffix(".example.com".into())),
            Some(HostMatch::Exact("a.example.com".into()))
        );
        assert_eq!(
            h("a.example.com").narrow(&HostMatch::Exact("b.example.com".into())),
            None
        );
    }
}
