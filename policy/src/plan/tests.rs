use sha2::{Digest, Sha256};

use super::hash::hex;
use super::*;

/// A sealed plan with what could trip a text scan: whitespace, quotes, backslashes, escapes and
/// non-ASCII in strings, and `hash` as a name at other depths.
fn tricky_plan() -> CompiledPlan {
    let rule = |name: &str| RulePlan {
        name: name.into(),
        principal: Some("spiffe://td/ns/a b/sa/\"q\"".into()),
        mcp: Some(McpMatch {
            base_protocol: false,
            methods: vec![McpMethodMatch {
                method: MethodPattern::Exact("tools/call".into()),
                params: vec!["hash".into(), "a\\\"b\n\t\u{1}é😀".into(), " ".into()],
            }],
        }),
        ..RulePlan::default()
    };
    let mut plan = CompiledPlan::empty("ns/gw/l \"hash\":\"x\"");
    plan.gateway.allow.push(PolicyPlan {
        name: "ns/p".into(),
        rules: vec![rule(IMPLICIT_RULE), rule("hash")],
        dry_run: false,
    });
    let backend = PolicyPlan {
        name: "hash".into(),
        rules: vec![rule("r")],
        dry_run: false,
    };
    plan.backends.insert(
        "hash".into(),
        LevelPlan {
            allow: vec![backend],
            ..Default::default()
        },
    );
    plan.seal()
}

/// Istio's rendering of a plan: keys in another order, numbers as doubles.
#[test]
fn whole_numbers_written_as_doubles_load() {
    let mut plan = tricky_plan();
    plan.gateway.allow[0].rules[0].http.ports = vec![8443, 80];
    let plan = plan.seal();
    let json = serde_json::to_string(&plan).unwrap();
    let doubled = json
        .replace(r#""version":1"#, r#""version":1.0"#)
        .replace(
            r#""maxBodyBytes":1048576"#,
            r#""maxBodyBytes":1.048576e+06"#,
        )
        .replace(r#""ports":[8443,80]"#, r#""ports":[8443.0,8e1]"#);
    assert_ne!(doubled, json);
    assert_eq!(
        crate::eval::Evaluator::load(doubled.as_bytes())
            .unwrap()
            .plan(),
        &plan
    );
    for bad in [
        r#""version":1.5"#,
        r#""version":-1"#,
        r#""version":4294967296"#,
    ] {
        let text = json.replace(r#""version":1"#, bad);
        assert!(
            crate::eval::Evaluator::load(text.as_bytes()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn content_hash_ignores_only_the_hash() {
    let plan = tricky_plan();
    let mut unhashed = plan.clone();
    unhashed.hash.clear();
    let expected = hex(&Sha256::digest(serde_json::to_vec(&unhashed).unwrap()));
    assert_eq!(plan.hash, expected);
    assert_eq!(unhashed.content_hash(), expected);
    unhashed.listener.push('x');
    assert_ne!(unhashed.content_hash(), expected);
}

#[test]
fn the_text_hash_of_serde_json_output_is_the_content_hash() {
    for plan in [tricky_plan(), CompiledPlan::empty("l").seal()] {
        for json in [
            serde_json::to_vec(&plan).unwrap(),
            serde_json::to_vec_pretty(&plan).unwrap(),
        ] {
            assert_eq!(
                json_content_hash(&json),
                plan.hash,
                "{}",
                String::from_utf8_lossy(&json)
            );
        }
    }
    let plan = tricky_plan();
    // Equal with or without a hash, whatever its value.
    let mut unhashed = plan.clone();
    unhashed.hash = "0".repeat(64);
    assert_eq!(
        json_content_hash(&serde_json::to_vec(&unhashed).unwrap()),
        plan.hash
    );
    unhashed.hash.clear();
    assert_eq!(
        json_content_hash(&serde_json::to_vec(&unhashed).unwrap()),
        plan.hash
    );
}

#[test]
fn the_text_hash_of_other_renderings_differs() {
    let plan = tricky_plan();
    let compact = serde_json::to_string(&plan).unwrap();
    // Keys reordered (serde_json::Value sorts them), `/` escaped, a field spelled out.
    let value: serde_json::Value = serde_json::from_str(&compact).unwrap();
    let reordered = serde_json::to_string(&value).unwrap();
    let escaped = compact.replace("ns/", "ns\\/");
    let spelled_out = compact.replace(r#""name":"r","#, r#""name":"r","http":{},"#);
    let tampered = compact.replace("ns/p", "ns/q");
    for json in [reordered, escaped, spelled_out, tampered] {
        assert_ne!(compact, json);
        assert_ne!(json_content_hash(json.as_bytes()), plan.hash, "{json}");
    }
}
