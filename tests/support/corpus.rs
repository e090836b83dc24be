//! The HTTP/1 smuggling corpus (`shared/data/http1-corpus/corpus.jsonl`), shared by the codec's
//! unit test and the integration test against the binary.

#[path = "shared.rs"]
mod shared;

use base64::Engine as _;
use serde_json::Value;

/// One corpus line; each test reads the fields it judges by.
#[allow(dead_code)]
#[derive(Clone, Debug)]
pub struct Case {
    pub id: String,
    pub raw: Vec<u8>,
    pub expect: String,
    pub status: Option<u16>,
    pub alt_expect: Vec<String>,
    pub alt_status: Vec<u16>,
    pub backend_requests: usize,
    pub forward_note: String,
    pub half_close: bool,
    /// What HAProxy 2.6 forwarded for these bytes (`haproxy_2_6_observed.forwarded_heads`).
    pub haproxy_heads: Vec<String>,
}

fn string(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

/// An array's items; none for null or a missing key.
fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn strings(v: &Value) -> Vec<String> {
    items(v).iter().map(string).collect()
}

fn status(v: &Value) -> Option<u16> {
    v.as_u64()
        .map(|n| u16::try_from(n).expect("status fits u16"))
}

pub fn load() -> Vec<Case> {
    let path = shared::shared_path("data/http1-corpus/corpus.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let j: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            Case {
                id: string(&j["id"]),
                raw: base64::engine::general_purpose::STANDARD
                    .decode(j["raw_b64"].as_str().expect("raw_b64"))
                    .expect("raw_b64 is base64"),
                expect: string(&j["expect"]),
                status: status(&j["status"]),
                alt_expect: strings(&j["alt_expect"]),
                alt_status: items(&j["alt_status"]).iter().filter_map(status).collect(),
                backend_requests: j["backend_requests"]
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .expect("backend_requests"),
                forward_note: j["forward_note"].as_str().unwrap_or("").to_string(),
                half_close: j["client_half_close"] == Value::Bool(true),
                haproxy_heads: strings(&j["haproxy_2_6_observed"]["forwarded_heads"]),
            }
        })
        .collect()
}
