//! The HAProxy runtime API (admin socket) as a pure library: command grammar and every reply
//! format, byte-compatible with HAProxy 2.6. No I/O lives here; the proxy's `admin` module owns the
//! socket. Filled in by the health-check/admin-socket issue; for now it holds the CLI framing rule
//! that every later command shares.

/// HAProxy ends every non-interactive command's output with one empty line.
pub fn frame_reply(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2);
    out.push_str(body);
    if !body.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_adds_the_empty_line() {
        assert_eq!(frame_reply(""), "\n");
        assert_eq!(frame_reply("No such server."), "No such server.\n\n");
        assert_eq!(frame_reply("a\n"), "a\n\n");
    }
}
