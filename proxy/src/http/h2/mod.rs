//! HTTP/2 for clients (RFC 9113), sans I/O: frames, HPACK encoding, request checks and the
//! server side of a connection. The I/O shell driving it is `stream::http::h2`.

pub mod frame;
pub mod hpack;
pub mod request;
pub mod server;
