//! Configuration lexer + parser + rule compilation over whole files: never a panic, and every
//! diagnostic that names the file names a line of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::config::{self, Sys};

/// A `server-template` asking for more servers than this is skipped: the parser makes them one
/// by one, as HAProxy 2.6 does (finding 4 in docs/fuzzing.md), which only measures the machine.
const MAX_TEMPLATE: u64 = 10_000;

fn huge_template(text: &str) -> bool {
    text.lines().any(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some("server-template")
            && w.nth(1).is_some_and(|n| {
                n.split('-')
                    .any(|v| v.parse::<u64>().map_or(v.len() > 9, |v| v > MAX_TEMPLATE))
            })
    })
}

fuzz_target!(|data: &[u8]| {
    // Each input is a process of its own: the pattern references of the earlier ones go.
    portcullis::map::registry().forget_configurations();
    let text = String::from_utf8_lossy(data);
    if huge_template(&text) {
        return;
    }
    let lines = text.lines().count() as u32 + 1;
    // No I/O: the outside world answers "absent" to everything.
    let sys = Sys {
        env: &|k| (k == "FUZZ").then(|| "1".to_string()),
        stat: &|_| Err("No such file or directory".into()),
        resolve: &|_| None,
        ids: &|_, _| None,
        read: &|_| Err("No such file or directory".into()),
        localpeer: "fuzz",
        localpeer_cmdline: false,
    };
    let srcs = [("fuzz.cfg".to_string(), text.into_owned())];
    let diags = match config::parse_sources(&srcs, &sys) {
        Ok(l) => {
            let mut d = l.warnings;
            if let Err(e) = portcullis::http::rules::compile(&l.config) {
                d.extend(e);
            }
            d
        }
        Err(d) => {
            assert!(!d.is_empty(), "refused without a diagnostic");
            d
        }
    };
    for d in &diags {
        if !d.file.is_empty() {
            assert_eq!(d.file, "fuzz.cfg", "{d:?}");
            assert!(
                d.line >= 1 && d.line <= lines,
                "line out of the file: {d:?}"
            );
        }
        let _ = d.render(1);
    }
});
