//! Logs: HAProxy log-format expressions, httplog/tcplog, termination codes (pure, `format`),
//! and the sinks (stdout, syslog over UDP or a unix socket) fed without blocking a worker.

pub mod format;
pub mod htx;
pub mod session;
pub mod sink;

pub use session::SessionLog;

use std::fmt::Write as _;
use std::time::UNIX_EPOCH;

use crate::config::model::{Config, Level, Mode};
use crate::http::sample::SampleCtx;
use crate::model::Proxy;
use format::{LogFormat, LogRecord, TermCause, TermState, Termination, Timers};

/// HAProxy logs traffic at `info`.
const INFO: Level = Level(6);

/// How a proxy's sessions are logged.
enum Style {
    /// `option httplog`, `option tcplog` or `log-format`: one line when the session ends.
    Format(LogFormat),
    /// No format: HAProxy's "Connect from" line when a connection is accepted.
    Connect,
}

/// The process's access logger, shared by all workers.
pub struct Logger {
    sink: Option<sink::LogSink>,
    styles: Vec<Style>,
    /// Each proxy's `unique-id-format`, compiled.
    uids: Vec<Option<LogFormat>>,
    utc_offset: i32,
    pid: u32,
}

impl Logger {
    /// Checks every `log-format` without starting anything (for `-c`).
    pub fn formats_ok(cfg: &Config) -> Result<(), String> {
        Self::styles(cfg)?;
        Self::uids(cfg).map(|_| ())
    }

    fn uids(cfg: &Config) -> Result<Vec<Option<LogFormat>>, String> {
        cfg.proxies
            .iter()
            .map(|p| {
                p.unique_id_format
                    .as_ref()
                    .map(|(fmt, loc)| {
                        LogFormat::parse(fmt, p.mode == Mode::Http).map_err(|e| {
                            format!("Parsing [{loc}]: failed to parse unique-id : {e}.")
                        })
                    })
                    .transpose()
            })
            .collect()
    }

    fn styles(cfg: &Config) -> Result<Vec<Style>, String> {
        let mut styles = Vec::with_capacity(cfg.proxies.len());
        for p in &cfg.proxies {
            let http = p.mode == Mode::Http;
            let style =
                if let Some((fmt, loc)) = &p.log_format {
                    Style::Format(LogFormat::parse(fmt, http).map_err(|e| {
                        format!("parsing [{loc}] : failed to parse log-format : {e}.")
                    })?)
                } else if p.options.httplog && http {
                    Style::Format(if p.options.httplog_clf {
                        LogFormat::httplog_clf()
                    } else {
                        LogFormat::httplog()
                    })
                } else if p.options.tcplog || p.options.httplog {
                    Style::Format(LogFormat::tcplog())
                } else {
                    Style::Connect
                };
            styles.push(style);
        }
        Ok(styles)
    }

    /// Compiles each proxy's log format; errors name the proxy and the format's location.
    pub fn new(cfg: &Config) -> Result<Logger, String> {
        let styles = Self::styles(cfg)?;
        let uids = Self::uids(cfg)?;
        let any_target = cfg.proxies.iter().any(|p| !p.logs.is_empty());
        let sink = if any_target {
            let mut opts = sink::SinkOptions {
                hostname: cfg.global.log_send_hostname.clone(),
                ..Default::default()
            };
            // `log-tag` (global): the syslog tag in every line's header.
            if let Some(t) = &cfg.global.process.log_tag {
                opts.tag = t.clone();
            }
            Some(
                sink::LogSink::new(opts)
                    .map_err(|e| format!("cannot start the log writer: {e}"))?,
            )
        } else {
            None
        };
        let now = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Ok(Logger {
            sink,
            styles,
            uids,
            utc_offset: sink::local_utc_offset(now),
            pid: std::process::id(),
        })
    }

    fn emit(&self, fe: &Proxy, line: &str) {
        let Some(sink) = &self.sink else { return };
        for t in &fe.cfg.logs {
            sink.log(t, None, INFO, line);
        }
    }

    /// A server or backend state change (check results, admin socket): to the proxy's log
    /// targets at `level`, and to stderr as HAProxy prints it in the foreground.
    pub fn event(&self, px: &Proxy, level: u8, line: &str, stderr_line: &str) {
        if let Some(sink) = &self.sink {
            for t in &px.cfg.logs {
                sink.log(t, None, Level(level), line);
            }
        }
        let tag = if level <= 1 { "[ALERT]" } else { "[WARNING]" };
        eprintln!("{tag:<10} ({}) : {stderr_line}", self.pid);
    }

    /// A line a Lua script logs (`txn:log`, `core.log`): to the proxy's targets, or to the
    /// `global` ones without a proxy (stderr is the script layer's business).
    pub fn script(
        &self,
        px: Option<&Proxy>,
        global: &[crate::config::model::LogTarget],
        level: u8,
        line: &str,
    ) {
        let Some(sink) = &self.sink else { return };
        let targets = px.map_or(global, |p| &p.cfg.logs[..]);
        for t in targets {
            sink.log(t, None, Level(level), line);
        }
    }

