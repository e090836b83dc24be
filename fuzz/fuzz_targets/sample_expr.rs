//! Sample expressions (`%[...]`, `req.hdr(host),lower`) and ACL expressions (`path_beg -i /a`),
//! then a compiled ACL condition over the same words.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::ana::{acl, sample};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = sample::parse_sample(s);
    if let Ok((_, n)) = sample::parse_sample_prefix(s) {
        assert!(
            n <= s.len() && s.is_char_boundary(n),
            "prefix end {n} in {s:?}"
        );
    }
    let words: Vec<String> = s.split_ascii_whitespace().map(str::to_string).collect();
    let _ = acl::parse_acl_expr(&words);
    let _ = acl::compile_cond_tokens(false, &words, &acl::AclSet::default());
});
