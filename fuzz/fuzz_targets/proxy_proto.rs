//! The PROXY protocol v1/v2 parser: never a panic, `wanted` never asks for less than it has
//! without an answer, a parsed header never claims more bytes than given, and what the encoder
//! writes for the parsed addresses parses back to them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::proxy_proto::{self, Parsed};

fuzz_target!(|data: &[u8]| {
    let want = proxy_proto::wanted(data);
    match proxy_proto::parse(data) {
        Ok(Parsed::Done(h, n)) => {
            assert!(n <= data.len() && n > 0);
            let addrs = h.addrs.inet();
            let mut v1 = Vec::new();
            proxy_proto::encode_v1(addrs, &mut v1);
            match proxy_proto::parse(&v1) {
                Ok(Parsed::Done(h1, m)) => {
                    assert_eq!(m, v1.len());
                    assert_eq!(h1.addrs.inet(), addrs);
                }
                other => panic!("v1 re-encoding does not parse: {other:?}"),
            }
        }
        Ok(Parsed::NeedMore) => {
            assert!(
                want > data.len(),
                "NeedMore but wanted {want} <= {}",
                data.len()
            );
        }
        Err(_) => {}
    }
});
