//! Sample fetches (`req.hdr(host)`, `src`, `path`, `ssl_fc_sni`, …) and a few converters
//! (`,lower`, `,upper`, `,length`), compiled once from text and evaluated against a
//! [`SampleCtx`] the proxy fills per transaction. Pure: no I/O, no clock.
//!
//! Names, argument rules and error messages follow HAProxy 2.6 (`haproxy -dKsmp` lists its
//! fetches; ours is the subset in [`FETCHES`]).

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use crate::http::head::{Headers, RequestHead, ResponseHead, Version};
use crate::tcp::hello;

/// What `tcp-request content` inspection learnt from a TLS ClientHello still in the buffer
/// (`req.ssl_*` fetches); `None` in [`SampleCtx::ssl_hello`] means "not TLS / not parsed yet".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SslHello<'a> {
    /// TLS handshake message type of the first record: 1 = ClientHello, 2 = ServerHello.
    pub hello_type: i64,
    pub sni: Option<&'a str>,
    /// First ALPN protocol offered.
    pub alpn: Option<&'a str>,
}

/// Everything a fetch may read for one transaction (or one connection in TCP mode).
#[derive(Clone, Copy, Debug)]
pub struct SampleCtx<'a> {
    /// Client address (`src`, `src_port`).
    pub src: SocketAddr,
    /// Address the client connected to (`dst`, `dst_port`).
    pub dst: SocketAddr,
    pub frontend: &'a str,
    pub backend: Option<&'a str>,
    pub server: Option<&'a str>,
    /// The frontend connection is TLS (`ssl_fc`).
    pub ssl: bool,
    /// SNI received on the frontend TLS handshake (`ssl_fc_sni`).
    pub ssl_sni: Option<&'a str>,
    /// ALPN negotiated on the frontend (`ssl_fc_alpn`).
    pub alpn: Option<&'a str>,
    /// Protocol version of the frontend TLS connection (`ssl_fc_protocol`: `TLSv1.3`).
    pub ssl_protocol: Option<&'a str>,
    /// OpenSSL's name of the frontend cipher (`ssl_fc_cipher`).
    pub ssl_cipher: Option<&'a str>,
    /// The request head, once parsed (HTTP mode).
    pub req: Option<&'a RequestHead>,
    /// The server's response head (`http-response` rules).
    pub res: Option<&'a ResponseHead>,
    /// The transaction's capture slots (`capture` actions, `capture.req.hdr`).
    pub captures: Option<&'a crate::ana::capture::Captured>,
    /// The transaction's variables (`set-var`, `var()`).
    pub vars: Option<&'a super::vars::Vars>,
    /// The configuration's `userlist` sections (`http_auth*()`).
    pub userlists: Option<&'a super::auth::Userlists>,
    /// Raw ClientHello facts for TCP-mode content inspection (`req.ssl_sni`, …).
    pub ssl_hello: Option<SslHello<'a>>,
    /// Bytes waiting in the request buffer (`req.len`).
    pub req_len: usize,
    /// The request buffer under `tcp-request content` inspection: the `req.ssl_*` fetches and
    /// `req.len` read it (unless `ssl_hello` is set).
    pub payload: Option<&'a [u8]>,
    /// More bytes may still arrive (inspection not final): a fetch that needs them makes a
    /// content rule wait instead of failing (HAProxy's `SMP_F_MAY_CHANGE`).
    pub partial: bool,
    /// Stick tables and the tracked counters (`sc_*`, `src_*` fetches, `track-sc`).
    pub stick: Option<crate::stick::StickView<'a>>,
    /// The PROXY protocol header the connection arrived with (`fc_rcvd_proxy`, `fc_pp_*`).
    pub proxied: Option<&'a crate::proxy_proto::Header>,
    /// Live proxy and server counts (`be_conn`, `srv_conn`, `nbsrv`), and the proxy whose
    /// rules run (their default backend).
    pub counts: Option<(&'a dyn Counts, &'a str)>,
    /// The stream's unique id (`unique-id`).
    pub unique_id: Option<&'a str>,
    /// The response buffer under `tcp-response content` inspection (`res.len`, `res.payload`).
    pub res_payload: Option<&'a [u8]>,
    /// `res.len` where there is no payload to read (HTTP mode: the response as HAProxy's HTX
    /// buffer holds it).
    pub res_len: Option<usize>,
    /// The algorithm compressing the response (`res.comp`, `res.comp_algo`), as configured.
    pub res_comp: Option<&'static str>,
    /// The stream's last final rule (`last_rule_file`, `last_rule_line`), which rules record.
    pub last_rule: Option<&'a super::last_rule::LastRule>,
}

/// What `be_conn`, `srv_conn` and `nbsrv` read of the running proxies, by name.
pub trait Counts {
    /// Current sessions on the backend (`beconn`).
    fn be_conn(&self, backend: &str) -> Option<i64>;
    /// Current sessions on the server.
    fn srv_conn(&self, backend: &str, server: &str) -> Option<i64>;
    /// Usable servers as HAProxy's `be_usable_srv`: the active ones, else 1 for the first
    /// backup (all backups with `allbackups`).
    fn nbsrv(&self, backend: &str) -> Option<i64>;
    /// A current connection count or a per-second rate of a proxy (or of one of its servers,
    /// when `server` is not empty).
    fn gauge(&self, g: Gauge, proxy: &str, server: &str) -> Option<i64> {
        let _ = (g, proxy, server);
        None
    }
}

/// The gauges of [`Counts::gauge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gauge {
    /// `fe_conn`: current connections on the frontend.
    FeConn,
    /// `fe_sess_rate`, `fe_req_rate`, `be_sess_rate`, `srv_sess_rate`: events over the last
    /// second.
    FeSessRate,
    FeReqRate,
    BeSessRate,
    SrvSessRate,
}

impl std::fmt::Debug for dyn Counts + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counts")
    }
}

impl<'a> SampleCtx<'a> {
    pub fn new(src: SocketAddr, dst: SocketAddr, frontend: &'a str) -> Self {
        SampleCtx {
            src,
            dst,
            frontend,
            backend: None,
            server: None,
            ssl: false,
            ssl_sni: None,
            alpn: None,
            ssl_protocol: None,
            ssl_cipher: None,
            req: None,
            res: None,
            captures: None,
            vars: None,
            userlists: None,
            ssl_hello: None,
            req_len: 0,
            payload: None,
            partial: false,
            stick: None,
            proxied: None,
            counts: None,
            unique_id: None,
            res_payload: None,
            res_len: None,
            res_comp: None,
            last_rule: None,
        }
    }

    /// Sets the PROXY protocol header received on the connection, if any.
    pub fn with_proxied(mut self, h: Option<&'a crate::proxy_proto::Header>) -> Self {
        self.proxied = h;
        self
    }

    /// Fills the `ssl_fc*` facts from a frontend TLS connection.
    /// The headers a header fetch of direction `dir` reads.
    fn headers(&self, dir: HdrDir) -> Option<&'a Headers> {
        match dir {
            HdrDir::Req => self.req.map(|r| &r.headers),
            HdrDir::Res => self.res.map(|r| &r.headers),
            HdrDir::Any => self
                .res
                .map(|r| &r.headers)
                .or(self.req.map(|r| &r.headers)),
        }
    }

    pub fn with_tls(mut self, tls: Option<&'a crate::tls::info::TlsInfo>) -> Self {
        if let Some(t) = tls {
            self.ssl = true;
            self.ssl_sni = t.sni.as_deref();
            self.alpn = t.alpn.as_deref();
            self.ssl_protocol = Some(t.protocol);
            self.ssl_cipher = Some(t.cipher);
        }
        self
    }
}

/// Bytes received as text (a TLV value): borrowed when UTF-8, as HAProxy's string otherwise.
fn text(b: &[u8]) -> SampleValue<'_> {
    SampleValue::Str(String::from_utf8_lossy(b))
}

/// One fetched value. Strings borrow from the context when they can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SampleValue<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Bool(bool),
    Ip(IpAddr),
    /// Binary (`sha1`, `b64dec`, `bytes`): as a string it is read as UTF-8, lossily.
    Bin(Cow<'a, [u8]>),
}

impl SampleValue<'_> {
    /// The value cast to a string, as HAProxy's `smp -> str` casts do.
    pub fn to_str(&self) -> Cow<'_, str> {
        match self {
            SampleValue::Str(s) => Cow::Borrowed(s.as_ref()),
            SampleValue::Int(i) => Cow::Owned(i.to_string()),
            SampleValue::Bool(b) => Cow::Borrowed(if *b { "1" } else { "0" }),
            SampleValue::Ip(ip) => Cow::Owned(ip.to_string()),
            SampleValue::Bin(b) => String::from_utf8_lossy(b),
        }
    }
    /// The value's bytes, as HAProxy casts to binary (an address is its raw octets).
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            SampleValue::Bin(b) => Cow::Borrowed(b.as_ref()),
            SampleValue::Str(s) => Cow::Borrowed(s.as_bytes()),
            SampleValue::Ip(IpAddr::V4(a)) => Cow::Owned(a.octets().to_vec()),
            SampleValue::Ip(IpAddr::V6(a)) => Cow::Owned(a.octets().to_vec()),
            other => match other.to_str() {
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
                Cow::Borrowed(s) => Cow::Owned(s.as_bytes().to_vec()),
            },
        }
    }
    /// The value cast to an integer (strings must be a whole decimal number).
    pub fn to_int(&self) -> Option<i64> {
        match self {
            SampleValue::Str(s) => s.trim().parse().ok(),
            SampleValue::Int(i) => Some(*i),
            SampleValue::Bool(b) => Some(i64::from(*b)),
            SampleValue::Ip(_) | SampleValue::Bin(_) => None,
        }
    }
    pub fn to_bool(&self) -> bool {
        match self {
            SampleValue::Str(s) => !s.is_empty(),
            SampleValue::Int(i) => *i != 0,
            SampleValue::Bool(b) => *b,
            SampleValue::Ip(_) => true,
            SampleValue::Bin(b) => !b.is_empty(),
        }
    }
    pub fn to_ip(&self) -> Option<IpAddr> {
        match self {
            SampleValue::Ip(ip) => Some(*ip),
            SampleValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn into_owned(self) -> SampleValue<'static> {
        match self {
            SampleValue::Str(s) => SampleValue::Str(Cow::Owned(s.into_owned())),
            SampleValue::Int(i) => SampleValue::Int(i),
            SampleValue::Bool(b) => SampleValue::Bool(b),
            SampleValue::Ip(ip) => SampleValue::Ip(ip),
            SampleValue::Bin(b) => SampleValue::Bin(Cow::Owned(b.into_owned())),
        }
    }
}

impl std::fmt::Display for SampleValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_str())
    }
}

/// Output type of a fetch, which picks the default ACL match method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmpType {
    Str,
    Int,
    Bool,
    Ip,
    /// HTTP method (matched as a string).
    Meth,
    /// Raw bytes (`req.payload`): matched with `-m bin` by default.
    Bin,
}

