//! The live streams (`show sess`, `shutdown session`): each accepted connection the stream layer
//! serves is registered at its start and removed at its end ([`register`]); the backend and server
//! are noted when a server slot is taken ([`note_server`]). `shutdown session <id>` marks the
//! stream killed and wakes its task; the stream's own worker then shuts the client socket down
//! (both ways) before it polls the stream again — on the thread that owns the descriptor, while
//! the stream still holds it open, so the number can never name another socket and no
//! descriptor is duplicated per connection. The stream then ends as it would on a client abort,
//! and [`killed_term`] makes its log line read `K` as HAProxy's does. An HTTP
//! transaction waiting for its server's response notices only when the server answers (HAProxy
//! ends it at once with a 502, `KH`): the transaction would have to watch the kill itself.
//!
//! `show sess` prints HAProxy 2.6's one-line layout with the fields portcullis has (id, proto,
//! source, frontend, backend, server, age, the client descriptor); HAProxy's internal flags,
//! timers and buffer states read as zero or empty. `show sess <id>` is a reduced form: the first
//! line and the frontend, backend and server lines of HAProxy's dump (no flags, task,
//! connection or buffer lines).
//!
//! Between two requests HAProxy has no stream for an HTTP connection: `show sess` does not list
//! it, and its next request is a new stream. A parked HTTP/1 connection (`stream::http::park`)
//! likewise leaves the registry and registers again, with a new identifier, when it resumes;
//! one that waits in its task (the epoll engine, TLS, or fewer than 512 connections) stays
//! listed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use atomic_waker::AtomicWaker;

use portcullis_runtime_api::reply::Reply;

/// One live stream. Every connection holds one for its whole life, idle keep-alive ones too:
/// what `show sess` prints is read from the frontend, backend and server when it prints, not
/// copied per stream (the identifier and mode follow from `uniq` and the frontend).
pub struct Live {
    /// HAProxy's `uniq_id`: the stream counter of the process.
    pub uniq: u64,
    pub fe: std::sync::Arc<crate::model::Proxy>,
    pub bind: u32,
    /// The client socket's descriptor: shut down only by the stream's own [`Tracked`] future.
    raw_fd: RawFd,
    pub src: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    start: Instant,
    /// The backend (its index among the model's proxies) and server once a slot was taken.
    server: Mutex<Option<(usize, Arc<crate::model::Server>)>>,
    killed: AtomicBool,
    /// The stream's task, woken by `shutdown session`.
    waker: AtomicWaker,
}

impl Live {
    /// `show sess`'s identifier (HAProxy prints the stream's address).
    pub fn id(&self) -> u64 {
        ID_BASE + self.uniq * 0x10
    }

    pub fn mode(&self) -> &'static str {
        match self.fe.cfg.mode {
            crate::config::model::Mode::Tcp => "tcp",
            crate::config::model::Mode::Http => "http",
        }
    }
}

#[derive(Default)]
pub struct Sessions {
    uniq: AtomicU64,
    live: Mutex<BTreeMap<u64, Arc<Live>>>,
}

static SESSIONS: OnceLock<Sessions> = OnceLock::new();

/// The process' live streams.
pub fn sessions() -> &'static Sessions {
    SESSIONS.get_or_init(Sessions::default)
}

tokio::task_local! {
    /// The stream the running task serves.
    static CURRENT: Arc<Live>;
}

/// Identifiers look like HAProxy's (heap addresses, 16-byte aligned, 12 hex digits).
const ID_BASE: u64 = 0x5651_0000_0010;

/// Registers the stream of connection `fd` (from `src` to `local`, accepted by the frontend's
/// `bind` line of that index) as live; [`Entry::track`] then runs it (the stream keeps `fd` open
/// until it completes).
pub fn register(
    fe: &Arc<crate::model::Proxy>,
    (src, local): (Option<SocketAddr>, Option<SocketAddr>),
    bind: usize,
    fd: RawFd,
) -> Entry {
    let reg = sessions();
    let uniq = reg.uniq.fetch_add(1, Ordering::Relaxed);
    let live = Arc::new(Live {
        uniq,
        fe: Arc::clone(fe),
        bind: u32::try_from(bind).unwrap_or(u32::MAX),
        raw_fd: fd,
        src,
        local,
        start: Instant::now(),
        server: Mutex::new(None),
        killed: AtomicBool::new(false),
        waker: AtomicWaker::new(),
    });
    reg.lock().insert(live.id(), Arc::clone(&live));
    Entry(live)
}

/// A live stream's registration: removed from the registry when the stream's future goes
/// (ended or dropped), or when an HTTP/1 connection parks between requests (HAProxy has no
/// stream for an idle connection either: `show sess` does not list it).
pub struct Entry(Arc<Live>);

impl Entry {
    /// `fut`, the registered stream, run with [`CURRENT`] set; the registration goes with it.
    pub fn track<F: Future>(self, fut: F) -> Tracked<F> {
        Tracked {
            fut: CURRENT.scope(Arc::clone(&self.0), fut),
            hold: Hold::Entry(self),
            shut: false,
        }
    }

