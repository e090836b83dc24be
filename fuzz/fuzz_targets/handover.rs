//! The `_getsocks` data decoder (sockets handed over by the old process, HAProxy's records plus
//! portcullis' trailer) and the reload state decoder: never a panic; a decoded state encodes
//! back to bytes that decode to the same state.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::engine::{handover, state};

fuzz_target!(|data: &[u8]| {
    let Some((&n, data)) = data.split_first() else {
        return;
    };
    if let Ok((recs, _)) = handover::decode(data, usize::from(n)) {
        assert!(recs.len() <= usize::from(n).max(recs.len()));
    }
    if let Ok(s) = state::decode(data) {
        let again = state::decode(&state::encode(&s)).expect("re-encoded state decodes");
        assert_eq!(again, s);
    }
});