/// Which fetch a [`SampleExpr`] runs, with its parsed arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// `lua.<name>(args)`: a fetch a Lua script registered (`core.register_fetches`).
    Lua {
        name: String,
        args: Vec<String>,
    },
    AlwaysTrue,
    AlwaysFalse,
    Src,
    Dst,
    SrcPort,
    DstPort,
    SrcIsLocal,
    FeName,
    BeName,
    SrvName,
    SslFc,
    FcRcvdProxy,
    FcPpAuthority,
    FcPpUniqueId,
    SslFcSni,
    SslFcHasSni,
    SslFcAlpn,
    SslFcCipher,
    SslFcProtocol,
    ReqSslSni,
    ReqSslHelloType,
    ReqSslAlpn,
    ReqSslVer,
    ReqLen,
    /// `res.len`: bytes in the response buffer under inspection.
    ResLen,
    /// `req.payload(<offset>,<length>)` / `res.payload(…)`: bytes of the buffer under
    /// inspection (length 0: up to its end).
    Payload {
        res: bool,
        offset: i64,
        len: i64,
    },
    /// `wait_end`: true once inspection is final (the predefined ACL `WAIT_END`).
    WaitEnd,
    /// `last_rule_file`, `last_rule_line`: where the stream's last final rule was written.
    LastRuleFile,
    LastRuleLine,
    Method,
    Path,
    PathQ,
    Url,
    Base,
    Query,
    ReqVer,
    ReqProtoHttp,
    /// `req.hdr` / `hdr` (comma-split values) or `req.fhdr` (`full`): name `None` = all headers;
    /// `occ` `None` = last value for a plain fetch, every value in an ACL.
    Hdr {
        name: Option<String>,
        occ: Option<i64>,
        full: bool,
        dir: HdrDir,
    },
    HdrCnt {
        name: Option<String>,
        full: bool,
        dir: HdrDir,
    },
    HdrVal {
        name: Option<String>,
        occ: Option<i64>,
        dir: HdrDir,
    },
    /// `status`: the response's status code.
    Status,
    /// `var(<scope>.<name>[,<default>])`
    Var {
        name: super::vars::VarName,
        default: Option<String>,
    },
    /// `capture.req.hdr(<n>)` / `capture.res.hdr(<n>)`: a capture slot's value.
    Capture {
        res: bool,
        slot: usize,
    },
    /// `res.ver`: the response's HTTP version.
    ResVer,
    /// `res.comp`: the response is being compressed.
    ResComp,
    /// `res.comp_algo`: the compression algorithm's name, when it is.
    ResCompAlgo,
    /// `rand([<range>])`: a random 32-bit integer, scaled into `[0, range)`.
    Rand(Option<i64>),
    /// `uuid([4])`: a random (version 4) UUID.
    Uuid,
    /// `url_param|urlp([<name>[,<delim>]])`: a query-string parameter's value (the first
    /// parameter's without a name).
    UrlParam {
        name: String,
        delim: u8,
    },
    /// `env(<name>)`: an environment variable of the process.
    Env(String),
    /// `hostname`: the machine's host name.
    Hostname,
    /// `req.cook|cook|res.cook|scook|cookie([<name>])` and their `_cnt`/`_val` forms: cookies of
    /// the `Cookie` (request) or `Set-Cookie` (response) headers.
    Cook {
        name: String,
        dir: HdrDir,
        kind: CookKind,
    },
    /// `be_conn([<backend>])`, `nbsrv([<backend>])`: the backend's current sessions, usable
    /// servers (`None`: the proxy whose rules run).
    BeConn(Option<String>),
    NbSrv(Option<String>),
    /// `srv_conn([<backend>/]<server>)`
    SrvConn(Option<String>, String),
    /// `fe_conn|fe_sess_rate|fe_req_rate|be_sess_rate([<proxy>])`,
    /// `srv_sess_rate([<backend>/]<server>)`.
    Gauge {
        g: Gauge,
        proxy: Option<String>,
        server: String,
    },
    /// `unique-id`: the stream's id per `unique-id-format`.
    UniqueId,
    /// `date([<offset>[,s|ms|us]])`: the current date in that unit, plus the offset.
    Date {
        offset: i64,
        per_sec: i64,
    },
    /// `str(<string>)`: a constant.
    Str(String),
    /// `int(<integer>)`: a constant.
    Int(i64),
    /// `http_auth(<userlist>)` (bool) / `http_auth_group(<userlist>)` (the user; its groups
    /// for an ACL): the request's Basic credentials checked against the list.
    HttpAuth {
        list: Option<String>,
        group: bool,
    },
    /// `http_auth_type`, `http_auth_user`, `http_auth_pass`.
    HttpAuthPart(AuthPart),
    /// `req.rdp_cookie([<name>])` (`cnt`: `req.rdp_cookie_cnt([<name>])`): the RDP cookie of
    /// the request buffer.
    RdpCookie {
        name: Option<String>,
        cnt: bool,
    },
    /// `sc_<data>(<ctr>[,<table>])`, `sc<N>_<data>([<table>])` (`src: false`) and
    /// `src_<data>([<table>])` (`src: true`).
    Stick {
        src: bool,
        sc: u8,
        data: crate::stick::StickData,
        /// The array element (`sc_get_gpc(<idx>,<sc>)`), 0 otherwise.
        idx: u32,
        table: Option<String>,
        op: crate::stick::StickOp,
    },
}

/// Which message a header fetch reads: `req.*`, `res.*`, or `hdr` (the response once there
/// is one, as HAProxy picks the channel the rule runs on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HdrDir {
    Req,
    Res,
    Any,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgSpec {
    None,
    /// `[string[,integer]]`
    HdrOcc,
    /// `[string]`
    HdrName,
    /// `string` (mandatory)
    Str,
    /// `integer[,table]` (the counter number is mandatory)
    ScCtr,
    /// `integer,integer[,table]`: an array element and a counter (both mandatory).
    IdxScCtr,
    /// `integer,table`: an array element and a table (both mandatory, as HAProxy 2.6).
    IdxTable,
    /// `[table]`
    Table,
    /// `integer` (mandatory): a capture slot.
    Slot,
    /// `<variable>[,<default>]`
    Var,
    /// Up to two optional arguments, read per fetch.
    Opt2,
    /// `integer,integer` (both mandatory).
    Int2,
}

/// What a cookie fetch returns: the value (the last occurrence, the first without a name), the
/// number of occurrences, or the value as an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookKind {
    Value,
    Cnt,
    Val,
}

/// What `http_auth_type|user|pass` read from the `Authorization` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthPart {
    Type,
    User,
    Pass,
}

/// One row of the fetch table.
#[derive(Clone, Copy, Debug)]
pub struct FetchDef {
    pub name: &'static str,
    pub out: SmpType,
    /// `None` if usable in log-format; else what it needs, in HAProxy's words.
    pub log_needs: Option<&'static str>,
    args: ArgSpec,
    make: fn() -> Fetch,
}

const HRQ: Option<&str> = Some("HTTP request headers");
const HRS: Option<&str> = Some("HTTP response headers");
const L6: Option<&str> = Some("request buffer");
const L6R: Option<&str> = Some("response buffer");

macro_rules! fdef {
    ($name:expr, $out:ident, $needs:expr, $args:ident, $make:expr) => {
        FetchDef {
            name: $name,
            out: SmpType::$out,
            log_needs: $needs,
            args: ArgSpec::$args,
            make: $make,
        }
    };
}

macro_rules! hdr_ctor {
    ($f:ident, Hdr, $full:expr, $dir:ident) => {
        fn $f() -> Fetch {
            Fetch::Hdr {
                name: None,
                occ: None,
                full: $full,
                dir: HdrDir::$dir,
            }
        }
    };
    ($f:ident, HdrCnt, $full:expr, $dir:ident) => {
        fn $f() -> Fetch {
            Fetch::HdrCnt {
                name: None,
                full: $full,
                dir: HdrDir::$dir,
            }
        }
    };
    ($f:ident, HdrVal, $dir:ident) => {
        fn $f() -> Fetch {
            Fetch::HdrVal {
                name: None,
                occ: None,
                dir: HdrDir::$dir,
            }
        }
    };
}
fn url_param() -> Fetch {
    Fetch::UrlParam {
        name: String::new(),
        delim: b'?',
    }
}

hdr_ctor!(hdr_any, Hdr, false, Any);
hdr_ctor!(req_hdr, Hdr, false, Req);
hdr_ctor!(req_fhdr, Hdr, true, Req);
hdr_ctor!(res_hdr, Hdr, false, Res);
hdr_ctor!(res_fhdr, Hdr, true, Res);
hdr_ctor!(hdr_cnt_any, HdrCnt, false, Any);
hdr_ctor!(req_hdr_cnt, HdrCnt, false, Req);
hdr_ctor!(req_fhdr_cnt, HdrCnt, true, Req);
hdr_ctor!(res_hdr_cnt, HdrCnt, false, Res);
hdr_ctor!(res_fhdr_cnt, HdrCnt, true, Res);
hdr_ctor!(hdr_val_any, HdrVal, Any);
hdr_ctor!(req_hdr_val, HdrVal, Req);
hdr_ctor!(res_hdr_val, HdrVal, Res);

/// A stick-counter fetch row (`sc_conn_rate`, `sc0_conn_rate`, `src_conn_rate`, …).
macro_rules! stick_def {
    ($name:expr, $args:ident, $src:expr, $sc:expr, $data:ident) => {
        FetchDef {
            name: $name,
            out: SmpType::Int,
            log_needs: None,
            args: ArgSpec::$args,
            make: || Fetch::Stick {
                src: $src,
                sc: $sc,
                data: crate::stick::StickData::$data,
                idx: 0,
                table: None,
                op: crate::stick::StickOp::Read,
            },
        }
    };
}

/// The five stick-counter fetches of one data type: `sc_<n>(<ctr>[,<table>])`,
/// `sc0_<n>`..`sc2_<n>([<table>])` and `src_<n>([<table>])`.
macro_rules! stick_rows {
    ($($name:literal => $data:ident $op:ident),* $(,)?) => {
        &[$(
            stick_row!(concat!("sc_", $name), ScCtr, false, 0, $data, $op),
            stick_row!(concat!("sc0_", $name), Table, false, 0, $data, $op),
            stick_row!(concat!("sc1_", $name), Table, false, 1, $data, $op),
            stick_row!(concat!("sc2_", $name), Table, false, 2, $data, $op),
            stick_row!(concat!("src_", $name), Table, true, 0, $data, $op),
        )*]
    };
}
macro_rules! stick_row {
    ($name:expr, $args:ident, $src:expr, $sc:expr, $data:ident, $op:ident) => {
        FetchDef {
            name: $name,
            out: SmpType::Int,
            log_needs: None,
            args: ArgSpec::$args,
            make: || Fetch::Stick {
                src: $src,
                sc: $sc,
                data: crate::stick::StickData::$data,
                idx: 0,
                table: None,
                op: crate::stick::StickOp::$op,
            },
        }
    };
}

/// The stick-counter fetches of the general purpose counters and tags, HTTP errors and
/// failures, and bytes (the `inc`/`clr` ones change the entry they read).
static STICK_FETCHES: &[FetchDef] = stick_rows![
    "get_gpt0" => Gpt0 Read,
    "get_gpc0" => Gpc0 Read,
    "get_gpc1" => Gpc1 Read,
    "gpc0_rate" => Gpc0Rate Read,
    "gpc1_rate" => Gpc1Rate Read,
    "inc_gpc0" => Gpc0 Inc,
    "inc_gpc1" => Gpc1 Inc,
    "clr_gpc0" => Gpc0 Clr,
    "clr_gpc1" => Gpc1 Clr,
    "http_err_cnt" => HttpErrCnt Read,
    "http_err_rate" => HttpErrRate Read,
    "http_fail_cnt" => HttpFailCnt Read,
    "http_fail_rate" => HttpFailRate Read,
    "bytes_in_rate" => BytesInRate Read,
    "bytes_out_rate" => BytesOutRate Read,
    "kbytes_in" => BytesInCnt Kbytes,
    "kbytes_out" => BytesOutCnt Kbytes,
];