    /// What runs a future that does not hold the registration as [`Entry::track`] does (the
    /// stream's state holds it, and may outlive the task: a parked HTTP/1 connection).
    pub fn watcher(&self) -> Watcher {
        Watcher(Arc::clone(&self.0))
    }

    /// Whether `shutdown session` killed the stream.
    pub fn killed(&self) -> bool {
        self.0.killed.load(Ordering::Acquire)
    }
}

/// See [`Entry::watcher`].
pub struct Watcher(Arc<Live>);

impl Watcher {
    /// `fut`, run with [`CURRENT`] set and `shutdown session` watched.
    pub fn track<F: Future>(self, fut: F) -> Tracked<F> {
        Tracked {
            fut: CURRENT.scope(Arc::clone(&self.0), fut),
            hold: Hold::Watch(self.0),
            shut: false,
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        sessions().lock().remove(&self.0.id());
    }
}

pin_project_lite::pin_project! {
    /// A registered stream's future ([`Entry::track`]): polls the stream with [`CURRENT`] set, after
    /// shutting its client socket down once `shutdown session` killed it.
    pub struct Tracked<F: Future> {
        #[pin]
        fut: tokio::task::futures::TaskLocalFuture<Arc<Live>, F>,
        hold: Hold,
        shut: bool,
    }
}

/// What a [`Tracked`] holds of its stream: the registration itself, or (a parked HTTP/1
/// connection's task, whose state holds it) the live stream only.
enum Hold {
    Entry(Entry),
    Watch(Arc<Live>),
}

impl Hold {
    fn live(&self) -> &Live {
        match self {
            Hold::Entry(e) => &e.0,
            Hold::Watch(l) => l,
        }
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _clock = crate::clock::PollScope::enter();
        let this = self.project();
        let live = this.hold.live();
        // Registered before the flag is read: a kill after the read wakes this task again.
        live.waker.register(cx.waker());
        if !*this.shut && live.killed.load(Ordering::Acquire) {
            *this.shut = true;
            // SAFETY: the stream (polled below, not yet complete) still owns this descriptor,
            // and this runs on its thread: the number names the stream's own socket.
            unsafe {
                libc::shutdown(live.raw_fd, libc::SHUT_RDWR);
            }
        }
        this.fut.poll(cx)
    }
}

/// The running stream took a slot on `srv` of `be`.
pub fn note_server(be: &crate::model::Proxy, srv: &Arc<crate::model::Server>) {
    let _ = CURRENT.try_with(|l| {
        let mut cur = l.server.lock().unwrap_or_else(|p| p.into_inner());
        // A keep-alive stream mostly takes the same server again.
        if let Some((b, s)) = &*cur
            && *b == be.index
            && Arc::ptr_eq(s, srv)
        {
            return;
        }
        *cur = Some((be.index, Arc::clone(srv)));
    });
}

/// The termination state of the running stream's log line: `K` first when `shutdown session`
/// killed it (for `mode tcp` HAProxy leaves the second character unset: `K-`).
pub fn killed_term(term: [u8; 2]) -> [u8; 2] {
    CURRENT
        .try_with(|l| {
            if !l.killed.load(Ordering::Acquire) {
                return term;
            }
            let second = if l.mode() == "tcp" { b'-' } else { term[1] };
            [b'K', second]
        })
        .unwrap_or(term)
}

/// HAProxy's `human_time`: `1d2h3m4s` without the zero leading parts.
fn human_time(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if d > 0 {
        let _ = write!(out, "{d}d");
    }
    if d > 0 || h > 0 {
        let _ = write!(out, "{h}h");
    }
    if d > 0 || h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{s}s");
    out
}

fn proto(a: Option<SocketAddr>) -> &'static str {
    match a {
        Some(SocketAddr::V6(_)) => "tcpv6",
        _ => "tcpv4",
    }
}

fn addr(a: Option<SocketAddr>) -> String {
    a.map_or_else(|| "?".to_string(), |a| a.to_string())
}

