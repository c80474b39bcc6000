use super::*;

fn req<'a>(headers: &'a [(&'a str, &'a str)]) -> HttpRequest<'a> {
    HttpRequest {
        method: "POST",
        path: "/mcp?x=1",
        authority: "gw.example.com:8443",
        port: 8443,
        headers,
        principal: Some("spiffe://cluster.local/ns/default/sa/a"),
        server_name: None,
        auth: None,
        // 2026-11-23T12:00:00Z
        time_ms: 1_795_435_200_000,
    }
}

fn eval(expression: &str, tool: &str, params: &str) -> bool {
    let headers = [
        ("mcp-protocol-version", "2025-11-25"),
        ("x-team", "blue"),
        ("x-team", "red"),
        (":path", "/mcp"),
    ];
    let r = req(&headers);
    let rule = compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    rule.matches(&Input {
        req: &r,
        method: Some("tools/call"),
        tool_name: Some(tool),
        params: Some(params),
    })
}

const PARAMS: &str = r#"{"name":"get-weather","arguments":{"city":"Paris","days":3,"tags":["a","b"],"geo":{"lat":48.8}}}"#;

#[test]
fn variables_evaluate_as_spec_3_says() {
    let yes = [
        "request.mcp.tool_name == 'get-weather'",
        "request.mcp.method == 'tools/call'",
        "request.mcp.tool_name.startsWith('get-') && request.mcp.tool_name.contains('weath')",
        "request.mcp.tool_name.matches('^get-[a-z]+$')",
        "request.mcp.params.arguments.city == 'Paris'",
        "request.mcp.params.arguments.days == 3 && request.mcp.params.arguments.days < 4",
        "request.mcp.params.arguments.geo.lat > 48.0",
        "'b' in request.mcp.params.arguments.tags && size(request.mcp.params.arguments.tags) == 2",
        "request.mcp.params.arguments.tags.all(t, t.size() == 1)",
        "has(request.mcp.params.arguments.city) && !has(request.mcp.params.arguments.country)",
        "request.path == '/mcp?x=1' && request.url_path == '/mcp'",
        "request.method == 'POST'",
        "request.host.endsWith(':8443')",
        "request.headers['mcp-protocol-version'] == '2025-11-25'",
        "request.headers['x-team'] == 'blue,red'",
        "request.time.getFullYear() >= 2025",
        "source.principal == 'spiffe://cluster.local/ns/default/sa/a'",
        "request.mcp.tool_name.lowerAscii() == 'get-weather' || false",
        // A whole variable always exists (folded when compiled); a comprehension's own `request` is
        // tested for real.
        "has(request.mcp.tool_name) && has(request.headers) && has(source.principal) && has(request.mcp.params)",
        "[{'path': 1}].exists(request, has(request.path)) && ![{'x': 1}].exists(request, has(request.path))",
        "[1].exists(x, request.mcp.tool_name == 'get-weather' && request.headers['x-team'] == 'blue,red')",
        // A variable read twice is made once and read the same.
        "request.mcp.params.arguments.city == 'Paris' && request.mcp.params.arguments.days == 3",
    ];
    for e in yes {
        assert!(eval(e, "get-weather", PARAMS), "{e}");
    }
    let no = [
        "request.mcp.tool_name == 'echo'",
        "request.path == '/wrong'",
        "request.method == 'GET'",
        "request.time.getFullYear() < 2000",
        // Errors are no match: a missing key, a type mismatch, a result that is not a bool.
        "request.mcp.params.arguments.country == 'FR'",
        "request.headers['absent'] == 'x'",
        "request.mcp.params.arguments.days == 'three'",
        "request.mcp.tool_name",
        "1 / 0 == 1",
    ];
    for e in no {
        assert!(!eval(e, "get-weather", PARAMS), "{e}");
    }
    // Params that are not an object, or absent.
    assert!(!eval(
        "request.mcp.params.arguments.city == 'Paris'",
        "t",
        "[1,2]"
    ));
    assert!(eval("request.mcp.params == null", "t", "not json"));
}

