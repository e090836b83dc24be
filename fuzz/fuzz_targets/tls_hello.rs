//! The TLS ClientHello peek behind `req.ssl_hello_type`, `req.ssl_sni`, `req.ssl_alpn` and
//! `req.ssl_ver`: never a panic, and a prefix of input that gave an answer never contradicts it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::tcp::hello::{self, Peek};

fuzz_target!(|data: &[u8]| {
    let _ = hello::hello_type(data);
    let _ = hello::ssl_ver(data);
    let _ = hello::handshake(data);
    let whole = hello::client_hello(data);
    // More bytes can only turn NeedMore into an answer: a prefix is never Invalid when the
    // whole is Found.
    if matches!(whole, Peek::Found(_)) {
        let step = (data.len() / 64).max(1);
        for k in (0..data.len()).step_by(step) {
            assert!(
                !matches!(hello::client_hello(&data[..k]), Peek::Invalid),
                "prefix {k} invalid, whole found"
            );
        }
    }
});