/// `sc_<name>(<idx>,<ctr>[,<table>])` and `src_<name>(<idx>,<table>)` on an array element.
macro_rules! stick_array_rows {
    ($($name:literal => $data:ident $op:ident),* $(,)?) => {
        &[$(
            stick_row!(concat!("sc_", $name), IdxScCtr, false, 0, $data, $op),
            stick_row!(concat!("src_", $name), IdxTable, true, 0, $data, $op),
        )*]
    };
}

/// The fetches of the arrays (`gpt(<n>)`, `gpc(<n>)`, `gpc_rate(<n>,<p>)`).
static STICK_ARRAY_FETCHES: &[FetchDef] = stick_array_rows![
    "get_gpt" => Gpt Read,
    "get_gpc" => Gpc Read,
    "gpc_rate" => GpcRate Read,
    "inc_gpc" => Gpc Inc,
    "clr_gpc" => Gpc Clr,
];

/// The supported sample fetches (a subset of HAProxy 2.6's).
pub static FETCHES: &[FetchDef] = &[
    fdef!("always_false", Bool, None, None, || Fetch::AlwaysFalse),
    fdef!("always_true", Bool, None, None, || Fetch::AlwaysTrue),
    fdef!("base", Str, HRQ, None, || Fetch::Base),
    fdef!("be_name", Str, None, None, || Fetch::BeName),
    fdef!("capture.req.hdr", Str, None, Slot, || Fetch::Capture {
        res: false,
        slot: 0
    }),
    fdef!("capture.res.hdr", Str, None, Slot, || Fetch::Capture {
        res: true,
        slot: 0
    }),
    fdef!("dst", Ip, None, None, || Fetch::Dst),
    fdef!("dst_port", Int, None, None, || Fetch::DstPort),
    fdef!("fc_pp_authority", Str, None, None, || Fetch::FcPpAuthority),
    fdef!("fc_pp_unique_id", Str, None, None, || Fetch::FcPpUniqueId),
    fdef!("fc_rcvd_proxy", Bool, None, None, || Fetch::FcRcvdProxy),
    fdef!("fe_name", Str, None, None, || Fetch::FeName),
    fdef!(
        "hdr",
        Str,
        Some("HTTP request headers,HTTP response headers"),
        HdrOcc,
        hdr_any
    ),
    fdef!("hdr_cnt", Int, HRQ, HdrName, hdr_cnt_any),
    fdef!("hdr_val", Int, HRQ, HdrOcc, hdr_val_any),
    fdef!("method", Meth, None, None, || Fetch::Method),
    fdef!("path", Str, HRQ, None, || Fetch::Path),
    fdef!("pathq", Str, HRQ, None, || Fetch::PathQ),
    fdef!("query", Str, HRQ, None, || Fetch::Query),
    fdef!("rand", Int, None, Opt2, || Fetch::Rand(None)),
    fdef!("uuid", Str, None, Opt2, || Fetch::Uuid),
    fdef!("url_param", Str, HRQ, Opt2, url_param),
    fdef!("urlp", Str, HRQ, Opt2, url_param),
    fdef!("env", Str, None, Str, || Fetch::Env(String::new())),
    fdef!("hostname", Str, None, None, || Fetch::Hostname),
    fdef!("unique-id", Str, None, None, || Fetch::UniqueId),
    fdef!("req.cook", Str, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Value
    }),
    fdef!("req.cook_cnt", Int, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Cnt
    }),
    fdef!("req.cook_val", Int, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Val
    }),
    fdef!("cook", Str, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Value
    }),
    fdef!("cook_cnt", Int, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Cnt
    }),
    fdef!("cook_val", Int, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Req,
        kind: CookKind::Val
    }),
    fdef!("res.cook", Str, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Value
    }),
    fdef!("res.cook_cnt", Int, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Cnt
    }),
    fdef!("res.cook_val", Int, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Val
    }),
    fdef!("scook", Str, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Value
    }),
    fdef!("scook_cnt", Int, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Cnt
    }),
    fdef!("scook_val", Int, HRS, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Res,
        kind: CookKind::Val
    }),
    fdef!("cookie", Str, HRQ, HdrName, || Fetch::Cook {
        name: String::new(),
        dir: HdrDir::Any,
        kind: CookKind::Value
    }),
    fdef!("be_conn", Int, None, Opt2, || Fetch::BeConn(None)),
    fdef!("nbsrv", Int, None, Opt2, || Fetch::NbSrv(None)),
    fdef!("fe_conn", Int, None, Opt2, || Fetch::Gauge {
        g: Gauge::FeConn,
        proxy: None,
        server: String::new()
    }),
    fdef!("fe_sess_rate", Int, None, Opt2, || Fetch::Gauge {
        g: Gauge::FeSessRate,
        proxy: None,
        server: String::new()
    }),
    fdef!("fe_req_rate", Int, None, Opt2, || Fetch::Gauge {
        g: Gauge::FeReqRate,
        proxy: None,
        server: String::new()
    }),
    fdef!("be_sess_rate", Int, None, Opt2, || Fetch::Gauge {
        g: Gauge::BeSessRate,
        proxy: None,
        server: String::new()
    }),
    fdef!("srv_sess_rate", Int, None, Str, || Fetch::Gauge {
        g: Gauge::SrvSessRate,
        proxy: None,
        server: String::new()
    }),
    fdef!("srv_conn", Int, None, Str, || Fetch::SrvConn(
        None,
        String::new()
    )),
    fdef!("date", Int, None, Opt2, || Fetch::Date {
        offset: 0,
        per_sec: 1
    }),
    fdef!("req.fhdr", Str, HRQ, HdrOcc, req_fhdr),
    fdef!("req.fhdr_cnt", Int, HRQ, HdrName, req_fhdr_cnt),
    fdef!("req.hdr", Str, HRQ, HdrOcc, req_hdr),
    fdef!("req.hdr_cnt", Int, HRQ, HdrName, req_hdr_cnt),
    fdef!("req.hdr_val", Int, HRQ, HdrOcc, req_hdr_val),
    fdef!("req.len", Int, L6, None, || Fetch::ReqLen),
    fdef!("req.rdp_cookie", Str, L6, HdrName, || Fetch::RdpCookie {
        name: None,
        cnt: false
    }),
    fdef!("req.rdp_cookie_cnt", Int, L6, HdrName, || {
        Fetch::RdpCookie {
            name: None,
            cnt: true,
        }
    }),
    fdef!("rdp_cookie", Str, L6, HdrName, || Fetch::RdpCookie {
        name: None,
        cnt: false
    }),
    fdef!("rdp_cookie_cnt", Int, L6, HdrName, || Fetch::RdpCookie {
        name: None,
        cnt: true
    }),
    fdef!("req.payload", Bin, L6, Int2, || Fetch::Payload {
        res: false,
        offset: 0,
        len: 0
    }),
    fdef!("res.len", Int, L6R, None, || Fetch::ResLen),
    fdef!("res.payload", Bin, L6R, Int2, || Fetch::Payload {
        res: true,
        offset: 0,
        len: 0
    }),
    fdef!("wait_end", Bool, Some("internal"), None, || Fetch::WaitEnd),
    fdef!("last_rule_file", Str, None, None, || Fetch::LastRuleFile),
    fdef!("last_rule_line", Int, None, None, || Fetch::LastRuleLine),
    fdef!("req.proto_http", Bool, HRQ, None, || Fetch::ReqProtoHttp),
    fdef!("req.ssl_alpn", Str, L6, None, || Fetch::ReqSslAlpn),
    fdef!("req.ssl_hello_type", Int, L6, None, || {
        Fetch::ReqSslHelloType
    }),
    fdef!("req.ssl_sni", Str, L6, None, || Fetch::ReqSslSni),
    fdef!("req.ssl_ver", Int, L6, None, || Fetch::ReqSslVer),
    fdef!("req.ver", Str, HRQ, None, || Fetch::ReqVer),
    fdef!("req_len", Int, L6, None, || Fetch::ReqLen),
    fdef!("req_proto_http", Bool, HRQ, None, || Fetch::ReqProtoHttp),
    fdef!("req_ssl_hello_type", Int, L6, None, || {
        Fetch::ReqSslHelloType
    }),
    fdef!("req_ssl_sni", Str, L6, None, || Fetch::ReqSslSni),
    fdef!("req_ssl_ver", Int, L6, None, || Fetch::ReqSslVer),
    fdef!("req_ver", Str, HRQ, None, || Fetch::ReqVer),
    fdef!("res.fhdr", Str, HRS, HdrOcc, res_fhdr),
    fdef!("res.fhdr_cnt", Int, HRS, HdrName, res_fhdr_cnt),
    fdef!("res.hdr", Str, HRS, HdrOcc, res_hdr),
    fdef!("res.hdr_cnt", Int, HRS, HdrName, res_hdr_cnt),
    fdef!("res.hdr_val", Int, HRS, HdrOcc, res_hdr_val),
    fdef!("res.ver", Str, HRS, None, || Fetch::ResVer),
    fdef!("res.comp", Bool, HRS, None, || Fetch::ResComp),
    fdef!("res.comp_algo", Str, HRS, None, || Fetch::ResCompAlgo),
    fdef!("src", Ip, None, None, || Fetch::Src),
    fdef!("str", Str, None, Str, || Fetch::Str(String::new())),
    fdef!("int", Int, None, Slot, || Fetch::Int(0)),
    fdef!("http_auth", Bool, HRQ, Table, || Fetch::HttpAuth {
        list: None,
        group: false
    }),
    fdef!("http_auth_group", Str, HRQ, Table, || Fetch::HttpAuth {
        list: None,
        group: true
    }),
    fdef!("http_auth_pass", Str, HRQ, None, || Fetch::HttpAuthPart(
        AuthPart::Pass
    )),
    fdef!("http_auth_type", Str, HRQ, None, || Fetch::HttpAuthPart(
        AuthPart::Type
    )),
    fdef!("http_auth_user", Str, HRQ, None, || Fetch::HttpAuthPart(
        AuthPart::User
    )),
    fdef!("src_is_local", Bool, None, None, || Fetch::SrcIsLocal),
    fdef!("src_port", Int, None, None, || Fetch::SrcPort),
    fdef!("srv_name", Str, None, None, || Fetch::SrvName),
    fdef!("status", Int, HRS, None, || Fetch::Status),
    fdef!("ssl_fc", Bool, None, None, || Fetch::SslFc),
    fdef!("ssl_fc_alpn", Str, None, None, || Fetch::SslFcAlpn),
    fdef!("ssl_fc_cipher", Str, None, None, || Fetch::SslFcCipher),
    fdef!("ssl_fc_has_sni", Bool, None, None, || Fetch::SslFcHasSni),
    fdef!("ssl_fc_protocol", Str, None, None, || Fetch::SslFcProtocol),
    fdef!("ssl_fc_sni", Str, None, None, || Fetch::SslFcSni),
    fdef!("url", Str, HRQ, None, || Fetch::Url),
    fdef!("var", Str, None, Var, || Fetch::Var {
        name: super::vars::VarName {
            scope: super::vars::Scope::Txn,
            name: String::new(),
        },
        default: None
    }),
    stick_def!("sc_conn_cnt", ScCtr, false, 0, ConnCnt),
    stick_def!("sc0_conn_cnt", Table, false, 0, ConnCnt),
    stick_def!("sc1_conn_cnt", Table, false, 1, ConnCnt),
    stick_def!("sc2_conn_cnt", Table, false, 2, ConnCnt),
    stick_def!("src_conn_cnt", Table, true, 0, ConnCnt),
    stick_def!("sc_conn_cur", ScCtr, false, 0, ConnCur),
    stick_def!("sc0_conn_cur", Table, false, 0, ConnCur),
    stick_def!("sc1_conn_cur", Table, false, 1, ConnCur),
    stick_def!("sc2_conn_cur", Table, false, 2, ConnCur),
    stick_def!("src_conn_cur", Table, true, 0, ConnCur),
    stick_def!("sc_conn_rate", ScCtr, false, 0, ConnRate),
    stick_def!("sc0_conn_rate", Table, false, 0, ConnRate),
    stick_def!("sc1_conn_rate", Table, false, 1, ConnRate),
    stick_def!("sc2_conn_rate", Table, false, 2, ConnRate),
    stick_def!("src_conn_rate", Table, true, 0, ConnRate),
    stick_def!("sc_http_req_cnt", ScCtr, false, 0, HttpReqCnt),
    stick_def!("sc0_http_req_cnt", Table, false, 0, HttpReqCnt),
    stick_def!("sc1_http_req_cnt", Table, false, 1, HttpReqCnt),
    stick_def!("sc2_http_req_cnt", Table, false, 2, HttpReqCnt),
    stick_def!("src_http_req_cnt", Table, true, 0, HttpReqCnt),
    stick_def!("sc_http_req_rate", ScCtr, false, 0, HttpReqRate),
    stick_def!("sc0_http_req_rate", Table, false, 0, HttpReqRate),
    stick_def!("sc1_http_req_rate", Table, false, 1, HttpReqRate),
    stick_def!("sc2_http_req_rate", Table, false, 2, HttpReqRate),
    stick_def!("src_http_req_rate", Table, true, 0, HttpReqRate),
    stick_def!("sc_sess_cnt", ScCtr, false, 0, SessCnt),
    stick_def!("sc0_sess_cnt", Table, false, 0, SessCnt),
    stick_def!("sc1_sess_cnt", Table, false, 1, SessCnt),
    stick_def!("sc2_sess_cnt", Table, false, 2, SessCnt),
    stick_def!("src_sess_cnt", Table, true, 0, SessCnt),
    stick_def!("sc_sess_rate", ScCtr, false, 0, SessRate),
    stick_def!("sc0_sess_rate", Table, false, 0, SessRate),
    stick_def!("sc1_sess_rate", Table, false, 1, SessRate),
    stick_def!("sc2_sess_rate", Table, false, 2, SessRate),
    stick_def!("src_sess_rate", Table, true, 0, SessRate),
];

