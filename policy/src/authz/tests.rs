use toolgate_ext_authz_proto::envoy::r#type::v3::HttpStatus;
use toolgate_ext_authz_proto::envoy::service::auth::v3::{DeniedHttpResponse, OkHttpResponse};
use toolgate_ext_authz_proto::google::protobuf::BoolValue;
use toolgate_ext_authz_proto::google::rpc::Status;

use super::*;

fn response(code: i32, http: Option<HttpResponse>) -> CheckResponse {
    CheckResponse { status: Some(Status { code, ..Default::default() }), http_response: http, dynamic_metadata: None }
}

#[test]
fn check_responses() {
    // OK without an http_response allows with no change.
    assert_eq!(read_check_response(response(0, None)), Answer::Allow(vec![]));
    assert_eq!(read_check_response(CheckResponse::default()), Answer::Allow(vec![]));
    // An error_response is the authorizer failing, not denying.
    let error = HttpResponse::ErrorResponse(DeniedHttpResponse::default());
    assert_eq!(read_check_response(response(13, Some(error))), Answer::Fail(AuthzFailure::Unavailable));
    // A denial without a usable status: 0 (Toolgate's own denial).
    for status in [None, Some(0), Some(99), Some(700)] {
        let denied = HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: status.map(|code| HttpStatus { code }),
            ..Default::default()
        });
        assert!(matches!(read_check_response(response(7, Some(denied))), Answer::Deny(Denied { status: 0, .. })), "{status:?}");
    }
    // A non-OK status without a body is a denial too.
    assert!(matches!(read_check_response(response(7, None)), Answer::Deny(Denied { status: 0, .. })));
    // `append` (deprecated) wins over `append_action`; OVERWRITE replaces.
    let mut set = HeaderValueOption::new("X-Team", "blue");
    set.append = Some(BoolValue { value: false });
    let mut overwrite = HeaderValueOption::new("x-a", "1");
    overwrite.append_action = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
    let ok = HttpResponse::OkResponse(OkHttpResponse {
        headers: vec![set, overwrite, HeaderValueOption::new(":path", "/admin"), HeaderValueOption::new("content-length", "0")],
        headers_to_remove: vec!["x-b".into(), ":authority".into(), "host".into()],
        ..Default::default()
    });
    assert_eq!(
        read_check_response(response(0, Some(ok))),
        Answer::Allow(vec![
            HeaderEdit::Set("x-team".into(), "blue".into()),
            HeaderEdit::Set("x-a".into(), "1".into()),
            HeaderEdit::Remove("x-b".into()),
        ])
    );
}

#[test]
fn http_responses() {
    let h = |status: &str| vec![(":status".to_string(), status.to_string()), ("x-user".into(), "u".into()), ("date".into(), "d".into())];
    assert_eq!(read_http_response(&[], h("204"), vec![]), Answer::Allow(vec![HeaderEdit::Set("x-user".into(), "u".into())]));
    assert_eq!(read_http_response(&["date".into()], h("200"), vec![]), Answer::Allow(vec![HeaderEdit::Set("date".into(), "d".into())]));
    assert!(matches!(read_http_response(&[], h("302"), vec![]), Answer::Deny(Denied { status: 302, .. })));
    // 1xx: not a final status, never the status of a denial (lifecycle fuzz target).
    for bad in ["", "abc", "99", "100", "101", "135", "199", "600"] {
        assert_eq!(read_http_response(&[], h(bad), vec![]), Answer::Fail(AuthzFailure::Malformed), "{bad:?}");
    }
    assert_eq!(read_http_response(&[], vec![], vec![]), Answer::Fail(AuthzFailure::Malformed));
}
