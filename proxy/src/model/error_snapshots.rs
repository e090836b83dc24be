//! `show errors`: the last request each frontend refused and the last response each backend
//! refused as malformed, captured where the HTTP/1 parser rejects them (HAProxy's
//! `error_snapshot`), and dumped in HAProxy 2.6's layout (`src/proxy.c`, `dump_text_line` of
//! `src/tools.c`). The `H1 …` lines carry HAProxy's mux internals: portcullis prints the values
//! HAProxy shows for a refused request header (`MSG_HDR_NAME`) or response header, whatever the
//! parser's state was. Pure but for the clock read at capture.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use portcullis_runtime_api::reply::Reply;

/// HAProxy's default `tune.bufsize`: the free space and the dump's limit are computed from it.
const BUFSIZE: usize = 16384;

/// One refused message.
#[derive(Clone, Debug)]
pub struct Snapshot {
    when: SystemTime,
    ev_id: u32,
    src: Option<SocketAddr>,
    /// The other side: the backend of a request (none before routing), the frontend of a
    /// response, with its id.
    other: Option<(String, u32)>,
    srv: Option<(String, u32)>,
    buf: Vec<u8>,
    err_pos: usize,
}

/// A proxy's last refused request (a frontend's) and response (a backend's).
type Last = (Option<Snapshot>, Option<Snapshot>);

#[derive(Default)]
pub struct Store {
    events: AtomicU32,
    /// By proxy index: the last refused request (a frontend's) and response (a backend's).
    last: Mutex<HashMap<usize, Last>>,
}

static STORE: OnceLock<Store> = OnceLock::new();

pub fn store() -> &'static Store {
    STORE.get_or_init(Store::default)
}

impl Store {
    fn put(&self, proxy: usize, response: bool, mut s: Snapshot) {
        s.ev_id = self.events.fetch_add(1, Ordering::Relaxed);
        s.buf.truncate(BUFSIZE);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let e = last.entry(proxy).or_default();
        if response {
            e.1 = Some(s);
        } else {
            e.0 = Some(s);
        }
    }

    /// A request frontend `fe` refused; `buf` is what the client sent so far.
    pub fn request(
        &self,
        fe: &crate::model::Proxy,
        src: Option<SocketAddr>,
        buf: &[u8],
        err_pos: usize,
    ) {
        self.put(
            fe.index,
            false,
            Snapshot {
                when: SystemTime::now(),
                ev_id: 0,
                src,
                other: None,
                srv: None,
                buf: buf.to_vec(),
                err_pos,
            },
        );
    }

    /// A response server `srv` of backend `be` sent, refused, for a client of frontend `fe`.
    #[allow(clippy::too_many_arguments)]
    pub fn response(
        &self,
        be: &crate::model::Proxy,
        fe: &crate::model::Proxy,
        srv: &crate::model::Server,
        src: Option<SocketAddr>,
        buf: &[u8],
        err_pos: usize,
    ) {
        self.put(
            be.index,
            true,
            Snapshot {
                when: SystemTime::now(),
                ev_id: 0,
                src,
                other: Some((fe.name.clone(), fe.cfg.id)),
                srv: Some((srv.name.clone(), srv.cfg.id)),
                buf: buf.to_vec(),
                err_pos,
            },
        );
    }

    /// `show errors [<iid>|<proxy>] [request|response]` over `proxies` (name, id, index), in
    /// the configuration's order (HAProxy's list order), request before response.
    pub fn show(&self, proxies: &[(String, u32, usize)], args: &[String], out: &mut Reply) {
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
        let iid: i64 = if arg(0).is_empty() {
            -1
        } else {
            match proxies.iter().find(|p| p.0 == arg(0)) {
                Some(p) => i64::from(p.1),
                None => i64::from(crate::config::values::atol(arg(0)) as i32),
            }
        };
        if iid == 0 {
            out.err("No such proxy.\n");
            return;
        }
        let (skip_req, skip_resp) = match arg(1) {
            "request" => (false, true),
            "response" => (true, false),
            _ => (false, false),
        };
        let now = SystemTime::now();
        let _ = writeln!(
            out,
            "Total events captured on [{}] : {}",
            date(now),
            self.events.load(Ordering::Relaxed)
        );
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        for (name, id, index) in proxies {
            let Some((req, resp)) = last.get(index) else {
                continue;
            };
            for (response, es) in [(false, req), (true, resp)] {
                let Some(es) = es else { continue };
                if (response && skip_resp) || (!response && skip_req) {
                    continue;
                }
                if iid >= 0
                    && i64::from(*id) != iid
                    && es.other.as_ref().is_none_or(|o| i64::from(o.1) != iid)
                {
                    continue;
                }
                dump(out, name, *id, response, es);
            }
        }
    }
}

fn date(t: SystemTime) -> String {
    let us = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
    let mut s = String::new();
    crate::log::format::date_log(
        &mut s,
        us,
        crate::log::sink::local_utc_offset(us / 1_000_000),
    );
    s
}