/// `strtoul(s, NULL, 0)`: `0x` hex, `0` octal, else decimal; garbage reads as 0.
fn strtoul(s: &str) -> u64 {
    let s = s.trim_start();
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None if s.starts_with('0') && s.len() > 1 => (&s[1..], 8),
        None => (s, 10),
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    u64::from_str_radix(&digits[..end], radix).unwrap_or(0)
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Live>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// `show sess [<id>|all]` and `shutdown session <id>` (level checked by the caller);
    /// `proxies`: the model's, where the streams' backends are found.
    pub fn command(
        &self,
        verb: &str,
        args: &[String],
        proxies: &[Arc<crate::model::Proxy>],
        out: &mut Reply,
    ) {
        let arg = args.first().map(String::as_str).filter(|a| !a.is_empty());
        if verb == "shutdown" {
            let Some(a) = arg else {
                out.err("Session pointer expected (use 'show sess').\n");
                return;
            };
            let Some(l) = self.lock().get(&strtoul(a)).cloned() else {
                out.err("No such session (use 'show sess').\n");
                return;
            };
            l.killed.store(true, Ordering::Release);
            l.waker.wake();
            return;
        }
        let all: Vec<Arc<Live>> = self.lock().values().cloned().collect();
        match arg {
            None => {
                for l in &all {
                    list_line(l, proxies, out);
                }
            }
            Some("all") => {
                for l in &all {
                    detail(l, proxies, out);
                }
            }
            Some(a) => {
                let id = strtoul(a);
                match all.iter().find(|l| l.id() == id) {
                    Some(l) => detail(l, proxies, out),
                    None => out.push_str("Session not found.\n"),
                }
            }
        }
    }
}

/// `(backend, backend id, server, server id)` of the stream's server, if it took one.
fn server_of<'p>(
    l: &Live,
    proxies: &'p [Arc<crate::model::Proxy>],
) -> Option<(&'p str, i64, String, i64)> {
    let cur = l.server.lock().unwrap_or_else(|p| p.into_inner());
    let (b, s) = cur.as_ref()?;
    let be = proxies.get(*b)?;
    Some((
        be.name.as_str(),
        i64::from(be.cfg.id),
        s.name.clone(),
        i64::from(s.cfg.id),
    ))
}

fn list_line(l: &Live, proxies: &[Arc<crate::model::Proxy>], out: &mut Reply) {
    let (be, srv) = match server_of(l, proxies) {
        Some((b, _, s, _)) => (b, s),
        None => ("<NONE>", "<none>".to_string()),
    };
    let _ = writeln!(
        out,
        "{:#x}: proto={} src={} fe={} be={be} srv={srv} ts=00 epoch=0 age={} calls=0 rate=0 cpu=0 lat=0 rq[f=0h,i=0,an=00h,rx=,wx=,ax=] rp[f=0h,i=0,an=00h,rx=,wx=,ax=] scf=[8,0h,fd={}] scb=[8,0h,fd=-1] exp= rc=0 c_exp=",
        l.id(),
        proto(l.src),
        addr(l.src),
        l.fe.name,
        human_time(l.start.elapsed().as_secs()),
        l.raw_fd,
    );
}

fn detail(l: &Live, proxies: &[Arc<crate::model::Proxy>], out: &mut Reply) {
    // When it was accepted, from its age: no wall-clock read per accepted connection.
    let accepted = SystemTime::now() - l.start.elapsed();
    let us = accepted
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
    let mut when = String::new();
    crate::log::format::date_log(
        &mut when,
        us,
        crate::log::sink::local_utc_offset(us / 1_000_000),
    );
    let _ = writeln!(
        out,
        "{:#x}: [{when}] id={} proto={} source={}",
        l.id(),
        l.uniq,
        proto(l.src),
        addr(l.src)
    );
    let _ = writeln!(
        out,
        "  frontend={} (id={} mode={}), listener=? (id={}) addr={}",
        l.fe.name,
        i64::from(l.fe.cfg.id),
        l.mode(),
        u64::from(l.bind) + 1,
        addr(l.local)
    );
    match server_of(l, proxies) {
        Some((b, bid, s, sid)) => {
            let _ = writeln!(out, "  backend={b} (id={bid} mode={})", l.mode());
            let _ = writeln!(out, "  server={s} (id={sid})");
        }
        None => {
            out.push_str("  backend=<NONE> (id=-1 mode=-)\n");
            out.push_str("  server=<NONE> (id=-1)\n");
        }
    }
    let _ = writeln!(
        out,
        "  task=? (age={})",
        human_time(l.start.elapsed().as_secs())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_number_and_time_forms() {
        assert_eq!(strtoul("0x5651000000a0"), 0x5651_0000_00a0);
        assert_eq!(strtoul("12"), 12);
        assert_eq!(strtoul("010"), 8);
        assert_eq!(strtoul("zz"), 0);
        assert_eq!(human_time(0), "0s");
        assert_eq!(human_time(65), "1m5s");
        assert_eq!(human_time(3600 * 25 + 1), "1d1h0m1s");
    }

    #[test]
    fn errors_in_haproxy_words() {
        let s = Sessions::default();
        let run = |verb: &str, args: &[&str]| {
            let mut r = Reply::default();
            let a: Vec<String> = args.iter().map(|x| x.to_string()).collect();
            s.command(verb, &a, &[], &mut r);
            r.text
        };
        assert_eq!(
            run("shutdown", &[]),
            "Session pointer expected (use 'show sess').\n"
        );
        assert_eq!(
            run("shutdown", &["0x1234"]),
            "No such session (use 'show sess').\n"
        );
        assert_eq!(run("show", &["0x1234"]), "Session not found.\n");
        assert_eq!(run("show", &[]), "");
    }
}