/// What `lua.<name>` fetches are, for the messages and the log-format checks.
static LUA_FETCH: FetchDef = fdef!("lua", Str, None, None, || Fetch::AlwaysFalse);

pub fn find_fetch(name: &str) -> Option<&'static FetchDef> {
    FETCHES
        .iter()
        .chain(STICK_FETCHES.iter())
        .chain(STICK_ARRAY_FETCHES.iter())
        .find(|f| f.name == name)
}

pub use super::conv::{Conv, MapConv};

/// A compiled sample expression: one fetch and its converters.
#[derive(Clone, Debug)]
pub struct SampleExpr {
    pub fetch: Fetch,
    pub convs: Vec<Conv>,
    def: &'static FetchDef,
}

impl PartialEq for SampleExpr {
    fn eq(&self, other: &Self) -> bool {
        self.fetch == other.fetch && self.convs == other.convs && self.def.name == other.def.name
    }
}
impl Eq for SampleExpr {}

/// Characters HAProxy accepts in fetch/converter keywords.
pub(crate) fn is_idchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+')
}

/// How parse errors name the keyword: a plain fetch, or an ACL keyword (`hdr_beg`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Label<'a> {
    Fetch,
    AclKw(&'a str),
}

/// A parse failure, worded for the `Label` it was parsed under.
#[derive(Debug)]
pub(crate) struct ParseErr {
    pub msg: String,
}

/// Parse `fetch[(args)][,conv[(args)]]*` from the start of `s`; returns the expression and the
/// byte offset of the first character not part of it.
pub fn parse_sample_prefix(s: &str) -> Result<(SampleExpr, usize), String> {
    parse_prefix_with(s, None, Label::Fetch).map_err(|e| e.msg)
}

/// Parse a whole sample expression, e.g. `req.hdr(host,1),lower`.
pub fn parse_sample(s: &str) -> Result<SampleExpr, String> {
    let (expr, end) = parse_sample_prefix(s)?;
    match s.get(end..) {
        Some("") | None => Ok(expr),
        Some(_) => Err(match expr.convs.is_empty() {
            true => format!("missing comma after fetch keyword '{}'", expr.def.name),
            false => "missing comma after converter".to_string(),
        }),
    }
}

/// `def` forces the fetch (ACL keywords such as `hdr_beg` map onto `req.hdr`); the keyword is
/// still read from `s` to find where its arguments start.
pub(crate) fn parse_prefix_with(
    s: &str,
    def: Option<&'static FetchDef>,
    label: Label<'_>,
) -> Result<(SampleExpr, usize), ParseErr> {
    let kw_end = s.find(|c: char| !is_idchar(c)).unwrap_or(s.len());
    let fkw = s.get(..kw_end).unwrap_or("");
    if fkw.is_empty() {
        return Err(ParseErr {
            msg: "missing fetch method".into(),
        });
    }
    if def.is_none()
        && let Some(name) = fkw.strip_prefix("lua.")
        && super::script::has_fetch(name)
    {
        return lua_fetch(s, name, kw_end, label);
    }
    let def = match def.or_else(|| find_fetch(fkw)) {
        Some(d) => d,
        None => {
            return Err(ParseErr {
                msg: format!("unknown fetch method '{fkw}'"),
            });
        }
    };
    let prefix = match label {
        Label::Fetch => format!("fetch method '{fkw}'"),
        Label::AclKw(k) => format!("ACL keyword '{k}'"),
    };
    let known = |msg: String| ParseErr { msg };
    let mut pos = kw_end;
    let mut fetch = (def.make)();
    if s.get(pos..).is_some_and(|r| r.starts_with('(')) {
        let (args, next) = split_args(s, pos + 1).map_err(|m| known(format!("{prefix} : {m}")))?;
        pos = next;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        apply_args(&mut fetch, def.args, &args).map_err(|m| {
            known(match m.strip_prefix(CHECK) {
                Some(m) => format!("invalid args in {prefix} : {m}"),
                None => format!("{prefix} : {m}"),
            })
        })?;
    } else if matches!(
        def.args,
        ArgSpec::ScCtr
            | ArgSpec::Slot
            | ArgSpec::Var
            | ArgSpec::Int2
            | ArgSpec::IdxScCtr
            | ArgSpec::IdxTable
    ) {
        return Err(known(format!(
            "fetch method '{fkw}' : expected type 'integer' at position 1, but got nothing"
        )));
    }
    let mut convs = Vec::new();
    while s.get(pos..).is_some_and(|r| r.starts_with(',')) {
        let rest = s.get(pos + 1..).unwrap_or("");
        let cend = rest.find(|c: char| !is_idchar(c)).unwrap_or(rest.len());
        let ckw = rest.get(..cend).unwrap_or("");
        // A map converter takes its arguments here.
        if s.get(pos + 1 + cend..).is_some_and(|r| r.starts_with('('))
            && crate::map::MatchKind::from_converter(ckw).is_some()
        {
            let (args, next) = split_args(s, pos + 2 + cend).map_err(known)?;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match Conv::map(ckw, &args) {
                Some(Ok(c)) => convs.push(c),
                Some(Err(m)) => return Err(known(m)),
                None => {}
            }
            pos = next;
            continue;
        }
        pos += 1 + cend;
        let mut args: Vec<String> = Vec::new();
        if s.get(pos..).is_some_and(|r| r.starts_with('(')) {
            let (a, next) = split_args(s, pos + 1).map_err(known)?;
            args = a;
            pos = next;
        }
        let conv = match Conv::parse(ckw, &args) {
            Some(Ok(c)) => c,
            Some(Err(m)) => return Err(known(m)),
            None => {
                let m = format!("unknown converter '{ckw}'");
                return Err(known(match label {
                    Label::AclKw(k) => format!("ACL keyword '{k}' : {m}."),
                    Label::Fetch => m,
                }));
            }
        };
        convs.push(conv);
    }
    Ok((SampleExpr { fetch, convs, def }, pos))
}

/// `lua.<name>[(args)][,conv…]`: a registered Lua fetch takes its arguments as strings.
fn lua_fetch(
    s: &str,
    name: &str,
    kw_end: usize,
    label: Label<'_>,
) -> Result<(SampleExpr, usize), ParseErr> {
    let mut pos = kw_end;
    let mut args = Vec::new();
    if s.get(pos..).is_some_and(|r| r.starts_with('(')) {
        let (a, next) = split_args(s, pos + 1).map_err(|m| ParseErr {
            msg: format!("fetch method 'lua.{name}' : {m}"),
        })?;
        args = a;
        pos = next;
    }
    // The converters after it parse as after any fetch.
    let rest = s.get(pos..).unwrap_or("");
    let (tail, end) = parse_prefix_with(&format!("always_true{rest}"), None, label)?;
    let fetch = Fetch::Lua {
        name: name.to_string(),
        args,
    };
    let used = end.saturating_sub("always_true".len());
    Ok((
        SampleExpr {
            fetch,
            convs: tail.convs,
            def: &LUA_FETCH,
        },
        pos + used,
    ))
}

