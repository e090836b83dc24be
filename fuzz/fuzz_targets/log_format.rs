//! The log-format compiler (`log-format`, rule arguments), in HTTP and TCP mode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::log::format::LogFormat;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = LogFormat::parse(s, true);
    let _ = LogFormat::parse(s, false);
    let _ = LogFormat::parse_rule(s);
});
