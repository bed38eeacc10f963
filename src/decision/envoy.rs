//! The few messages of Envoy's `ext_authz` API that the gRPC Check reads and writes, declared
//! with prost's derive under the field numbers of Envoy's published protos
//! (`envoy/service/auth/v3/{external_auth,attribute_context}.proto`,
//! `envoy/config/core/v3/{address,base}.proto`, `envoy/type/v3/http_status.proto`,
//! `google/rpc/status.proto`).
//!
//! Why by hand: the crate that carries the generated API (envoy-types) compiles all of Envoy's
//! thousands of messages and a gRPC transport stack, which made the first `cargo run` several
//! minutes longer for the eight messages used here. Fields not declared are skipped by the
//! decoder, as protobuf requires. The tests talk to this listener with a client built from the
//! published protos (envoy-types and tonic, dev-dependencies only), which checks every field
//! number below against Envoy's.

use std::collections::BTreeMap;

/// `envoy.service.auth.v3.CheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CheckRequest {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<AttributeContext>,
}

/// `envoy.service.auth.v3.AttributeContext`: the peer that sent the request and the request.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct AttributeContext {
    #[prost(message, optional, tag = "1")]
    pub source: Option<Peer>,
    #[prost(message, optional, tag = "4")]
    pub request: Option<Request>,
}

/// `envoy.service.auth.v3.AttributeContext.Peer`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Peer {
    #[prost(message, optional, tag = "1")]
    pub address: Option<Address>,
}

/// `envoy.config.core.v3.Address`: only its socket address is read (a pipe or an internal
/// address names no client).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Address {
    #[prost(message, optional, tag = "1")]
    pub socket_address: Option<SocketAddress>,
}

/// `envoy.config.core.v3.SocketAddress`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SocketAddress {
    #[prost(string, tag = "2")]
    pub address: String,
}

/// `envoy.service.auth.v3.AttributeContext.Request`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Request {
    #[prost(message, optional, tag = "2")]
    pub http: Option<HttpRequest>,
}

/// `envoy.service.auth.v3.AttributeContext.HttpRequest`. Envoy sends the headers in `headers`,
/// or, with `encode_raw_headers`, in `header_map` (values as bytes) and leaves `headers` empty.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HttpRequest {
    #[prost(string, tag = "2")]
    pub method: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub headers: BTreeMap<String, String>,
    #[prost(string, tag = "4")]
    pub path: String,
    #[prost(string, tag = "5")]
    pub host: String,
    #[prost(message, optional, tag = "13")]
    pub header_map: Option<HeaderMap>,
}

/// `envoy.config.core.v3.HeaderMap`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HeaderMap {
    #[prost(message, repeated, tag = "1")]
    pub headers: Vec<HeaderValue>,
}

/// `envoy.config.core.v3.HeaderValue`: `raw_value` is set instead of `value` in a raw header map.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HeaderValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(bytes = "vec", tag = "3")]
    pub raw_value: Vec<u8>,
}

/// `envoy.config.core.v3.HeaderValueOption` (its append fields left unset: Envoy's default).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HeaderValueOption {
    #[prost(message, optional, tag = "1")]
    pub header: Option<HeaderValue>,
}

/// `envoy.service.auth.v3.CheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CheckResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(oneof = "HttpResponse", tags = "2, 3")]
    pub http_response: Option<HttpResponse>,
}

/// `envoy.service.auth.v3.CheckResponse.http_response`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum HttpResponse {
    #[prost(message, tag = "2")]
    DeniedResponse(DeniedHttpResponse),
    #[prost(message, tag = "3")]
    OkResponse(OkHttpResponse),
}

/// `envoy.service.auth.v3.DeniedHttpResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct DeniedHttpResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<HttpStatus>,
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, tag = "3")]
    pub body: String,
}

/// `envoy.service.auth.v3.OkHttpResponse`: headers added to the request sent upstream.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct OkHttpResponse {
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
}

/// `envoy.type.v3.HttpStatus` (its `code` is the `StatusCode` enum, whose values are the
/// HTTP status numbers).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HttpStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
}

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Status {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}
