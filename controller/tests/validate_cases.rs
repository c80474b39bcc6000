//! `toolgate validate` on the CRD cases of `tests/k8s/cases/`, offline. The same cases run against a
//! real API server in `crd_apiserver.rs`, which also checks that the server says the same.

mod common;

#[test]
fn validate_agrees_with_every_case() {
    let mut failures = Vec::new();
    for case in common::cases() {
        let out = common::toolgate_validate(&case.file);
        failures.extend(common::check_validate(&case, &out));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn validate_prints_object_and_field_path() {
    let case = common::repo_root().join("tests/k8s/cases/reject-spiffe-pattern.yaml");
    let out = common::toolgate_validate(&case);
    assert_eq!(out.code, 1);
    let line = out.stdout.lines().next().unwrap();
    assert!(
        line.starts_with(&format!(
            "{}#0 XAccessPolicy default/spiffe-invalid: spec.rules[0].source.spiffe: ",
            case.display()
        )),
        "{line}"
    );
}

#[test]
fn validate_exit_codes() {
    let dir = std::env::temp_dir().join(format!("toolgate-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_yaml = dir.join("bad.yaml");
    std::fs::write(&bad_yaml, "apiVersion: v1\nkind: [unclosed\n").unwrap();
    let out = common::toolgate_validate(&bad_yaml);
    assert_eq!(
        out.code, 1,
        "a YAML syntax error is invalid input: {}{}",
        out.stdout, out.stderr
    );
    let missing = dir.join("missing.yaml");
    assert_eq!(common::toolgate_validate(&missing).code, 2);
    let all_valid = common::repo_root().join("tests/k8s/cases/accept-cel.yaml");
    assert_eq!(common::toolgate_validate(&all_valid).code, 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// The API server takes no object over 3 MiB (its request limit): neither does validate, which
/// names the file, line and document of one and spends no time checking it.
#[test]
fn validate_refuses_objects_over_the_api_servers_limit() {
    let dir = std::env::temp_dir().join(format!("toolgate-validate-size-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("large.yaml");
    let config_map = |name: &str, bytes: usize| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{x: {}}}\n",
            "a".repeat(bytes)
        )
    };
    let limit = 3 * 1024 * 1024;
    std::fs::write(
        &file,
        format!(
            "{}---\n{}",
            config_map("fits", limit - 100),
            config_map("large", limit)
        ),
    )
    .unwrap();
    let out = common::toolgate_validate(&file);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.trim_end(),
        format!(
            "{}:6: document 1: v1 ConfigMap \"large\": the object is more than 3145728 bytes (3 MiB) as JSON, the most the API server takes",
            file.display()
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}