    /// At accept: the "Connect from" line of proxies that have no log format.
    pub fn connect(&self, fe: &Proxy, rec: &SessionLog) {
        if fe.cfg.logs.is_empty() || !matches!(self.styles.get(fe.index), Some(Style::Connect)) {
            return;
        }
        let (Some(c), Some(f)) = (rec.client, rec.frontend_addr) else {
            return;
        };
        let mode = if fe.cfg.mode == Mode::Http {
            "HTTP"
        } else {
            "TCP"
        };
        let line = format!(
            "Connect from {}:{} to {}:{} ({}/{})",
            c.ip(),
            c.port(),
            f.ip(),
            f.port(),
            fe.name,
            mode
        );
        self.emit(fe, &line);
    }

    /// A connection that ended before it became a session (failed TLS handshake), as HAProxy
    /// logs it: `ip:port [date] frontend/listener: message`. With `option dontlognull`, a
    /// connection that sent nothing is not logged.
    pub fn embryonic(
        &self,
        fe: &Proxy,
        client: Option<std::net::SocketAddr>,
        accept_date: std::time::SystemTime,
        listener: &str,
        msg: &str,
        null: bool,
    ) {
        if fe.cfg.logs.is_empty() || (null && fe.cfg.options.dontlognull) {
            return;
        }
        let mut line = String::with_capacity(128);
        match client {
            Some(c) => {
                let _ = write!(line, "{}:{}", c.ip(), c.port());
            }
            None => line.push_str("unix:1"),
        }
        line.push_str(" [");
        let us = accept_date
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        format::date_log(&mut line, us, self.utc_offset);
        let _ = write!(line, "] {}/{}: {}", fe.name, listener, msg);
        self.emit(fe, &line);
    }

    /// When a session (TCP) or a transaction (HTTP) ends: its line per the frontend's format.
    pub fn session(&self, fe: &Proxy, rec: &SessionLog) {
        if fe.cfg.logs.is_empty() || rec.logged {
            return;
        }
        let Some(Style::Format(fmt)) = self.styles.get(fe.index) else {
            return;
        };
        if fe.cfg.options.dontlognull && rec.null {
            return;
        }
        let err = is_error(fe, rec);
        if fe.cfg.options.dontlog_normal && !err {
            return;
        }
        let level = match rec.last_rule.level() {
            Some(crate::ana::last_rule::LogLevel::Silent) => return,
            Some(crate::ana::last_rule::LogLevel::Severity(l)) => Level(l),
            None if err && fe.cfg.options.log_separate_errors => Level(3),
            None => INFO,
        };
        let line = Self::render(self, fmt, fe, rec);
        if let Some(sink) = &self.sink
            && let Some((last, others)) = fe.cfg.logs.split_last()
        {
            for t in others {
                sink.log(t, None, level, &line);
            }
            sink.log_owned(last, None, level, line);
        }
    }

    /// `option logasap`: the line written now, from what `rec` holds so far (its `total` ends
    /// now), and none at the end. Nothing without the option. An HTTP line shows `%U` 0: HAProxy
    /// 2.6 has not counted the request's bytes in the stream's log yet at that point.
    pub fn asap(&self, fe: &Proxy, rec: &mut SessionLog) {
        if !fe.cfg.options.logasap || rec.logged {
            return;
        }
        rec.asap = true;
        let bytes_in = rec.bytes_in;
        if fe.cfg.mode == Mode::Http {
            rec.bytes_in = 0;
        }
        self.session(fe, rec);
        rec.bytes_in = bytes_in;
        rec.logged = true;
    }

    /// The line [`Logger::session`] writes for `rec`, whatever the filters (None: the frontend
    /// has no log format). The stream layer's unit tests read it.
    pub fn session_line(&self, fe: &Proxy, rec: &SessionLog) -> Option<String> {
        match self.styles.get(fe.index) {
            Some(Style::Format(fmt)) => Some(self.render(fmt, fe, rec)),
            _ => None,
        }
    }

    fn render(&self, fmt: &LogFormat, fe: &Proxy, rec: &SessionLog) -> String {
        let mut line = String::with_capacity(256);
        self.with_record(fe, rec, |record, ctx| fmt.render(record, ctx, &mut line));
        line
    }

    /// The stream's unique id per the frontend's `unique-id-format` (`None` without one),
    /// from what the stream knows so far.
    pub fn unique_id(&self, fe: &Proxy, rec: &SessionLog) -> Option<String> {
        let fmt = self.uids.get(fe.index)?.as_ref()?;
        let mut id = String::with_capacity(64);
        self.with_record(fe, rec, |record, ctx| fmt.render(record, ctx, &mut id));
        Some(id)
    }

