//! Error pages: `errorfile`, `errorloc`/`errorloc302`/`errorloc303`, `errorfiles` and the
//! `http-errors` sections, checked as HAProxy 2.6 checks them when it loads them
//! (`http_str_to_htx`). The bytes kept are the file's; the HTTP layer sends them the way
//! HAProxy's H1 mux re-encodes them.

use super::kw_proxy::{BE, DEF, FE, P, ProxyKw};
use super::model::ErrorfilesRef;
use super::parser::Ctx;
use super::values::atol;

pub(crate) static PAGE_KWS: &[ProxyKw] = &[
    ProxyKw {
        kw: "errorfile",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_errorfile,
    },
    ProxyKw {
        kw: "errorfiles",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_errorfiles,
    },
    ProxyKw {
        kw: "errorloc",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_errorloc,
    },
    ProxyKw {
        kw: "errorloc302",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_errorloc,
    },
    ProxyKw {
        kw: "errorloc303",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_errorloc,
    },
];

/// The statuses HAProxy can answer with a page of its own (`http_err_codes`).
pub(crate) const ERR_CODES: [u16; 18] = [
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 421, 425, 429, 500, 501, 502, 503, 504,
];

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `errorfile <code> <file>`; in an `http-errors` section too.
pub(crate) fn load_errorfile(c: &mut Ctx, args: &[String]) -> Option<(u16, Vec<u8>)> {
    let kw = arg(args, 0);
    if arg(args, 1).is_empty() || arg(args, 2).is_empty() {
        c.alert(format!(
            "{kw} : expects <status_code> and <file> as arguments.\n"
        ));
        return None;
    }
    let Some(status) = known_status(atol(arg(args, 1))) else {
        c.alert(format!(
            "{kw} : status code '{}' not handled.",
            atol(arg(args, 1))
        ));
        return None;
    };
    let file = arg(args, 2);
    let raw = match (c.sys.read)(file) {
        Ok(b) => b,
        Err(_) => {
            c.alert(format!("{kw} : error opening file '{file}'."));
            return None;
        }
    };
    if let Err(e) = check_message(&raw) {
        c.alert(format!("{kw} : '{file}': {e}"));
        return None;
    }
    Some((status, raw))
}

fn known_status(n: i64) -> Option<u16> {
    u16::try_from(n).ok().filter(|s| ERR_CODES.contains(s))
}

fn kw_errorfile(p: &mut P, args: &[String]) {
    if let Some(page) = load_errorfile(p.c, args) {
        p.px.extra.error_pages.push(page);
    }
}

fn kw_errorloc(p: &mut P, args: &[String]) {
    let kw = arg(args, 0);
    if arg(args, 1).is_empty() || arg(args, 2).is_empty() {
        p.alert(format!(
            "{kw} : expects <status_code> and <url> as arguments.\n"
        ));
        return;
    }
    let Some(status) = known_status(atol(arg(args, 1))) else {
        p.alert(format!(
            "{kw} : status code '{}' not handled.",
            atol(arg(args, 1))
        ));
        return;
    };
    let head = if kw == "errorloc303" {
        "HTTP/1.1 303 See Other\r\n"
    } else {
        "HTTP/1.1 302 Found\r\n"
    };
    let raw = format!(
        "{head}Cache-Control: no-cache\r\nContent-length: 0\r\nLocation: {}\r\n\r\n",
        arg(args, 2)
    );
    p.px.extra.error_pages.push((status, raw.into_bytes()));
}

fn kw_errorfiles(p: &mut P, args: &[String]) {
    let kw = arg(args, 0);
    if arg(args, 1).is_empty() {
        p.alert(format!("{kw} : expects <name> as argument."));
        return;
    }
    let mut statuses = Vec::new();
    for w in args.iter().skip(2).take_while(|w| !w.is_empty()) {
        match known_status(atol(w)) {
            Some(s) => statuses.push(s),
            None => {
                p.alert(format!("{kw} : status code '{}' not handled.", atol(w)));
                return;
            }
        }
    }
    let loc = p.c.loc.clone();
    p.px.extra.errorfiles_refs.push(ErrorfilesRef {
        section: arg(args, 1).to_string(),
        statuses,
        loc,
    });
}

/// What HAProxy's `http_str_to_htx` refuses in an error message: a bad head, a bad version or
/// status, a chunked body, or a body that does not match its length.
pub(crate) fn check_message(raw: &[u8]) -> Result<(), String> {
    if raw.is_empty() {
        return Ok(());
    }
    let bad_head = |at: usize| format!("unable to parse headers (error offset: {at})");
    let Some((head_len, body_at)) = head_end(raw) else {
        return Err(bad_head(raw.len()));
    };
    let head = String::from_utf8_lossy(&raw[..head_len]);
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let code = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/") || code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad_head(0));
    }
    if version.len() != 8 {
        return Err(format!("invalid http version ({version})"));
    }
    let status: u16 = code.parse().unwrap_or(0);
    if status < 200 && (status == 100 || status >= 102) {
        return Err(format!(
            "invalid http status code for an error message ({status})"
        ));
    }
    let mut clen: Option<usize> = None;
    let mut chunked = false;
    let mut off = status_line.len() + 1;
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            if l.is_empty() {
                continue;
            }
            return Err(bad_head(off));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            clen = Some(value.parse().map_err(|_| bad_head(off))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked |= value.to_ascii_lowercase().contains("chunked");
        }
        off += l.len() + 1;
    }
    let body = raw.len() - body_at;
    if status == 204 || status == 304 {
        return if body > 0 {
            Err("message payload not expected".to_string())
        } else {
            Ok(())
        };
    }
    if chunked {
        return Err("chunk-encoded payload not supported".to_string());
    }
    match clen {
        Some(0) if body > 0 => Err("message payload not expected".to_string()),
        Some(n) if n != body => Err(format!(
            "payload size does not match the announced content-length ({body} != {n})"
        )),
        _ => Ok(()),
    }
}

/// The end of the head (before its blank line) and where the body starts, for CRLF or LF ends.
pub(crate) fn head_end(raw: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\n' {
            if raw.get(i + 1) == Some(&b'\n') {
                return Some((i, i + 2));
            }
            if raw.get(i + 1) == Some(&b'\r') && raw.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_haproxy_refuses() {
        let ok = b"HTTP/1.0 503 Service Unavailable\r\nCache-Control: no-cache\r\nConnection: close\r\nContent-Type: text/html\r\n\r\n<html></html>\n";
        assert_eq!(check_message(ok), Ok(()));
        assert_eq!(check_message(b""), Ok(()));
        assert_eq!(
            check_message(b"HTTP/1.0 503 Oops\r\nContent-Length: 3\r\n\r\nabcd"),
            Err("payload size does not match the announced content-length (4 != 3)".into())
        );
        assert_eq!(
            check_message(b"HTTP/1.0 503 Oops\r\nContent-Length: 3\r\n\r\nabc"),
            Ok(())
        );
        assert_eq!(
            check_message(b"garbage\r\n\r\n"),
            Err("unable to parse headers (error offset: 0)".into())
        );
        assert_eq!(
            check_message(b"HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            Err("chunk-encoded payload not supported".into())
        );
        assert_eq!(
            check_message(b"HTTP/1.1 102 x\r\n\r\n"),
            Err("invalid http status code for an error message (102)".into())
        );
        assert_eq!(check_message(b"HTTP/1.0 200 OK\n\nbody"), Ok(()));
    }
}
