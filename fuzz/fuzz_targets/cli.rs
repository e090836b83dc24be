//! The CLI command parser and dispatcher on a model runtime: each input line runs at a level
//! and prompt mode picked by the first byte; a payload follows a `<<` line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_fuzz::cli_model::Model;
use portcullis_runtime_api::cli::{self, CliSession, Level};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let level = match mode % 3 {
        0 => Level::User,
        1 => Level::Operator,
        _ => Level::Admin,
    };
    let mut session = CliSession::new(level);
    session.prompt = mode & 4 != 0;
    let mut rt = Model::default();
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let out = match line.trim_end_matches(['\r', '\n']).strip_suffix("<<") {
            Some(cmd) => {
                let mut payload = String::new();
                for l in lines.by_ref() {
                    if l.trim_end_matches(['\r', '\n']).is_empty() {
                        break;
                    }
                    payload.push_str(l);
                }
                cli::execute_with_payload(cmd, Some(&payload), &mut session, &mut rt)
            }
            None => cli::execute(line, &mut session, &mut rt),
        };
        if out.conn == cli::Conn::Close {
            break;
        }
    }
});
