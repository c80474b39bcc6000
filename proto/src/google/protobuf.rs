//! Well-known types: `google/protobuf/struct.proto`, `timestamp.proto`, `any.proto`,
//! `wrappers.proto` (github.com/protocolbuffers/protobuf, `src/google/protobuf/`).
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// `google.protobuf.Struct` (struct.proto): `map<string, Value> fields = 1;`
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Struct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: BTreeMap<String, Value>,
}

/// `google.protobuf.Value` (struct.proto): `oneof kind { NullValue null_value = 1;
/// double number_value = 2; string string_value = 3; bool bool_value = 4;
/// Struct struct_value = 5; ListValue list_value = 6; }`
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

pub mod value {
    /// `Value.kind`.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Kind {
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        #[prost(double, tag = "2")]
        NumberValue(f64),
        #[prost(string, tag = "3")]
        StringValue(::alloc::string::String),
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `google.protobuf.ListValue` (struct.proto): `repeated Value values = 1;`
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// `google.protobuf.NullValue` (struct.proto): `NULL_VALUE = 0;`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum NullValue {
    NullValue = 0,
}

/// `google.protobuf.Timestamp` (timestamp.proto): `int64 seconds = 1; int32 nanos = 2;`
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `google.protobuf.Any` (any.proto): `string type_url = 1; bytes value = 2;`
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.protobuf.BoolValue` (wrappers.proto): `bool value = 1;`. A field of this type is an
/// `Option<BoolValue>`: `None` = unset, distinct from `Some(false)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct BoolValue {
    #[prost(bool, tag = "1")]
    pub value: bool,
}