/// Split `a,b)` starting at `start` (just after `(`) into arguments; returns them and the offset
/// after `)`. As HAProxy's argument parser, `'…'` and `"…"` quote commas and parentheses, and
/// `\\` escapes the next character.
fn split_args(s: &str, start: usize) -> Result<(Vec<String>, usize), String> {
    let rest = s.get(start..).unwrap_or("");
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut it = rest.char_indices();
    while let Some((i, c)) = it.next() {
        match (c, quote) {
            ('\\', _) => match it.next() {
                Some((_, n)) => cur.push(n),
                None => return Err("expected ')'".into()),
            },
            ('\'' | '"', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            (',', None) => args.push(std::mem::take(&mut cur)),
            (')', None) => {
                if !(args.is_empty() && cur.is_empty()) {
                    args.push(cur);
                }
                return Ok((args, start + i + 1));
            }
            (c, _) => cur.push(c),
        }
    }
    Err("expected ')'".into())
}

/// An integer argument at `pos` (1-based) with HAProxy 2.6's words: `missing` when it is
/// absent, "failed to parse" when it is not a number of the type.
fn int_arg<T: std::str::FromStr>(a: Option<&str>, pos: usize, missing: &str) -> Result<T, String> {
    let a = a.unwrap_or("");
    match a.trim().parse::<T>() {
        Ok(n) => Ok(n),
        Err(_) if a.is_empty() => Err(missing.into()),
        Err(_) => Err(format!(
            "failed to parse '{a}' as type 'integer' at position {pos}"
        )),
    }
}

/// The arguments of a stick-counter fetch: `[<idx>,]` for the arrays, then `<sc>` or a table.
fn stick_args(
    spec: ArgSpec,
    args: &[&str],
    sc: &mut u8,
    table: &mut Option<String>,
    idx: &mut u32,
) -> Result<(), String> {
    const NOTHING: &str = "expected type 'integer' at position 1, but got nothing";
    let mut rest = args;
    if matches!(spec, ArgSpec::IdxScCtr | ArgSpec::IdxTable) {
        *idx = int_arg(args.first().copied(), 1, NOTHING)?;
        rest = args.get(1..).unwrap_or(&[]);
        // `src_*_gpc(<idx>,<table>)`: HAProxy 2.6 wants the table there.
        if spec == ArgSpec::IdxTable && rest.first().is_none_or(|t| t.is_empty()) {
            return Err("missing arguments (got 1/2), type 'table' expected".into());
        }
        if spec == ArgSpec::IdxScCtr {
            let missing = "missing arguments (got 1/2), type 'integer' expected";
            *sc = int_arg(rest.first().copied(), 2, missing)?;
            rest = rest.get(1..).unwrap_or(&[]);
        }
    } else if spec == ArgSpec::ScCtr {
        *sc = int_arg(args.first().copied(), 1, NOTHING)?;
        rest = args.get(1..).unwrap_or(&[]);
    }
    *table = rest
        .first()
        .filter(|t| !t.is_empty())
        .map(|t| t.to_string());
    Ok(())
}

fn apply_args(fetch: &mut Fetch, spec: ArgSpec, args: &[&str]) -> Result<(), String> {
    let max = match spec {
        ArgSpec::None => 0,
        ArgSpec::HdrName | ArgSpec::Str | ArgSpec::Table | ArgSpec::Slot => 1,
        ArgSpec::HdrOcc | ArgSpec::ScCtr | ArgSpec::Var | ArgSpec::Int2 | ArgSpec::IdxTable => 2,
        ArgSpec::IdxScCtr => 3,
        ArgSpec::Opt2 => match fetch {
            Fetch::Rand(_)
            | Fetch::Uuid
            | Fetch::BeConn(_)
            | Fetch::NbSrv(_)
            | Fetch::Gauge { .. } => 1,
            _ => 2,
        },
    };
    if spec == ArgSpec::Opt2 && args.len() <= max {
        return opt_args(fetch, args);
    }
    if let Fetch::Payload { offset, len, .. } = fetch
        && args.len() <= max
    {
        let int = |i: usize| -> Result<i64, String> {
            let a = args.get(i).copied().unwrap_or("");
            a.trim().parse::<i64>().map_err(|_| {
                format!(
                    "failed to parse '{a}' as type 'integer' at position {}",
                    i + 1
                )
            })
        };
        match args.len() {
            0 => return Err("expected type 'integer' at position 1, but got nothing".into()),
            1 => {
                int(0)?;
                return Err("missing arguments (got 1/2), type 'integer' expected".into());
            }
            _ => (*offset, *len) = (int(0)?, int(1)?),
        }
        return Ok(());
    }
    if let Fetch::Stick { sc, table, idx, .. } = fetch
        && args.len() <= max
    {
        return stick_args(spec, args, sc, table, idx);
    }
    if let Fetch::RdpCookie { name, .. } = fetch
        && args.len() <= max
    {
        *name = args
            .first()
            .filter(|t| !t.is_empty())
            .map(|t| t.to_string());
        return Ok(());
    }
    if let Fetch::Var { name, default } = fetch
        && args.len() <= max
    {
        let a = args.first().copied().unwrap_or("");
        *name = super::vars::VarName::parse(a)?;
        *default = args.get(1).map(|d| d.to_string());
        return Ok(());
    }
    if let Fetch::HttpAuth { list, .. } = fetch
        && args.len() <= max
    {
        *list = args
            .first()
            .filter(|t| !t.is_empty())
            .map(|t| t.to_string());
        return Ok(());
    }
    if let Fetch::Int(v) = fetch
        && args.len() <= max
    {
        let a = args.first().copied().unwrap_or("");
        *v = match a.trim().parse::<i64>() {
            Ok(n) => n,
            Err(_) if a.is_empty() => {
                return Err("expected type 'integer' at position 1, but got nothing".into());
            }
            Err(_) => {
                return Err(format!(
                    "failed to parse '{a}' as type 'integer' at position 1"
                ));
            }
        };
        return Ok(());
    }
    if let Fetch::Capture { slot, .. } = fetch
        && args.len() <= max
    {
        let a = args.first().copied().unwrap_or("");
        *slot = match a.trim().parse::<usize>() {
            Ok(n) => n,
            Err(_) if a.is_empty() => {
                return Err("expected type 'integer' at position 1, but got nothing".into());
            }
            Err(_) => {
                return Err(format!(
                    "failed to parse '{a}' as type 'integer' at position 1"
                ));
            }
        };
        return Ok(());
    }
    if let (Fetch::Env(v), [a]) = (&mut *fetch, args) {
        *v = a.to_string();
        return Ok(());
    }
    if let (
        Fetch::Gauge {
            proxy: be,
            server: srv,
            ..
        }
        | Fetch::SrvConn(be, srv),
        [a],
    ) = (&mut *fetch, args)
        && spec == ArgSpec::Str
    {
        match a.split_once('/') {
            Some((b, s)) => {
                *be = Some(b.to_string());
                *srv = s.to_string();
            }
            None => *srv = a.to_string(),
        }
        return Ok(());
    }
    if spec == ArgSpec::Str {
        if let Fetch::Str(v) = fetch {
            // HAProxy 2.6 accepts `str` and `str()` as the empty string.
            if let [a] = args {
                *v = a.to_string();
            }
        }
        if args.len() <= 1 {
            return Ok(());
        }
    }
    if args.len() > max {
        // HAProxy quotes what follows the last accepted argument.
        let rest: Vec<&str> = args.get(max..).unwrap_or(&[]).to_vec();
        let shown = if max == 0 {
            format!("{})", rest.join(","))
        } else {
            format!(",{})", rest.join(","))
        };
        return Err(format!("expected ')' before '{shown}'"));
    }
    let name = args
        .first()
        .filter(|n| !n.is_empty())
        .map(|n| n.to_string());
    let occ = match args.get(1) {
        Some(o) => Some(
            o.trim()
                .parse::<i64>()
                .map_err(|_| format!("failed to parse '{o}' as type 'integer' at position 2"))?,
        ),
        None => None,
    };
    match fetch {
        Fetch::Hdr {
            name: n, occ: oc, ..
        }
        | Fetch::HdrVal {
            name: n, occ: oc, ..
        } => {
            *n = name;
            *oc = occ;
        }
        Fetch::HdrCnt { name: n, .. } => *n = name,
        Fetch::Cook { name: n, .. } => *n = name.unwrap_or_default(),
        _ => {}
    }
    Ok(())
}

/// Every value of cookie `name` (any cookie if empty) in the `Cookie` headers (`set`: the
/// `Set-Cookie` ones, whose first attribute only is the cookie), in order, as HAProxy's
/// `http_extract_cookie_value` walks the comma-separated header values.
fn cookie_values<'a>(headers: &'a Headers, set: bool, name: &str) -> Vec<&'a str> {
    let hname = if set { "set-cookie" } else { "cookie" };
    let sp = |c: u8| c == b' ' || c == b'\t';
    let mut out = Vec::new();
    for v in header_values(headers, Some(hname), false) {
        if v.len() < name.len() + 1 {
            continue;
        }
        let b = v.as_bytes();
        let mut at = 0;
        while at + name.len() + 1 < b.len() {
            while at < b.len() && sp(b[at]) {
                at += 1;
            }
            let att_beg = at;
            let mut att_end = at;
            let mut eq = at;
            while eq < b.len() {
                let c = b[eq];
                if c == b'=' || c == b';' || (!set && c == b',') {
                    break;
                }
                eq += 1;
                if !sp(c) {
                    att_end = eq;
                }
            }
            let (val_beg, val_end, next) = if eq < b.len() && b[eq] == b'=' {
                let mut vb = eq + 1;
                while vb < b.len() && sp(b[vb]) {
                    vb += 1;
                }
                let next = cookie_value_end(b, vb);
                let mut ve = next;
                while ve > vb && sp(b[ve - 1]) {
                    ve -= 1;
                }
                (vb, ve, next)
            } else {
                (eq, eq, eq)
            };
            // `$` attributes and cookies without `=` are passed over.
            if b.get(att_beg) != Some(&b'$') && eq != next {
                if name.is_empty() || v.get(att_beg..att_end) == Some(name) {
                    out.push(v.get(val_beg..val_end).unwrap_or(""));
                } else if set {
                    // Set-Cookie: past the cookie itself come its attributes.
                    break;
                }
            }
            at = next + 1;
        }
    }
    out
}

/// `http_find_cookie_value_end`: the first `,` or `;` outside a quoted string.
fn cookie_value_end(b: &[u8], from: usize) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in b.iter().enumerate().skip(from) {
        if pair {
            pair = false;
        } else if quoted {
            match c {
                b'\\' => pair = true,
                b'"' => quoted = false,
                _ => {}
            }
        } else if c == b'"' {
            quoted = true;
        } else if c == b',' || c == b';' {
            return i;
        }
    }
    b.len()
}

/// `strl2ic`: an optional sign and the leading digits (0 without any).
fn strl2ic(s: &str) -> i64 {
    let (neg, d) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = d.bytes().take_while(u8::is_ascii_digit).fold(0i64, |n, c| {
        n.wrapping_mul(10).wrapping_add(i64::from(c - b'0'))
    });
    if neg { n.wrapping_neg() } else { n }
}

/// Marks an error of a fetch's argument check (HAProxy says "invalid args in fetch method")
/// rather than of an argument's type.
const CHECK: &str = "\u{0}check:";

/// The arguments of `rand`, `uuid`, `url_param` and `date`, with HAProxy's errors.
fn opt_args(fetch: &mut Fetch, args: &[&str]) -> Result<(), String> {
    let int = |i: usize| -> Result<Option<i64>, String> {
        match args.get(i).copied() {
            None | Some("") => Ok(None),
            Some(a) => a.trim().parse::<i64>().map(Some).map_err(|_| {
                format!(
                    "failed to parse '{a}' as type 'integer' at position {}",
                    i + 1
                )
            }),
        }
    };
    match fetch {
        Fetch::Rand(range) => *range = int(0)?,
        Fetch::Uuid => {
            if let Some(v) = int(0)?.filter(|&v| v != 4) {
                return Err(format!("{CHECK}Unsupported UUID version: '{v}'"));
            }
        }
        Fetch::BeConn(be) | Fetch::NbSrv(be) => {
            *be = args
                .first()
                .filter(|a| !a.is_empty())
                .map(|a| a.to_string());
        }
        Fetch::UrlParam { name, delim } => {
            *name = args.first().map_or("", |a| a).to_string();
            if let Some(d) = args.get(1).and_then(|d| d.bytes().next()) {
                *delim = d;
            }
        }
        Fetch::Date { offset, per_sec } => {
            *offset = int(0)?.unwrap_or(0);
            *per_sec = match args.get(1).copied() {
                None => 1,
                Some("s") => 1,
                Some("ms") => 1_000,
                Some("us") => 1_000_000,
                Some(u) => return Err(format!("{CHECK}expects 's', 'ms' or 'us', got '{u}'")),
            };
        }
        _ => {}
    }
    Ok(())
}

/// HAProxy's request buffer size (`tune.bufsize`): a payload window past it never matches.
const BUFSIZE: i64 = 16384;

/// `req.payload(<offset>,<length>)` over `buf` (length 0: to the end), as HAProxy's
/// `smp_fetch_payload`: nothing when the window is not (yet) there or cannot be.
fn payload(buf: &[u8], offset: i64, len: i64) -> Option<&[u8]> {
    let (off, n) = (usize::try_from(offset).ok()?, usize::try_from(len).ok()?);
    if len > BUFSIZE || offset.saturating_add(len) > BUFSIZE || off.saturating_add(n) > buf.len() {
        return None;
    }
    match n {
        0 => buf.get(off..),
        n => buf.get(off..off + n),
    }
}

