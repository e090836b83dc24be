//! crt-list files and the certificate name extraction SNI selection uses: never a panic, and a
//! refusal says why (keyword errors carry no location, as HAProxy's).
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::tls::{crtlist, pem};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        let _ = pem::cert_names(data);
        return;
    }
    let text = String::from_utf8_lossy(data);
    if let Err(e) = crtlist::parse("fuzz.crtlist", &text) {
        assert!(!e.is_empty(), "refused without a reason");
    }
});