    /// Calls `f` with the log record and sample context of `rec`.
    fn with_record(
        &self,
        fe: &Proxy,
        rec: &SessionLog,
        f: impl FnOnce(&LogRecord<'_>, &SampleCtx<'_>),
    ) {
        let ms = |d: Option<std::time::Duration>| d.map_or(-1, |d| d.as_millis() as i64);
        let tr = ms(rec.request).max(if fe.cfg.mode == Mode::Tcp { 0 } else { -1 });
        let tc = ms(rec.connect);
        let tw = if tc >= 0 || rec.server.is_some() {
            ms(rec.queue).max(0)
        } else {
            -1
        };
        let mut timers = Timers::from_phases(
            0,
            0,
            tr,
            tw,
            tc,
            ms(rec.response),
            rec.total.as_millis() as i64,
        );
        // A tarpitted request has no request time but the time it was held as its `t_queue`
        // (so `Tw` shows one more millisecond, as HAProxy's arithmetic does).
        if rec.term == *b"PT" {
            timers.t_queue = ms(rec.queue);
        }
        let accept_us = rec
            .accept_date
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let client = rec.client.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let local = rec
            .frontend_addr
            .unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let req_caps = rec.captures.as_ref().map(|c| c.req.borrow());
        let res_caps = rec.captures.as_ref().map(|c| c.res.borrow());
        let record = LogRecord {
            client: rec.client,
            unix_listener: rec.unix_listener,
            frontend_addr: rec.frontend_addr,
            frontend: &rec.frontend,
            frontend_ssl: rec.ssl,
            backend: rec.backend.as_deref().unwrap_or(&rec.frontend),
            server: rec.server.as_deref(),
            http: fe.cfg.mode == Mode::Http,
            accept_date_us: accept_us,
            utc_offset_secs: self.utc_offset,
            timers,
            status: rec.status.map_or(-1, i32::from),
            bytes_out: rec.bytes_out,
            bytes_in: rec.bytes_in,
            term: termination(rec.term),
            cookie: rec.cookie.map(|c| crate::log::format::CookieState {
                client: char::from(c.client),
                server: char::from(c.server),
            }),
            cli_cookie: rec.cli_cookie.as_deref(),
            srv_cookie: rec.srv_cookie.as_deref(),
            actconn: rec.actconn,
            feconn: rec.feconn,
            beconn: rec.beconn,
            srv_conn: rec.srvconn,
            retries: rec.retries,
            redispatched: rec.redispatched,
            request_line: rec.request_line.as_deref(),
            req_captures: req_caps.as_deref().map(Vec::as_slice),
            res_captures: res_caps.as_deref().map(Vec::as_slice),
            pid: self.pid,
            unique_id: rec.unique_id.as_deref(),
            req_counter: rec.req_counter,
            logasap: rec.asap,
            ..Default::default()
        };
        let mut ctx = SampleCtx::new(client, local, &rec.frontend)
            .with_tls(rec.tls.as_deref())
            .with_proxied(rec.proxied.as_deref());
        ctx.captures = rec.captures.as_deref();
        ctx.vars = rec.vars.as_deref();
        ctx.unique_id = rec.unique_id.as_deref();
        ctx.last_rule = Some(&rec.last_rule);
        ctx.res_comp = rec.comp;
        f(&record, &ctx);
    }
}

/// What an `option logasap` line shows of a stream still running: its time so far and the
/// connections of its backend and server, itself included.
pub fn asap_counts(
    rec: &mut SessionLog,
    start: tokio::time::Instant,
    be: &Proxy,
    srv: &crate::model::Server,
) {
    use std::sync::atomic::Ordering::Relaxed;
    rec.total = start.elapsed();
    rec.beconn = be.beconn.load(Relaxed);
    rec.srvconn = srv.cur_conns.load(Relaxed);
}

fn termination(t: [u8; 2]) -> Termination {
    let cause = match t[0] {
        b'L' => TermCause::Local,
        b'c' => TermCause::ClientTimeout,
        b'C' => TermCause::ClientAbort,
        b's' => TermCause::ServerTimeout,
        b'S' => TermCause::ServerAbort,
        b'P' => TermCause::Proxy,
        b'R' => TermCause::Resource,
        b'I' => TermCause::Internal,
        b'D' => TermCause::Down,
        b'K' => TermCause::Killed,
        b'U' => TermCause::Up,
        _ => TermCause::None,
    };
    let state = match t[1] {
        b'R' => TermState::Request,
        b'Q' => TermState::Queue,
        b'C' => TermState::Connect,
        b'H' => TermState::Headers,
        b'D' => TermState::Data,
        b'L' => TermState::Last,
        b'T' => TermState::Tarpit,
        _ => TermState::None,
    };
    Termination { cause, state }
}

/// HAProxy's `strm_log` notion of an error session (what `dontlog-normal` keeps and
/// `log-separate-errors` raises to `err`): redispatched, ended by an error worse than a local
/// one (termination cause `c C s S P R I D K U`), retried without error, or a 5xx in HTTP.
fn is_error(fe: &Proxy, rec: &SessionLog) -> bool {
    rec.redispatched
        || matches!(
            rec.term[0],
            b'c' | b'C' | b's' | b'S' | b'P' | b'R' | b'I' | b'D' | b'K' | b'U'
        )
        || (rec.term[0] == b'-' && rec.retries > 0)
        || (fe.cfg.mode == Mode::Http && rec.status.is_some_and(|s| s >= 500))
}