/// Whether a payload window may still fill: it ends past the bytes there but within a buffer.
fn payload_may_change(have: usize, offset: i64, len: i64) -> bool {
    let (Ok(off), Ok(n)) = (usize::try_from(offset), usize::try_from(len)) else {
        return false;
    };
    len <= BUFSIZE && offset.saturating_add(len) <= BUFSIZE && (n == 0 || off + n > have)
}

/// `http_find_next_url_param`: after the first `delim` of the URI, the value of the first
/// parameter named `name` (any parameter if empty); parameters end at `&`, `;` or `delim`.
pub fn url_param_value<'a>(uri: &'a str, name: &str, delim: u8) -> Option<&'a str> {
    let b = uri.as_bytes();
    let is_delim = |c: u8| c == b'&' || c == b';' || c == delim;
    let q = b.iter().position(|&c| is_delim(c))?;
    let qs = &b[q + 1..];
    let n = name.as_bytes();
    let start = if n.is_empty() {
        qs.iter().position(|&c| c == b'=')? + 1
    } else {
        let mut pos = 0;
        loop {
            let eq = pos + n.len();
            if eq >= qs.len() {
                return None;
            }
            if qs[eq] == b'=' {
                if &qs[pos..eq] == n {
                    break eq + 1;
                }
                pos = eq + 1;
            }
            pos += qs.get(pos..)?.iter().position(|&c| is_delim(c))? + 1;
        }
    };
    let rest = qs.get(start..)?;
    let end = rest.iter().position(|&c| is_delim(c)).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()
}

/// HAProxy's `ha_generate_uuid` layout over 128 random bits.
pub fn uuid_v4(rnd: [u32; 4]) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        rnd[0],
        rnd[1] & 0xffff,
        ((rnd[1] >> 16) & 0xfff) | 0x4000,
        (rnd[2] & 0x3fff) | 0x8000,
        ((u64::from(rnd[2]) >> 14) | (u64::from(rnd[3]) << 18)) & 0xffff_ffff_ffff
    )
}

fn hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default()
    })
}

