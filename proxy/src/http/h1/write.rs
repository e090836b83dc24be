//! Head serialization. Field names are emitted lowercase, as HAProxy 2.6 (HTX) does.

use crate::http::head::{Headers, RequestHead, ResponseHead, Version};

fn version_str(v: Version) -> &'static [u8] {
    match v {
        Version::Http10 => b"HTTP/1.0",
        // A request received over HTTP/2 is forwarded as HTTP/1.1.
        Version::Http11 | Version::Http2 => b"HTTP/1.1",
    }
}

fn write_fields(headers: &Headers, out: &mut Vec<u8>) {
    // Room for all at once, and each name lowercased where it was copied: pushing it byte by
    // byte checked the capacity at every byte.
    let need: usize = headers
        .0
        .iter()
        .map(|h| h.name.len() + h.value.len() + 4)
        .sum();
    out.reserve(need + 2);
    for h in &headers.0 {
        let at = out.len();
        out.extend_from_slice(h.name.as_bytes());
        if let Some(name) = out.get_mut(at..) {
            name.make_ascii_lowercase();
        }
        out.extend_from_slice(b": ");
        out.extend_from_slice(&h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `METHOD SP target SP version CRLF`, the fields and the empty line to `out`.
pub fn write_request_head(head: &RequestHead, out: &mut Vec<u8>) {
    out.extend_from_slice(head.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.target.as_bytes());
    out.push(b' ');
    out.extend_from_slice(version_str(head.version));
    out.extend_from_slice(b"\r\n");
    write_fields(&head.headers, out);
}

/// Appends `version SP status SP reason CRLF`, the fields and the empty line to `out`.
pub fn write_response_head(head: &ResponseHead, out: &mut Vec<u8>) {
    out.extend_from_slice(version_str(head.version));
    out.push(b' ');
    push_status(head.status, out);
    out.push(b' ');
    out.extend_from_slice(head.reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    write_fields(&head.headers, out);
}

/// A head the proxy made itself, as its maker wrote it: names keep their case (the H1 mux's
/// own pages capitalise them), and an empty reason leaves no space after the status.
pub fn write_reply_head(head: &ResponseHead, out: &mut Vec<u8>) {
    out.extend_from_slice(version_str(head.version));
    out.push(b' ');
    push_status(head.status, out);
    if !head.reason.is_empty() {
        out.push(b' ');
        out.extend_from_slice(head.reason.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    for h in &head.headers.0 {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn push_status(status: u16, out: &mut Vec<u8>) {
    let s = status.min(999);
    out.extend_from_slice(&[
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]);
}
