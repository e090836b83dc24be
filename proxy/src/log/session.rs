//! What a session records for its log line, filled by the TCP and HTTP sessions and rendered by
//! `log::format` with the frontend's format (tcplog, httplog, log-format, or HAProxy's default
//! "Connect from" line).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use crate::model::Proxy;

#[derive(Clone, Debug)]
pub struct SessionLog {
    pub client: Option<SocketAddr>,
    pub frontend_addr: Option<SocketAddr>,
    /// The client came over a unix socket: the listener's id, which HAProxy logs as the port
    /// (`%cp`, `%fp`), the addresses reading `unix`.
    pub unix_listener: Option<u32>,
    pub frontend: String,
    pub ssl: bool,
    /// The frontend TLS connection's facts (`%[ssl_fc_*]` in log formats).
    pub tls: Option<std::sync::Arc<crate::tls::stream::TlsInfo>>,
    /// The PROXY protocol header the connection arrived with (`%[fc_pp_*]` in log formats).
    pub proxied: Option<std::sync::Arc<crate::proxy_proto::Header>>,
    pub accept_date: SystemTime,
    pub backend: Option<String>,
    pub server: Option<String>,
    /// `TR`: time to receive the full request head (HTTP).
    pub request: Option<Duration>,
    /// `Tw`: time in queues.
    pub queue: Option<Duration>,
    /// `Tc`: time to establish the server connection (with retries).
    pub connect: Option<Duration>,
    /// `Tr`: server response time (HTTP).
    pub response: Option<Duration>,
    /// `Ta` (HTTP) / `Tt` (TCP): total active time.
    pub total: Duration,
    pub status: Option<u16>,
    /// Bytes from the client.
    pub bytes_in: u64,
    /// Bytes to the client (`%B`).
    pub bytes_out: u64,
    /// Termination cause and state (`%ts`); httplog adds the two cookie characters `--`.
    pub term: [u8; 2],
    /// The persistence cookie's flags (`%tsc` characters 3 and 4), when the backend has one.
    pub cookie: Option<crate::http::cookie::Flags>,
    /// `capture cookie`: the client's (`%CC`) and the server's (`%CS`) cookie.
    pub cli_cookie: Option<String>,
    pub srv_cookie: Option<String>,
    pub actconn: u32,
    pub feconn: u32,
    pub beconn: u32,
    pub srvconn: u32,
    pub retries: u32,
    pub redispatched: bool,
    /// `%r`: the request line as received, e.g. `GET /x HTTP/1.1`.
    pub request_line: Option<String>,
    /// The client sent no byte (for `option dontlognull`).
    pub null: bool,
    /// The transaction's capture slots (`%hr`, `%hs`, `capture.req.hdr`), when the frontend
    /// has any.
    pub captures: Option<std::rc::Rc<crate::ana::capture::Captured>>,
    /// The transaction's variables (`var()` in a log-format).
    pub vars: Option<std::rc::Rc<crate::ana::vars::Vars>>,
    /// The stream's `unique-id-format` value (`%ID`, `unique-id`).
    pub unique_id: Option<String>,
    /// The stream's number in the process (`%rt`).
    pub req_counter: u64,
    /// `option logasap`: this line is written before the end (`+` before `%Tt %Ta %B`).
    pub asap: bool,
    /// The line was written already (`option logasap`): the end writes none.
    pub logged: bool,
    /// The stream's last final rule (`last_rule_file`, `last_rule_line`).
    pub last_rule: crate::ana::last_rule::LastRule,
    /// The response is compressed with this algorithm (`res.comp`, `res.comp_algo`).
    pub comp: Option<&'static str>,
}

impl SessionLog {
    pub fn new(
        fe: &Proxy,
        client: Option<SocketAddr>,
        frontend_addr: Option<SocketAddr>,
        accept_date: SystemTime,
    ) -> SessionLog {
        SessionLog {
            client,
            frontend_addr,
            unix_listener: None,
            frontend: fe.name.clone(),
            ssl: false,
            tls: None,
            proxied: None,
            accept_date,
            backend: None,
            server: None,
            request: None,
            queue: None,
            connect: None,
            response: None,
            total: Duration::ZERO,
            status: None,
            bytes_in: 0,
            bytes_out: 0,
            term: *b"--",
            cookie: None,
            cli_cookie: None,
            srv_cookie: None,
            actconn: 0,
            feconn: 0,
            beconn: 0,
            srvconn: 0,
            retries: 0,
            redispatched: false,
            request_line: None,
            null: false,
            captures: None,
            vars: None,
            unique_id: None,
            req_counter: 0,
            asap: false,
            logged: false,
            comp: None,
            last_rule: Default::default(),
        }
    }
}
