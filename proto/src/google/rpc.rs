//! `google/rpc/status.proto` (github.com/googleapis/googleapis).
use alloc::string::String;
use alloc::vec::Vec;

/// `google.rpc.Status`: `int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3;`
/// In a `CheckResponse`, `code` 0 (OK) allows and anything else (usually 7, PERMISSION_DENIED)
/// denies.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Status {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<super::protobuf::Any>,
}

/// `google.rpc.Code` values used with ext_authz (google/rpc/code.proto).
pub mod code {
    pub const OK: i32 = 0;
    pub const UNKNOWN: i32 = 2;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}