/// Header values for `name` (all headers if `None`), split on commas outside quotes unless
/// `full`, in order.
fn header_values<'a>(headers: &'a Headers, name: Option<&str>, full: bool) -> Vec<&'a str> {
    let mut out = Vec::new();
    for h in &headers.0 {
        if name.is_some_and(|n| !h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        let Ok(v) = std::str::from_utf8(&h.value) else {
            continue;
        };
        if full {
            out.push(v.trim_matches([' ', '\t']));
            continue;
        }
        let mut in_quote = false;
        let mut start = 0;
        for (i, c) in v.char_indices() {
            match c {
                '"' => in_quote = !in_quote,
                ',' if !in_quote => {
                    out.push(v.get(start..i).unwrap_or("").trim_matches([' ', '\t']));
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(v.get(start..).unwrap_or("").trim_matches([' ', '\t']));
    }
    out
}

/// Pick occurrence `occ` (1 = first, -1 = last) from `vals`.
fn pick<T: Copy>(vals: &[T], occ: i64) -> Option<T> {
    if occ > 0 {
        vals.get(usize::try_from(occ - 1).ok()?).copied()
    } else if occ < 0 {
        let back = usize::try_from(occ.unsigned_abs()).ok()?;
        vals.len()
            .checked_sub(back)
            .and_then(|i| vals.get(i).copied())
    } else {
        None
    }
}

fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback()
}

impl SampleExpr {
    pub fn def(&self) -> &'static FetchDef {
        self.def
    }
    /// Output type after converters.
    pub fn out_type(&self) -> SmpType {
        match self.convs.last() {
            Some(Conv::Length) => SmpType::Int,
            Some(Conv::Map(_)) => SmpType::Str,
            Some(_) => SmpType::Str,
            None => self.def.out,
        }
    }

    /// The value of the expression (for a header without occurrence: the last value).
    pub fn eval<'a>(&self, ctx: &SampleCtx<'a>) -> Option<SampleValue<'a>> {
        let v = self.fetch_one(ctx)?;
        self.convert(v, ctx)
    }

    /// Calls `f` with every value the fetch yields (all header values in an ACL), stopping at
    /// the first `true`; returns whether any call returned `true`.
    pub fn any_value<'a>(
        &self,
        ctx: &SampleCtx<'a>,
        f: &mut dyn FnMut(&SampleValue<'a>) -> bool,
    ) -> bool {
        match &self.fetch {
            Fetch::Hdr {
                name,
                occ: None,
                full,
                dir,
            } => {
                let Some(hs) = ctx.headers(*dir) else {
                    return false;
                };
                header_values(hs, name.as_deref(), *full)
                    .into_iter()
                    .filter_map(|v| self.convert(SampleValue::Str(Cow::Borrowed(v)), ctx))
                    .any(|v| f(&v))
            }
            Fetch::ReqSslAlpn if ctx.ssl_hello.is_none() => {
                let Some(h) = ctx.payload.and_then(|p| hello::client_hello(p).found()) else {
                    return false;
                };
                h.alpn
                    .into_iter()
                    .filter_map(|v| self.convert(SampleValue::Str(v), ctx))
                    .any(|v| f(&v))
            }
            Fetch::HdrVal {
                name,
                occ: None,
                dir,
            } => {
                let Some(hs) = ctx.headers(*dir) else {
                    return false;
                };
                header_values(hs, name.as_deref(), false)
                    .into_iter()
                    .filter_map(|v| v.parse::<i64>().ok())
                    .filter_map(|v| self.convert(SampleValue::Int(v), ctx))
                    .any(|v| f(&v))
            }
            // An ACL on `http_auth_group` matches the user's groups (HAProxy's `pat_match_auth`).
            Fetch::HttpAuth {
                list: Some(list),
                group: true,
            } => {
                let (Some(req), Some(lists)) = (ctx.req, ctx.userlists) else {
                    return false;
                };
                let Some(c) = super::auth::credentials(&req.headers) else {
                    return false;
                };
                let Some(user) = lists.check(list, &c) else {
                    return false;
                };
                lists
                    .groups_of(list, user)
                    .into_iter()
                    .filter_map(|g| self.convert(SampleValue::Str(Cow::Owned(g.to_string())), ctx))
                    .any(|v| f(&v))
            }
            _ => match self.eval(ctx) {
                Some(v) => f(&v),
                None => false,
            },
        }
    }

    /// Whether the fetch's answer may still change as more request bytes arrive (only while
    /// `ctx.partial`): `req.len` always, the `req.ssl_*` fetches while the buffer is a valid but
    /// incomplete handshake. An ACL that fails on such a fetch waits rather than fails.
    pub fn may_change(&self, ctx: &SampleCtx<'_>) -> bool {
        if !ctx.partial || ctx.ssl_hello.is_some() {
            return false;
        }
        match &self.fetch {
            Fetch::WaitEnd => return true,
            Fetch::ResLen => return ctx.res_payload.is_some(),
            Fetch::Payload { res, offset, len } => {
                let buf = if *res { ctx.res_payload } else { ctx.payload };
                return buf.is_some_and(|b| payload_may_change(b.len(), *offset, *len));
            }
            Fetch::RdpCookie { name, .. } => {
                return ctx.payload.is_some_and(|b| {
                    super::rdp::cookie(b, name.as_deref()) == super::rdp::Rdp::TooShort
                });
            }
            _ => {}
        }
        let Some(p) = ctx.payload else { return false };
        match self.fetch {
            Fetch::ReqLen => true,
            Fetch::ReqSslSni | Fetch::ReqSslAlpn => hello::client_hello(p) == hello::Peek::NeedMore,
            Fetch::ReqSslHelloType => hello::hello_type(p) == hello::Peek::NeedMore,
            Fetch::ReqSslVer => hello::ssl_ver(p) == hello::Peek::NeedMore,
            _ => false,
        }
    }

    fn convert<'a>(&self, mut v: SampleValue<'a>, ctx: &SampleCtx<'_>) -> Option<SampleValue<'a>> {
        let env = super::conv::ConvEnv {
            vars: ctx.vars,
            stick: ctx.stick,
        };
        for c in &self.convs {
            v = c.apply_with(v, &env)?;
        }
        Some(v)
    }

    fn fetch_one<'a>(&self, ctx: &SampleCtx<'a>) -> Option<SampleValue<'a>> {
        use SampleValue::*;
        let s = |v: &'a str| Some(Str(Cow::Borrowed(v)));
        match &self.fetch {
            Fetch::Lua { name, args } => super::script::host()?.fetch(name, args, ctx),
            Fetch::AlwaysTrue => Some(Bool(true)),
            Fetch::AlwaysFalse => Some(Bool(false)),
            Fetch::Src => Some(Ip(ctx.src.ip())),
            Fetch::Dst => Some(Ip(ctx.dst.ip())),
            Fetch::SrcPort => Some(Int(i64::from(ctx.src.port()))),
            Fetch::DstPort => Some(Int(i64::from(ctx.dst.port()))),
            Fetch::SrcIsLocal => Some(Bool(is_local(ctx.src.ip()))),
            Fetch::FeName => s(ctx.frontend),
            Fetch::BeName => ctx.backend.and_then(s),
            Fetch::SrvName => ctx.server.and_then(s),
            Fetch::SslFc => Some(Bool(ctx.ssl)),
            Fetch::FcRcvdProxy => Some(Bool(ctx.proxied.is_some())),
            Fetch::FcPpAuthority => ctx.proxied.and_then(|h| h.authority.as_deref()).map(text),
            Fetch::FcPpUniqueId => ctx.proxied.and_then(|h| h.unique_id.as_deref()).map(text),
            Fetch::SslFcSni => ctx.ssl_sni.filter(|_| ctx.ssl).and_then(s),
            Fetch::SslFcHasSni => ctx.ssl.then_some(Bool(ctx.ssl_sni.is_some())),
            Fetch::SslFcAlpn => ctx.alpn.filter(|_| ctx.ssl).and_then(s),
            Fetch::SslFcCipher => ctx.ssl_cipher.filter(|_| ctx.ssl).and_then(s),
            Fetch::SslFcProtocol => ctx.ssl_protocol.filter(|_| ctx.ssl).and_then(s),
            Fetch::ReqSslSni => match (ctx.ssl_hello, ctx.payload) {
                (Some(h), _) => h.sni.and_then(s),
                (None, Some(p)) => hello::client_hello(p).found()?.sni.map(Str),
                (None, None) => None,
            },
            Fetch::ReqSslAlpn => match (ctx.ssl_hello, ctx.payload) {
                (Some(h), _) => h.alpn.and_then(s),
                (None, Some(p)) => hello::client_hello(p)
                    .found()?
                    .alpn
                    .into_iter()
                    .next()
                    .map(Str),
                (None, None) => None,
            },
            Fetch::ReqSslHelloType => match (ctx.ssl_hello, ctx.payload) {
                (Some(h), _) => Some(Int(h.hello_type)),
                (None, Some(p)) => hello::hello_type(p).found().map(|t| Int(i64::from(t))),
                (None, None) => None,
            },
            Fetch::ReqSslVer => ctx.payload.and_then(|p| hello::ssl_ver(p).found()).map(Int),
            Fetch::ReqLen => {
                let n = ctx.payload.map_or(ctx.req_len, <[u8]>::len);
                Some(Int(i64::try_from(n).unwrap_or(i64::MAX)))
            }
            Fetch::ResLen => {
                let n = ctx.res_payload.map(<[u8]>::len).or(ctx.res_len)?;
                Some(Int(i64::try_from(n).unwrap_or(i64::MAX)))
            }
            Fetch::Payload { res, offset, len } => {
                let buf = if *res { ctx.res_payload } else { ctx.payload };
                payload(buf?, *offset, *len).map(|b| Bin(Cow::Borrowed(b)))
            }
            Fetch::RdpCookie { name, cnt } => {
                match (super::rdp::cookie(ctx.payload?, name.as_deref()), cnt) {
                    (super::rdp::Rdp::Cookie(v), false) => Some(Str(String::from_utf8_lossy(v))),
                    (super::rdp::Rdp::Cookie(_), true) => Some(Int(1)),
                    (_, true) => Some(Int(0)),
                    (_, false) => None,
                }
            }
            Fetch::WaitEnd => (!ctx.partial).then_some(Bool(true)),
            Fetch::LastRuleFile => ctx.last_rule?.get().map(|r| Str(Cow::Borrowed(r.file))),
            Fetch::LastRuleLine => ctx.last_rule?.get().map(|r| Int(i64::from(r.line))),
            Fetch::ReqProtoHttp => Some(Bool(ctx.req.is_some())),
            Fetch::Str(v) => Some(Str(Cow::Owned(v.clone()))),
            Fetch::Int(v) => Some(Int(*v)),
            Fetch::HttpAuth { list, group } => {
                let c = super::auth::credentials(&ctx.req?.headers)?;
                let user = ctx.userlists?.check(list.as_deref()?, &c);
                match (group, user) {
                    (false, u) => Some(Bool(u.is_some())),
                    (true, u) => u.map(|u| Str(Cow::Owned(u.to_string()))),
                }
            }
            Fetch::HttpAuthPart(part) => {
                let h = &ctx.req?.headers;
                let c = super::auth::credentials(h);
                Some(Str(Cow::Owned(match part {
                    // HAProxy names the three schemes it knows, and nothing else.
                    AuthPart::Type => match c?.kind.to_ascii_lowercase().as_str() {
                        "basic" => "Basic".into(),
                        "digest" => "Digest".into(),
                        "bearer" => "Bearer".into(),
                        _ => return None,
                    },
                    AuthPart::User => c?.user,
                    AuthPart::Pass => c?.pass,
                })))
            }
            Fetch::Method => ctx.req.map(|r| r.method.as_str()).and_then(s),
            Fetch::Path => ctx.req.map(|r| r.path()).and_then(s),
            Fetch::PathQ => {
                let r = ctx.req?;
                let p = r.path();
                match r.query() {
                    Some(q) => Some(Str(Cow::Owned(format!("{p}?{q}")))),
                    None => s(p),
                }
            }
            Fetch::Url => ctx.req.map(|r| r.target.as_str()).and_then(s),
            Fetch::Query => ctx.req.and_then(|r| r.query()).and_then(s),
            Fetch::Rand(range) => {
                let r = crate::lb::random_u32();
                Some(Int(match range {
                    // Scaled, not a modulo: every bit counts (HAProxy's smp_fetch_rand).
                    Some(n) => ((u64::from(r) as i128 * i128::from(*n)) >> 32) as i64,
                    None => i64::from(r),
                }))
            }
            Fetch::Uuid => {
                let mut b = [0u8; 16];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).ok()?;
                let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                Some(Str(Cow::Owned(uuid_v4([w(0), w(4), w(8), w(12)]))))
            }
            Fetch::UrlParam { name, delim } => ctx
                .req
                .and_then(|r| url_param_value(&r.target, name, *delim))
                .and_then(s),
            Fetch::Env(name) => std::env::var(name).ok().map(|v| Str(Cow::Owned(v))),
            Fetch::Hostname => Some(Str(Cow::Borrowed(hostname()))),
            Fetch::UniqueId => ctx.unique_id.and_then(s),
            Fetch::Cook { name, dir, kind } => {
                let set = match dir {
                    HdrDir::Req => false,
                    HdrDir::Res => true,
                    HdrDir::Any => ctx.res.is_some(),
                };
                let dir = if set { HdrDir::Res } else { HdrDir::Req };
                let found = cookie_values(ctx.headers(dir)?, set, name);
                match kind {
                    CookKind::Cnt => Some(Int(i64::try_from(found.len()).unwrap_or(i64::MAX))),
                    _ => {
                        let v = if name.is_empty() {
                            found.first()
                        } else {
                            found.last()
                        };
                        let v = *v?;
                        Some(match kind {
                            CookKind::Val => Int(strl2ic(v)),
                            _ => Str(Cow::Borrowed(v)),
                        })
                    }
                }
            }
            Fetch::BeConn(be) | Fetch::NbSrv(be) => {
                let (c, current) = ctx.counts?;
                let name = be.as_deref().unwrap_or(current);
                if matches!(self.fetch, Fetch::BeConn(_)) {
                    c.be_conn(name).map(Int)
                } else {
                    c.nbsrv(name).map(Int)
                }
            }
            Fetch::Gauge { g, proxy, server } => {
                let (c, current) = ctx.counts?;
                // Without a name: the frontend for the frontend gauges, else the current proxy.
                let dflt = match g {
                    Gauge::FeConn | Gauge::FeSessRate | Gauge::FeReqRate => ctx.frontend,
                    _ => current,
                };
                c.gauge(*g, proxy.as_deref().unwrap_or(dflt), server)
                    .map(Int)
            }
            Fetch::SrvConn(be, srv) => {
                let (c, current) = ctx.counts?;
                c.srv_conn(be.as_deref().unwrap_or(current), srv).map(Int)
            }
            Fetch::Date { offset, per_sec } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()?;
                let secs = i64::try_from(now.as_secs()).ok()?;
                let frac = i64::from(now.subsec_micros()) * per_sec / 1_000_000;
                Some(Int(secs
                    .saturating_mul(*per_sec)
                    .saturating_add(frac)
                    .saturating_add(*offset)))
            }
            Fetch::Base => {
                let r = ctx.req?;
                match r.headers.get_first("host") {
                    Some(h) => {
                        let host = String::from_utf8_lossy(h);
                        Some(Str(Cow::Owned(format!("{host}{}", r.path()))))
                    }
                    None => s(r.path()),
                }
            }
            Fetch::ReqVer => ctx.req.map(|r| match r.version {
                Version::Http10 => Str(Cow::Borrowed("1.0")),
                Version::Http11 => Str(Cow::Borrowed("1.1")),
                Version::Http2 => Str(Cow::Borrowed("2.0")),
            }),
            Fetch::Hdr {
                name,
                occ,
                full,
                dir,
            } => {
                let vals = header_values(ctx.headers(*dir)?, name.as_deref(), *full);
                pick(&vals, occ.unwrap_or(-1)).and_then(s)
            }
            Fetch::HdrVal { name, occ, dir } => {
                let vals = header_values(ctx.headers(*dir)?, name.as_deref(), false);
                pick(&vals, occ.unwrap_or(-1)).and_then(|v| v.parse().ok().map(Int))
            }
            Fetch::HdrCnt { name, full, dir } => {
                let n = header_values(ctx.headers(*dir)?, name.as_deref(), *full).len();
                Some(Int(i64::try_from(n).unwrap_or(i64::MAX)))
            }
            Fetch::Status => ctx.res.map(|r| Int(i64::from(r.status))),
            Fetch::Var { name, default } => match ctx.vars.and_then(|v| v.get(name)) {
                Some(v) => Some(v),
                None => default.clone().map(|d| Str(Cow::Owned(d))),
            },
            Fetch::Capture { res, slot } => ctx
                .captures
                .and_then(|c| c.get(*res, *slot))
                .map(|v| Str(Cow::Owned(v))),
            Fetch::ResComp => Some(Bool(ctx.res_comp.is_some())),
            Fetch::ResCompAlgo => ctx.res_comp.map(|a| Str(Cow::Borrowed(a))),
            Fetch::ResVer => ctx.res.map(|r| match r.version {
                Version::Http10 => Str(Cow::Borrowed("1.0")),
                Version::Http11 => Str(Cow::Borrowed("1.1")),
                Version::Http2 => Str(Cow::Borrowed("2.0")),
            }),
            Fetch::Stick {
                src,
                sc,
                data,
                idx,
                table,
                op,
            } => {
                let view = ctx.stick?;
                let v = if *src {
                    view.src_op(ctx.src.ip(), table.as_deref(), *op, (*data, *idx))?
                } else {
                    view.sc_op(usize::from(*sc), table.as_deref(), *op, (*data, *idx))?
                };
                Some(Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::Headers;

    fn req() -> RequestHead {
        let mut headers = Headers::default();
        headers.append("Host", "Example.COM");
        headers.append("X-Fwd", "a, b");
        headers.append("x-fwd", "\"c,d\", e");
        headers.append("Content-Length", "12");
        RequestHead {
            method: "GET".into(),
            target: "/p/q?x=1&y".into(),
            version: Version::Http11,
            headers,
        }
    }

    fn ctx(r: &RequestHead) -> SampleCtx<'_> {
        let mut c = SampleCtx::new(
            "192.168.1.10:4321".parse().unwrap(),
            "[::1]:443".parse().unwrap(),
            "fe1",
        );
        c.backend = Some("be1");
        c.req = Some(r);
        c.ssl = true;
        c.ssl_sni = Some("www.example.com");
        c
    }

    fn ev(expr: &str, c: &SampleCtx<'_>) -> Option<String> {
        parse_sample(expr).unwrap().eval(c).map(|v| v.to_string())
    }

    /// configuration.txt's rand, uuid, url_param, env, hostname and date, and HAProxy's errors.
    #[test]
    fn internal_and_query_fetches() {
        let mut r = req();
        r.target = "/p?a=1;b=two&bb=3&b=4".into();
        let c = ctx(&r);
        assert_eq!(ev("url_param(b)", &c).as_deref(), Some("two"));
        assert_eq!(ev("urlp(bb)", &c).as_deref(), Some("3"));
        assert_eq!(ev("url_param", &c).as_deref(), Some("1"));
        assert_eq!(ev("url_param(c)", &c), None);
        assert_eq!(url_param_value("/p;x=1?y=2", "y", b'?'), Some("2"));
        assert_eq!(url_param_value("/p?y=2", "y", b';'), None);
        assert_eq!(url_param_value("/p?yy&y=", "y", b'?'), Some(""));
        for _ in 0..200 {
            let n: i64 = ev("rand(10)", &c).unwrap().parse().unwrap();
            assert!((0..10).contains(&n));
        }
        let n: i64 = ev("rand", &c).unwrap().parse().unwrap();
        assert!((0..=i64::from(u32::MAX)).contains(&n));
        let u = ev("uuid", &c).unwrap();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        assert_eq!(
            uuid_v4([0x0123_4567, 0x89ab_cdef, 0xffff_ffff, 0x1234_5678]),
            "01234567-cdef-49ab-bfff-48d159e3ffff"
        );
        let err = |e: &str| parse_sample(e).unwrap_err();
        assert_eq!(
            err("uuid(3)"),
            "invalid args in fetch method 'uuid' : Unsupported UUID version: '3'"
        );
        assert_eq!(
            err("date(0,h)"),
            "invalid args in fetch method 'date' : expects 's', 'ms' or 'us', got 'h'"
        );
        assert_eq!(
            err("rand(x)"),
            "fetch method 'rand' : failed to parse 'x' as type 'integer' at position 1"
        );
        assert_eq!(ev("env(PATH)", &c), std::env::var("PATH").ok());
        assert_eq!(ev("env(PORTCULLIS_SURELY_UNSET_VAR)", &c), None);
        assert!(!ev("hostname", &c).unwrap().is_empty());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let d: i64 = ev("date(3600)", &c).unwrap().parse().unwrap();
        assert!((now + 3599..=now + 3602).contains(&d));
        let ms: i64 = ev("date(0,ms)", &c).unwrap().parse().unwrap();
        assert!((now * 1000..=(now + 2) * 1000).contains(&ms));
    }

    /// configuration.txt's cookie fetches, walked as http_extract_cookie_value.
    #[test]
    fn cookie_fetches() {
        let mut r = req();
        r.headers
            .append("Cookie", "a=1; b = two ; $Path=/; a=3, c=4");
        r.headers.append("cookie", "n=42x; a=\"q;u\"; e");
        let c = ctx(&r);
        assert_eq!(ev("req.cook(a)", &c).as_deref(), Some("\"q;u\""));
        assert_eq!(ev("cook(b)", &c).as_deref(), Some("two"));
        assert_eq!(ev("req.cook", &c).as_deref(), Some("1"));
        assert_eq!(ev("req.cook_cnt(a)", &c).as_deref(), Some("3"));
        assert_eq!(ev("req.cook_cnt", &c).as_deref(), Some("6"));
        assert_eq!(ev("req.cook_val(n)", &c).as_deref(), Some("42"));
        assert_eq!(ev("req.cook(e)", &c), None);
        assert_eq!(ev("cookie(c)", &c).as_deref(), Some("4"));
        let mut res = ResponseHead {
            version: Version::Http11,
            status: 200,
            reason: "OK".into(),
            headers: Headers::default(),
        };
        res.headers
            .append("Set-Cookie", "sid=abc; Path=/; HttpOnly");
        res.headers.append("Set-Cookie", "lang=fr; Max-Age=3, x=1");
        let mut c = ctx(&r);
        c.res = Some(&res);
        assert_eq!(ev("res.cook(sid)", &c).as_deref(), Some("abc"));
        assert_eq!(ev("scook(Path)", &c).as_deref(), None);
        // HAProxy counts the attributes after a nameless match too.
        assert_eq!(ev("res.cook_cnt", &c).as_deref(), Some("5"));
        assert_eq!(ev("cookie(x)", &c).as_deref(), Some("1"));
    }

    struct FakeCounts;
    impl Counts for FakeCounts {
        fn be_conn(&self, b: &str) -> Option<i64> {
            (b == "be1").then_some(7)
        }
        fn srv_conn(&self, b: &str, s: &str) -> Option<i64> {
            (b == "be1" && s == "s2").then_some(3)
        }
        fn nbsrv(&self, b: &str) -> Option<i64> {
            (b == "be1").then_some(2)
        }
        fn gauge(&self, g: Gauge, p: &str, s: &str) -> Option<i64> {
            Some(match (g, p, s) {
                (Gauge::FeConn, "fe1", "") => 4,
                (Gauge::BeSessRate, "be1", "") => 5,
                (Gauge::SrvSessRate, "be1", "s2") => 6,
                _ => return None,
            })
        }
    }

    #[test]
    fn backend_count_fetches() {
        let r = req();
        let mut c = ctx(&r);
        assert_eq!(ev("be_conn", &c), None);
        c.counts = Some((&FakeCounts, "be1"));
        assert_eq!(ev("be_conn", &c).as_deref(), Some("7"));
        assert_eq!(ev("be_conn(be1)", &c).as_deref(), Some("7"));
        assert_eq!(ev("be_conn(nope)", &c), None);
        assert_eq!(ev("srv_conn(s2)", &c).as_deref(), Some("3"));
        assert_eq!(ev("srv_conn(be1/s2)", &c).as_deref(), Some("3"));
        assert_eq!(ev("srv_conn(x/s2)", &c), None);
        assert_eq!(ev("nbsrv", &c).as_deref(), Some("2"));
        // The frontend gauges default to the frontend, the others to the current proxy.
        assert_eq!(ev("fe_conn", &c).as_deref(), Some("4"));
        assert_eq!(ev("be_sess_rate", &c).as_deref(), Some("5"));
        assert_eq!(ev("srv_sess_rate(s2)", &c).as_deref(), Some("6"));
        assert_eq!(ev("fe_sess_rate", &c), None);
    }

    #[test]
    fn proxy_protocol_fetches() {
        let r = req();
        let mut c = ctx(&r);
        assert_eq!(ev("fc_rcvd_proxy", &c).as_deref(), Some("0"));
        assert_eq!(ev("fc_pp_authority", &c), None);
        let h = crate::proxy_proto::Header {
            version: 2,
            authority: Some(b"www.example.com".to_vec()),
            unique_id: Some(b"id-\xff".to_vec()),
            ..Default::default()
        };
        c = c.with_proxied(Some(&h));
        assert_eq!(ev("fc_rcvd_proxy", &c).as_deref(), Some("1"));
        assert_eq!(
            ev("fc_pp_authority", &c).as_deref(),
            Some("www.example.com")
        );
        assert_eq!(ev("fc_pp_unique_id", &c).as_deref(), Some("id-\u{fffd}"));
        let v1 = crate::proxy_proto::Header {
            version: 1,
            ..Default::default()
        };
        c = c.with_proxied(Some(&v1));
        assert_eq!(ev("fc_rcvd_proxy", &c).as_deref(), Some("1"));
        assert_eq!(ev("fc_pp_unique_id", &c), None);
    }

    #[test]
    fn str_constant() {
        let r = req();
        let c = ctx(&r);
        assert_eq!(
            ev("str(backend.local)", &c).as_deref(),
            Some("backend.local")
        );
        assert_eq!(ev("str()", &c).as_deref(), Some(""));
        assert_eq!(ev("str(Ab),lower", &c).as_deref(), Some("ab"));
    }

    #[test]
    fn basic_fetches() {
        let r = req();
        let c = ctx(&r);
        assert_eq!(ev("src", &c).as_deref(), Some("192.168.1.10"));
        assert_eq!(ev("dst", &c).as_deref(), Some("::1"));
        assert_eq!(ev("src_port", &c).as_deref(), Some("4321"));
        assert_eq!(ev("dst_port", &c).as_deref(), Some("443"));
        assert_eq!(ev("path", &c).as_deref(), Some("/p/q"));
        assert_eq!(ev("url", &c).as_deref(), Some("/p/q?x=1&y"));
        assert_eq!(ev("query", &c).as_deref(), Some("x=1&y"));
        assert_eq!(ev("base", &c).as_deref(), Some("Example.COM/p/q"));
        assert_eq!(ev("method", &c).as_deref(), Some("GET"));
        assert_eq!(ev("fe_name", &c).as_deref(), Some("fe1"));
        assert_eq!(ev("be_name", &c).as_deref(), Some("be1"));
        assert_eq!(ev("srv_name", &c), None);
        assert_eq!(ev("ssl_fc", &c).as_deref(), Some("1"));
        assert_eq!(ev("ssl_fc_sni", &c).as_deref(), Some("www.example.com"));
        assert_eq!(ev("req.ver", &c).as_deref(), Some("1.1"));
        assert_eq!(ev("req.ssl_sni", &c), None);
    }

    #[test]
    fn headers_and_converters() {
        let r = req();
        let c = ctx(&r);
        assert_eq!(ev("req.hdr(host)", &c).as_deref(), Some("Example.COM"));
        assert_eq!(ev("hdr(host),lower", &c).as_deref(), Some("example.com"));
        assert_eq!(ev("hdr(host),upper", &c).as_deref(), Some("EXAMPLE.COM"));
        assert_eq!(ev("req.hdr(x-fwd)", &c).as_deref(), Some("e"));
        assert_eq!(ev("req.hdr(x-fwd,1)", &c).as_deref(), Some("a"));
        assert_eq!(ev("req.hdr(x-fwd,3)", &c).as_deref(), Some("\"c,d\""));
        assert_eq!(ev("req.hdr(x-fwd,-2)", &c).as_deref(), Some("\"c,d\""));
        assert_eq!(ev("req.hdr(x-fwd,9)", &c), None);
        assert_eq!(ev("req.fhdr(x-fwd)", &c).as_deref(), Some("\"c,d\", e"));
        assert_eq!(ev("hdr_cnt(x-fwd)", &c).as_deref(), Some("4"));
        assert_eq!(ev("req.fhdr_cnt(x-fwd)", &c).as_deref(), Some("2"));
        assert_eq!(ev("req.hdr_val(content-length)", &c).as_deref(), Some("12"));
        assert_eq!(ev("path,length", &c).as_deref(), Some("4"));
        let e = parse_sample("req.hdr(x-fwd)").unwrap();
        let mut seen = Vec::new();
        e.any_value(&c, &mut |v| {
            seen.push(v.to_string());
            false
        });
        assert_eq!(seen, ["a", "b", "\"c,d\"", "e"]);
    }

    #[test]
    fn ssl_hello() {
        let r = req();
        let mut c = ctx(&r);
        c.ssl_hello = Some(SslHello {
            hello_type: 1,
            sni: Some("sni.test"),
            alpn: None,
        });
        assert_eq!(ev("req.ssl_sni", &c).as_deref(), Some("sni.test"));
        assert_eq!(ev("req_ssl_sni", &c).as_deref(), Some("sni.test"));
        assert_eq!(ev("req.ssl_hello_type", &c).as_deref(), Some("1"));
    }

    #[test]
    fn stick_counter_argument_errors() {
        let err = |s: &str| parse_sample(s).map(|_| ()).unwrap_err();
        for (expr, want) in [
            (
                "sc_get_gpc(x,0)",
                "failed to parse 'x' as type 'integer' at position 1",
            ),
            (
                "sc_get_gpc(0,y)",
                "failed to parse 'y' as type 'integer' at position 2",
            ),
            (
                "sc_get_gpc(0)",
                "missing arguments (got 1/2), type 'integer' expected",
            ),
            (
                "src_get_gpc(0)",
                "missing arguments (got 1/2), type 'table' expected",
            ),
            (
                "sc_get_gpc0(z)",
                "failed to parse 'z' as type 'integer' at position 1",
            ),
        ] {
            assert!(err(expr).contains(want), "{expr}: {}", err(expr));
        }
        assert!(parse_sample("sc_get_gpc(1,2)").is_ok());
        assert!(parse_sample("src_get_gpc(1,t)").is_ok());
        assert!(parse_sample("sc_get_gpc0(2,t)").is_ok());
    }

    #[test]
    fn errors_in_haproxy_words() {
        assert_eq!(
            parse_sample("foo").unwrap_err(),
            "unknown fetch method 'foo'"
        );
        assert_eq!(parse_sample("").unwrap_err(), "missing fetch method");
        assert_eq!(
            parse_sample("src(1)").unwrap_err(),
            "fetch method 'src' : expected ')' before '1)'"
        );
        assert_eq!(
            parse_sample("req.hdr(a,1,2)").unwrap_err(),
            "fetch method 'req.hdr' : expected ')' before ',2)'"
        );
        assert_eq!(
            parse_sample("req.hdr(host,x)").unwrap_err(),
            "fetch method 'req.hdr' : failed to parse 'x' as type 'integer' at position 2"
        );
        assert_eq!(
            parse_sample("hdr(host").unwrap_err(),
            "fetch method 'hdr' : expected ')'"
        );
        assert_eq!(
            parse_sample("src,foo").unwrap_err(),
            "unknown converter 'foo'"
        );
        assert_eq!(
            parse_sample("path;x").unwrap_err(),
            "missing comma after fetch keyword 'path'"
        );
    }

    #[test]
    fn prefix_stops_at_bracket() {
        let (e, end) = parse_sample_prefix("src,lower] rest").unwrap();
        assert_eq!(e.fetch, Fetch::Src);
        assert_eq!(end, 9);
    }
}