fn dump(out: &mut Reply, name: &str, id: u32, response: bool, es: &Snapshot) {
    let _ = write!(out, " \n[{}]", date(es.when));
    let (oname, oid) = es
        .other
        .as_ref()
        .map_or(("<NONE>".to_string(), -1i64), |o| {
            (o.0.clone(), i64::from(o.1))
        });
    if response {
        let _ = write!(
            out,
            " backend {name} (#{id}): invalid response\n  frontend {oname} (#{oid})"
        );
    } else {
        let _ = write!(
            out,
            " frontend {name} (#{id}): invalid request\n  backend {oname} (#{oid})"
        );
    }
    let (sname, sid) = es.srv.as_ref().map_or(("<NONE>".to_string(), -1i64), |s| {
        (s.0.clone(), i64::from(s.1))
    });
    let (ip, port) = es
        .src
        .map_or(("".to_string(), 0), |a| (a.ip().to_string(), a.port()));
    let len = es.buf.len();
    let _ = write!(
        out,
        ", server {sname} (#{sid}), event #{}, src {ip}:{port}\n  buffer starts at 0 (including 0 out), {} free,\n  len {len}, wraps at {}, error at position {}\n",
        es.ev_id,
        BUFSIZE - len,
        BUFSIZE - 48,
        es.err_pos
    );
    let (c, s, state, m) = if response {
        (
            0x8000_2200u32,
            0x0000_4818u32,
            "MSG_HDR_NAME",
            0x0000_1415u32,
        )
    } else {
        (0x0000_0100, 0x0000_0810, "MSG_HDR_NAME", 0x0000_1410)
    };
    let _ = write!(
        out,
        "  H1 connection flags 0x{c:08x}, H1 stream flags 0x{s:08x}\n  H1 msg state {state}(17), H1 msg flags 0x{m:08x}\n  H1 chunk len 0 bytes, H1 body len 0 bytes :\n  \n"
    );
    let mut ptr = 0;
    let mut line = 0;
    while ptr < len {
        let next = dump_text_line(out, &es.buf, &mut line, ptr);
        if next == ptr {
            break;
        }
        ptr = next;
    }
}

/// HAProxy's `dump_text_line`: from `ptr`, at most 80 columns (offset, `+` on a continued
/// line), `\r \n \t \e \\` escaped, other non-printables as `\xHH`, up to and including a LF.
fn dump_text_line(out: &mut Reply, buf: &[u8], line: &mut usize, mut ptr: usize) -> usize {
    let mut s = format!("  {ptr:05}{} ", if ptr == *line { ' ' } else { '+' });
    let end = 80;
    while let Some(&c) = buf.get(ptr) {
        if c.is_ascii_graphic() || c == b' ' {
            if c != b'\\' {
                if s.len() > end - 2 {
                    break;
                }
                s.push(char::from(c));
            } else {
                if s.len() > end - 3 {
                    break;
                }
                s.push_str("\\\\");
            }
        } else if matches!(c, b'\t' | b'\n' | b'\r' | 0x1b) {
            if s.len() > end - 3 {
                break;
            }
            s.push_str(match c {
                b'\t' => "\\t",
                b'\n' => "\\n",
                b'\r' => "\\r",
                _ => "\\e",
            });
        } else {
            if s.len() > end - 5 {
                break;
            }
            let _ = write!(s, "\\x{c:02x}");
        }
        ptr += 1;
        if c == b'\n' {
            *line = ptr;
            break;
        }
    }
    s.push('\n');
    out.push_str(&s);
    ptr
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions HAProxy 2.6 reports for the same bytes.
    #[test]
    fn error_positions_like_haproxy() {
        use crate::http::h1::error_offset;
        assert_eq!(
            error_offset(b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n", false),
            18
        );
        assert_eq!(
            error_offset(b"GET / HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n", false),
            28
        );
        assert_eq!(
            error_offset(
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nBroken header\r\n\r\n",
                true
            ),
            42
        );
    }

    #[test]
    fn dump_lines_like_haproxy() {
        let mut r = Reply::default();
        let buf = b"GET / HTTP/1.1\r\nHo st: x\r\nX: \x01y\\\r\n\r\n";
        let mut line = 0;
        let mut ptr = 0;
        while ptr < buf.len() {
            ptr = dump_text_line(&mut r, buf, &mut line, ptr);
        }
        assert_eq!(
            r.text,
            "  00000  GET / HTTP/1.1\\r\\n\n  00016  Ho st: x\\r\\n\n  00026  X: \\x01y\\\\\\r\\n\n  00034  \\r\\n\n"
        );
        // Long lines wrap at 80 columns, continued with `+`.
        let long = vec![b'a'; 100];
        let mut r = Reply::default();
        let (mut line, mut ptr) = (0, 0);
        while ptr < long.len() {
            ptr = dump_text_line(&mut r, &long, &mut line, ptr);
        }
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), 79);
        assert!(lines[1].starts_with("  00070+ "), "{}", lines[1]);
    }
}