#[test]
fn numbers_are_the_nearest_double_as_servers_read_them() {
    // 9.99999999999999915 is nearest to 10.0 (Go, Python, JavaScript read 10); serde_json without
    // `float_roundtrip` read 9.999999999999998, which let `a < 10` hold for a call the server ran with 10.
    for a in ["9.99999999999999915", "0.999999999999999915e1", "10", "1e1"] {
        let params = format!(r#"{{"arguments":{{"a":{a}}}}}"#);
        assert!(
            !eval("request.mcp.params.arguments.a < 10.0", "t", &params),
            "{a}"
        );
        assert!(
            eval("request.mcp.params.arguments.a == 10.0", "t", &params),
            "{a}"
        );
    }
    assert!(eval(
        "request.mcp.params.arguments.a < 10.0",
        "t",
        r#"{"arguments":{"a":9.9999999999999991}}"#
    ));
}

#[test]
fn the_variables_used_are_found_when_compiled() {
    let u = compile("request.mcp.tool_name == 'a' && request.headers['x'] == 'b'")
        .unwrap()
        .uses;
    assert_eq!(
        u,
        Uses {
            tool_name: true,
            headers: true,
            ..Uses::default()
        }
    );
    let u = compile(
        "request.mcp.params.arguments.exists(k, k == 'city') || request.time.getFullYear() > 1",
    )
    .unwrap()
    .uses;
    assert_eq!(
        u,
        Uses {
            params: true,
            time: true,
            ..Uses::default()
        }
    );
}

#[test]
fn unknown_variables_syntax_errors_and_oversized_expressions_are_rejected() {
    for (expression, says) in [
        (
            "request.unrecognized == 'x'",
            "request.unrecognized is not a variable",
        ),
        ("source.unknown == 'x'", "source.unknown is not a variable"),
        (
            "unknown_variable.foo",
            "unknown_variable.foo is not a variable",
        ),
        ("request == 'x'", "request is not a variable"),
        ("request.mcp == {}", "request.mcp is not a variable"),
        ("request.mcp.tool_name ==", "syntax error"),
        ("request.mcp.tool_name == 'a' &&& x", "syntax error"),
        ("[1].all(x, [2].all(y, x < y))", "may not be nested"),
        ("[1].exists(x, x == y)", "y is not a variable"),
    ] {
        let e = compile(expression).map(|_| ()).unwrap_err();
        assert!(e.contains(says), "{expression}: {e}");
    }
    // Comprehension variables are fine, also when they shadow nothing.
    assert!(compile("request.mcp.params.arguments.tags.exists(t, t == 'a')").is_ok());
    let long = (0..300)
        .map(|i| format!("request.mcp.tool_name == 't{i}'"))
        .collect::<Vec<_>>()
        .join(" || ");
    assert!(compile(&long).unwrap_err().contains("nodes"));
}

#[test]
fn matches_has_re2_semantics() {
    // The digit classes are ASCII, as in RE2 (and in policy regular expressions).
    assert!(eval(
        r"request.mcp.tool_name.matches('^t\\d+$')",
        "t42",
        "{}"
    ));
    assert!(!eval(
        r"request.mcp.tool_name.matches('^t\\d+$')",
        "t٣٣",
        "{}"
    ));
    assert!(!eval(
        r"request.mcp.tool_name.matches('^t\\w+$')",
        "tété",
        "{}"
    ));
    // The global form, and a search rather than a full match.
    assert!(eval(
        r"matches(request.mcp.tool_name, 'et-w')",
        "get-weather",
        "{}"
    ));
    // A literal pattern RE2 rejects is refused when the policy is compiled ...
    for pattern in ["a)|(b", "a{1001}"] {
        let e = compile(&format!("request.mcp.tool_name.matches('{pattern}')"))
            .map(|_| ())
            .unwrap_err();
        assert!(e.starts_with("matches: ") && e.contains(pattern), "{e}");
    }
    // ... and one that reaches `matches` from the request is an evaluation error: no match.
    assert!(!eval(
        r"request.mcp.tool_name.matches(request.mcp.params.p)",
        "a",
        r#"{"p":"a)|(b"}"#
    ));
    assert!(eval(
        r"request.mcp.tool_name.matches(request.mcp.params.p)",
        "a",
        r#"{"p":"^a$"}"#
    ));
}

#[test]
fn matches_patterns_are_compiled_once_and_the_cache_is_bounded() {
    for i in 0..(2 * imp::PATTERN_CACHE) {
        let params = format!(r#"{{"p":"^t{i}$"}}"#);
        assert!(eval(
            "request.mcp.tool_name.matches(request.mcp.params.p)",
            &format!("t{i}"),
            &params
        ));
        assert!(imp::PATTERNS.with(|c| c.borrow().len()) <= imp::PATTERN_CACHE);
    }
}

#[test]
fn time_zones_are_checked_when_compiled() {
    // 2026-11-23T12:00:00Z is 13:00 in Paris, 07:00 in New York, 17:30 at +05:30.
    assert!(eval(
        "request.time.getHours('Europe/Paris') == 13",
        "t",
        "{}"
    ));
    assert!(eval(
        "request.time.getHours('America/New_York') == 7",
        "t",
        "{}"
    ));
    assert!(eval("request.time.getHours('+05:30') == 17", "t", "{}"));
    assert!(eval(
        "request.time.getHours('UTC') == 12 && request.time.getHours() == 12",
        "t",
        "{}"
    ));
    for zone in [
        "Mars/Base",
        "Europe/Paris ",
        "+25:00",
        "America/Indiana/Knox",
    ] {
        let e = compile(&format!("request.time.getDayOfWeek('{zone}') < 5"))
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.contains("is not known to this build") && e.contains(zone),
            "{zone}: {e}"
        );
    }
    // A zone from the request is only known at run time: an unknown one is no match.
    assert!(!eval(
        "request.time.getHours(request.mcp.params.z) >= 0",
        "t",
        r#"{"z":"Mars/Base"}"#
    ));
}

/// docs/semantics.md §6b: `request.auth.claims` is the verified payload, `request.auth.principal`
/// `<iss>/<sub>`; both empty without a token.
#[test]
fn token_claims_and_principal() {
    let token = crate::jwt::Auth::of_claims(
        serde_json::json!({"iss": "https://issuer.test", "sub": "agent-7", "aud": ["toolgate"],
            "scope": "tools:read tools:write", "exp": 1_900_000_000, "org": {"team": "blue"}}),
        Vec::new(),
    );
    let headers = [(":path", "/mcp")];
    let with = |auth: Option<&crate::jwt::Auth>, expression: &str| {
        let r = HttpRequest {
            auth,
            ..req(&headers)
        };
        let rule = compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        rule.matches(&Input {
            req: &r,
            method: Some("tools/call"),
            tool_name: Some("get-sum"),
            params: Some("{}"),
        })
    };
    for yes in [
        "request.auth.claims.sub == 'agent-7' && request.mcp.tool_name == 'get-sum'",
        "'tools:write' in request.auth.claims.scope.split(' ')",
        "'toolgate' in request.auth.claims.aud",
        "request.auth.claims.exp > 1800000000",
        "request.auth.claims['org'].team == 'blue'",
        "has(request.auth.claims.sub) && !has(request.auth.claims.email)",
        "request.auth.principal == 'https://issuer.test/agent-7'",
    ] {
        assert!(with(Some(&token), yes), "{yes}");
    }
    for no in [
        "'tools:admin' in request.auth.claims.scope.split(' ')",
        "request.auth.claims.sub == 'agent-8'",
    ] {
        assert!(!with(Some(&token), no), "{no}");
    }
    // Without a token: no claims (a missing key is an error: no match), principal "".
    assert!(!with(None, "request.auth.claims.sub == 'agent-7'"));
    assert!(with(
        None,
        "request.auth.claims.size() == 0 && request.auth.principal == ''"
    ));
    assert!(with(None, "!has(request.auth.claims.sub)"));
    let u = compile("request.auth.claims.sub == 'a' || request.auth.principal == 'b'")
        .unwrap()
        .uses;
    assert_eq!(
        u,
        Uses {
            auth: true,
            ..Uses::default()
        }
    );
    assert!(compile("request.auth.token == 'x'")
        .unwrap_err()
        .contains("is not a variable"));
}

/// docs/semantics.md §6b: `split` on a list of strings splits every element and flattens the parts,
/// so `scope.split(' ')` reads a normalized (list) scope as it reads a space-separated one; a string
/// receiver keeps the strings extension's `split`.
#[test]
fn split_reads_a_scope_as_a_string_or_a_list() {
    let headers = [(":path", "/mcp")];
    let with = |claims: serde_json::Value, expression: &str| {
        let token = crate::jwt::Auth::of_claims(claims, Vec::new());
        let r = HttpRequest {
            auth: Some(&token),
            ..req(&headers)
        };
        let rule = compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        rule.matches(&Input {
            req: &r,
            method: Some("tools/call"),
            tool_name: Some("get-sum"),
            params: Some("{}"),
        })
    };
    let as_string = serde_json::json!({"scope": "tools:read tools:write", "n": 1});
    let as_list = serde_json::json!({"scope": ["tools:read", "tools:write"], "n": 1});
    for claims in [&as_string, &as_list] {
        for yes in [
            "'tools:write' in request.auth.claims.scope.split(' ')",
            "request.auth.claims.scope.split(' ') == ['tools:read', 'tools:write']",
        ] {
            assert!(with(claims.clone(), yes), "{claims}: {yes}");
        }
        assert!(
            !with(
                claims.clone(),
                "'tools:admin' in request.auth.claims.scope.split(' ')"
            ),
            "{claims}"
        );
    }
    // A string receiver: the strings extension's `split`, unchanged (an empty separator splits
    // between code points, a limit keeps the remainder).
    for yes in [
        "'a b  c'.split(' ') == ['a', 'b', '', 'c']",
        "'aé'.split('') == ['a', 'é']",
        "'a b c'.split(' ', 2) == ['a', 'b c']",
        "''.split(' ') == ['']",
    ] {
        assert!(with(as_string.clone(), yes), "{yes}");
    }
    // A list receiver: each element split, the parts in order; an empty list has none.
    for yes in [
        "['a b', 'c', ''].split(' ') == ['a', 'b', 'c', '']",
        "['a,b', 'c d'].split(',') == ['a', 'b', 'c d']",
        "['aé', 'b'].split('') == ['a', 'é', 'b']",
        "[].split(' ') == []",
        "request.auth.claims.scope.split(' ').split(':').exists(p, p == 'write')",
    ] {
        assert!(with(as_list.clone(), yes), "{yes}");
    }
    // An element that is not a string is an evaluation error: no match, whatever surrounds it.
    for no in [
        "'a' in ['a', 1].split(' ')",
        "!('a' in ['a', 1].split(' '))",
        "size(['a', ['b']].split(' ')) >= 0",
        "request.auth.claims.n.split(' ') == []",
    ] {
        assert!(!with(as_list.clone(), no), "{no}");
    }
}
