//! The HTML statistics page of HAProxy 2.6 (`stats enable` / `stats uri`), rendered from a
//! [`Snapshot`]: same head and CSS, process information block, legend, display options, then one
//! pair of `<table class="tbl">` per proxy (title table, then the counters table with the frontend,
//! listener, server and backend rows). Row classes follow HAProxy's mapping from the server status
//! text (`active_up`, `active_down`, `maintain`, `active_draining`, `backup_*`, …), cells use
//! HAProxy's digit grouping (`<span class="rls">`) and `human_time` durations. Checked byte for
//! byte against captures of HAProxy 2.6.12 (`testdata/haproxy-2.6/stats/`).
//!
//! Also here: [`StatsRequest::parse`], the `;up`, `;norefresh`, `;csv`, `;json` and `scope=`
//! options HAProxy reads from the request URI after the `stats uri` prefix.

use crate::field::Val;
use crate::model::*;
use crate::stat::{self, Row, Scratch, StatDump, StatOpts};
use std::fmt::Write as _;
use std::net::IpAddr;

/// What the page shows and links to.
#[derive(Debug, Clone, Default)]
pub struct HtmlOpts {
    /// The `stats uri` prefix (links are built from it).
    pub uri: String,
    /// `stats refresh` in seconds, 0 when unset.
    pub refresh: u32,
    /// `stats hide-version`.
    pub hide_version: bool,
    /// Options from the request URI.
    pub req: StatsRequest,
    /// `stats admin` matched this request: checkboxes and action forms on backends.
    pub admin: bool,
    /// `stats show-legends`: tooltips on proxy, backend and server names.
    pub legends: bool,
    /// `stats show-node`: the node name after the pid in the title.
    pub node: Option<String>,
    /// `stats show-desc`: the description after it.
    pub desc: Option<String>,
}

/// Outcome of a stats page POST, carried back in `;st=<code>` and shown as a banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatStatus {
    Unkn,
    Done,
    Errp,
    Excd,
    Deny,
    None,
    Part,
    Ival,
}

const STATUS_CODES: &[(StatStatus, &str)] = &[
    (StatStatus::Unkn, "UNKN"),
    (StatStatus::Done, "DONE"),
    (StatStatus::Errp, "ERRP"),
    (StatStatus::Excd, "EXCD"),
    (StatStatus::Deny, "DENY"),
    (StatStatus::None, "NONE"),
    (StatStatus::Part, "PART"),
    (StatStatus::Ival, "IVAL"),
];

impl StatStatus {
    pub fn code(self) -> &'static str {
        STATUS_CODES
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("UNKN", |(_, c)| c)
    }

    fn from_code(c: &str) -> Option<StatStatus> {
        STATUS_CODES.iter().find(|(_, n)| *n == c).map(|(s, _)| *s)
    }

    /// The banner's class and text, as HAProxy 2.6 prints them.
    fn banner(self) -> (&'static str, &'static str) {
        match self {
            StatStatus::Done => ("active_up", "Action processed successfully."),
            StatStatus::None => ("active_going_down", "Nothing has changed."),
            StatStatus::Part => (
                "active_going_down",
                "Action partially processed.<br>Some server names are probably unknown or ambiguous (duplicated names in the backend).",
            ),
            StatStatus::Errp => (
                "active_down",
                "Action not processed because of invalid parameters.<ul><li>The action is maybe unknown.</li><li>Invalid key parameter (empty or too long).</li><li>The backend name is probably unknown or ambiguous (duplicated names).</li><li>Some server names are probably unknown or ambiguous (duplicated names in the backend).</li></ul>",
            ),
            StatStatus::Excd => (
                "active_down",
                "<b>Action not processed : the buffer couldn't store all the data.<br>You should retry with less servers at a time.</b>",
            ),
            StatStatus::Deny => ("active_down", "<b>Action denied.</b>"),
            StatStatus::Ival => (
                "active_down",
                "<b>Invalid requests (unsupported method or chunked encoded request).</b>",
            ),
            StatStatus::Unkn => ("active_no_check", "Unexpected result."),
        }
    }

    /// HAProxy's verdict once a POST was applied: `total` servers named, `altered` changed.
    pub fn of_post(total: usize, altered: usize) -> StatStatus {
        if total == 0 {
            StatStatus::None
        } else if altered == 0 {
            StatStatus::Errp
        } else if altered == total {
            StatStatus::Done
        } else {
            StatStatus::Part
        }
    }
}

/// An action of the stats page form (`action=` in the POST body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostAction {
    Ready,
    Drain,
    Maint,
    Shutdown,
    DisableHealth,
    EnableHealth,
    HealthUp,
    HealthNolb,
    HealthDown,
    DisableAgent,
    EnableAgent,
    AgentUp,
    AgentDown,
    /// The pre-1.6 names still accepted: `disable`, `enable`, `stop`, `start`.
    Disable,
    Enable,
    Stop,
    Start,
}

impl PostAction {
    fn from_name(v: &str) -> Option<PostAction> {
        Some(match v {
            "ready" => PostAction::Ready,
            "drain" => PostAction::Drain,
            "maint" => PostAction::Maint,
            "shutdown" => PostAction::Shutdown,
            "dhlth" => PostAction::DisableHealth,
            "ehlth" => PostAction::EnableHealth,
            "hrunn" => PostAction::HealthUp,
            "hnolb" => PostAction::HealthNolb,
            "hdown" => PostAction::HealthDown,
            "dagent" => PostAction::DisableAgent,
            "eagent" => PostAction::EnableAgent,
            "arunn" => PostAction::AgentUp,
            "adown" => PostAction::AgentDown,
            "disable" => PostAction::Disable,
            "enable" => PostAction::Enable,
            "stop" => PostAction::Stop,
            "start" => PostAction::Start,
            _ => return None,
        })
    }
}

/// A stats page POST body (`s=<srv>&…&action=<a>&b=<backend>`), read as HAProxy reads it: the
/// last `b` and the last `action` count, every `s` is a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostForm {
    /// `b`: a backend name or `#<id>`.
    pub backend: Option<String>,
    pub action: Option<PostAction>,
    pub servers: Vec<String>,
}

impl PostForm {
    /// Parses the body; an unknown action or an undecodable field is `Err(Errp)`.
    pub fn parse(body: &[u8]) -> Result<PostForm, StatStatus> {
        let mut f = PostForm {
            backend: None,
            action: None,
            servers: Vec::new(),
        };
        let mut action: Option<String> = None;
        for pair in body.split(|b| *b == b'&').filter(|p| !p.is_empty()) {
            let (k, v) = match pair.iter().position(|b| *b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &b""[..]),
            };
            let (Some(k), Some(v)) = (url_decode(k), url_decode(v)) else {
                return Err(StatStatus::Errp);
            };
            match k.as_str() {
                "b" => f.backend = Some(v),
                "action" => action = Some(v),
                "s" => f.servers.push(v),
                _ => {}
            }
        }
        if let Some(a) = action {
            f.action = Some(PostAction::from_name(&a).ok_or(StatStatus::Errp)?);
        }
        Ok(f)
    }
}

/// Form decoding: `%XX` escapes and `+` as a space; None on a bad escape or non-UTF-8 text.
fn url_decode(s: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                let txt = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(txt, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Output format asked in the request URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatsFormat {
    #[default]
    Html,
    Csv,
    Json,
}

/// The options HAProxy looks for after the `stats uri` prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsRequest {
    pub format: StatsFormat,
    /// `;up`: hide DOWN and MAINT servers.
    pub hide_down: bool,
    /// `;norefresh`: no `Refresh` header even with `stats refresh`.
    pub no_refresh: bool,
    /// `scope=<text>`: only proxies whose name contains it (case-insensitive).
    pub scope: String,
    /// `;st=<code>`: the outcome of the POST that redirected here.
    pub status: Option<StatStatus>,
}

/// HAProxy caps the scope text at 20 bytes (`STAT_SCOPE_TXT_MAXLEN`).
const SCOPE_MAX: usize = 20;

impl StatsRequest {
    /// Reads the options in `rest`, the request target after the `stats uri` prefix. Like
    /// HAProxy, each `;word` is searched anywhere in it; `;json` and `;csv` pick the format.
    pub fn parse(rest: &str) -> StatsRequest {
        let mut r = StatsRequest {
            hide_down: rest.contains(";up"),
            no_refresh: rest.contains(";norefresh"),
            ..StatsRequest::default()
        };
        if rest.contains(";csv") {
            r.format = StatsFormat::Csv;
        } else if rest.contains(";json") {
            r.format = StatsFormat::Json;
        }
        if let Some(at) = rest.find(";st=") {
            r.status = rest
                .get(at + 4..at + 8)
                .map(|c| StatStatus::from_code(c).unwrap_or(StatStatus::Unkn));
        }
        if let Some(at) = rest.find("scope=") {
            let v = rest.get(at + 6..).unwrap_or("");
            // Keep to characters that cannot break the page (HAProxy only keeps a proxy-name
            // alphabet too); stop at the next parameter.
            r.scope = v
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
                .take(SCOPE_MAX)
                .collect();
        }
        r
    }

    /// `show stat` options matching this request (`;up` hides DOWN servers).
    pub fn stat_opts(&self) -> StatOpts {
        StatOpts {
            format: match self.format {
                StatsFormat::Json => stat::StatFormat::Json,
                _ => stat::StatFormat::Csv,
            },
            hide_down: self.hide_down,
            ..StatOpts::default()
        }
    }

    /// Whether the proxy named `name` is within `scope=` (HTML, CSV and JSON alike).
    pub fn scope_allows(&self, name: &str) -> bool {
        self.scope.is_empty()
            || name
                .to_ascii_lowercase()
                .contains(&self.scope.to_ascii_lowercase())
    }
}

/// HAProxy's `ulltoh`: the digit before each group of three is wrapped in a letter-spaced span.
pub fn push_u2h(n: u64, out: &mut String) {
    let digits = n.to_string();
    let len = digits.len();
    for (i, ch) in digits.chars().enumerate() {
        let from_right = len - 1 - i;
        if from_right > 0 && from_right.is_multiple_of(3) {
            out.push_str("<span class=\"rls\">");
            out.push(ch);
            out.push_str("</span>");
        } else {
            out.push(ch);
        }
    }
}

fn u2h(n: u64) -> String {
    let mut s = String::new();
    push_u2h(n, &mut s);
    s
}

/// HAProxy's `human_time(t, 1)`: at most two units among d/h/m/s, `0s` for zero, `?` if negative.
pub fn human_time(t: i64) -> String {
    if t < 0 {
        return "?".into();
    }
    let mut out = String::new();
    let mut left = 2;
    if t >= 86400 {
        let _ = write!(out, "{}d", t / 86400);
        left -= 1;
    }
    if left > 0 && t % 86400 / 3600 != 0 {
        let _ = write!(out, "{}h", t % 86400 / 3600);
        left -= 1;
    }
    if left > 0 && t % 3600 / 60 != 0 {
        let _ = write!(out, "{}m", t % 3600 / 60);
        left -= 1;
    }
    if (left > 0 && t % 60 != 0) || t == 0 {
        let _ = write!(out, "{}s", t % 60);
    }
    out
}

/// Minimal HTML escaping for text HAProxy passes through `chunk_htmlencode`.
fn push_esc(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn esc(s: &str) -> String {
    let mut o = String::new();
    push_esc(s, &mut o);
    o
}

// `show stat` column positions the page reads.
const QCUR: usize = 2;
const QMAX: usize = 3;
const SCUR: usize = 4;
const SMAX: usize = 5;
const SLIM: usize = 6;
const STOT: usize = 7;
const BIN: usize = 8;
const BOUT: usize = 9;
const DREQ: usize = 10;
const DRESP: usize = 11;
const EREQ: usize = 12;
const ECON: usize = 13;
const ERESP: usize = 14;
const WRETR: usize = 15;
const WREDIS: usize = 16;
const STATUS: usize = 17;
const WEIGHT: usize = 18;
const ACT: usize = 19;
const BCK: usize = 20;
const CHKFAIL: usize = 21;
const CHKDOWN: usize = 22;
const LASTCHG: usize = 23;
const DOWNTIME: usize = 24;
const QLIMIT: usize = 25;
const THROTTLE: usize = 29;
const LBTOT: usize = 30;
const TRACKED: usize = 31;
const RATE: usize = 33;
const RATE_LIM: usize = 34;
const RATE_MAX: usize = 35;
const CHECK_STATUS: usize = 36;
const CHECK_CODE: usize = 37;
const CHECK_DURATION: usize = 38;
const HRSP_1XX: usize = 39;
const HANAFAIL: usize = 45;
const REQ_RATE: usize = 46;
const REQ_RATE_MAX: usize = 47;
const REQ_TOT: usize = 48;
const CLI_ABRT: usize = 49;
const SRV_ABRT: usize = 50;
const COMP_IN: usize = 51;
const COMP_OUT: usize = 52;
const COMP_BYP: usize = 53;
const COMP_RSP: usize = 54;
const LASTSESS: usize = 55;
const LAST_CHK: usize = 56;
const LAST_AGT: usize = 57;
const QTIME: usize = 58;
const CTIME: usize = 59;
const RTIME: usize = 60;
const TTIME: usize = 61;
const AGENT_STATUS: usize = 62;
const AGENT_CODE: usize = 63;
const AGENT_DURATION: usize = 64;
const CHECK_DESC: usize = 65;
const AGENT_DESC: usize = 66;
const CHECK_RISE: usize = 67;
const CHECK_FALL: usize = 68;
const CHECK_HEALTH: usize = 69;
const AGENT_HEALTH: usize = 72;
const MODE: usize = 75;
const CONN_RATE: usize = 77;
const CONN_RATE_MAX: usize = 78;
const CONN_TOT: usize = 79;
const INTERCEPTED: usize = 80;
const WREW: usize = 83;
const CONNECT: usize = 84;
const REUSE: usize = 85;
const CACHE_LOOKUPS: usize = 86;
const CACHE_HITS: usize = 87;
const SRV_ICUR: usize = 88;
const SRV_ILIM: usize = 89;
const QT_MAX: usize = 90;
const CT_MAX: usize = 91;
const RT_MAX: usize = 92;
const TT_MAX: usize = 93;
const EINT: usize = 94;
const IDLE_CONN_CUR: usize = 95;
const SAFE_CONN_CUR: usize = 96;
const USED_CONN_CUR: usize = 97;
const NEED_CONN_EST: usize = 98;
const UWEIGHT: usize = 99;

/// Read access to a row's fields with HAProxy's conversions.
struct F<'r, 'a>(&'r Row<'a>);

impl F<'_, '_> {
    fn v(&self, i: usize) -> Val<'_> {
        self.0.get(i).copied().unwrap_or(Val::Empty)
    }
    /// Numeric value, 0 when empty.
    fn n(&self, i: usize) -> u64 {
        match self.v(i) {
            Val::U(u) => u,
            Val::I(v) => u64::try_from(v).unwrap_or(0),
            _ => 0,
        }
    }
    fn i(&self, i: usize) -> i64 {
        match self.v(i) {
            Val::U(u) => i64::try_from(u).unwrap_or(i64::MAX),
            Val::I(v) => v,
            _ => 0,
        }
    }
    fn s(&self, i: usize) -> &str {
        match self.v(i) {
            Val::S(s) => s,
            _ => "",
        }
    }
    fn set(&self, i: usize) -> bool {
        !self.v(i).is_empty()
    }
    fn h(&self, i: usize) -> String {
        u2h(self.n(i))
    }
    /// `LIM2A`: the number, or `alt` when 0.
    fn lim(&self, i: usize, alt: &str) -> String {
        match self.n(i) {
            0 => alt.to_string(),
            v => v.to_string(),
        }
    }
    fn http(&self) -> bool {
        self.s(MODE) == "http"
    }
}

/// Tooltip rows shared by FRONTEND and BACKEND: requests and the response classes.
fn push_http_responses(f: &F, out: &mut String) {
    let _ = write!(
        out,
        "<tr><th>Cum. HTTP requests:</th><td>{}</td></tr>\
<tr><th>- HTTP 1xx responses:</th><td>{}</td></tr>\
<tr><th>- HTTP 2xx responses:</th><td>{}</td></tr>\
<tr><th>&nbsp;&nbsp;Compressed 2xx:</th><td>{}</td><td>({}%)</td></tr>\
<tr><th>- HTTP 3xx responses:</th><td>{}</td></tr>\
<tr><th>- HTTP 4xx responses:</th><td>{}</td></tr>\
<tr><th>- HTTP 5xx responses:</th><td>{}</td></tr>\
<tr><th>- other responses:</th><td>{}</td></tr>",
        f.h(REQ_TOT),
        f.h(HRSP_1XX),
        f.h(HRSP_1XX + 1),
        f.h(COMP_RSP),
        pct(f.n(COMP_RSP), f.n(HRSP_1XX + 1)),
        f.h(HRSP_1XX + 2),
        f.h(HRSP_1XX + 3),
        f.h(HRSP_1XX + 4),
        f.h(HRSP_1XX + 5),
    );
}

/// Tooltip rows shared by FRONTEND and BACKEND: cache, rewrites, internal errors.
fn push_cache_and_errors(f: &F, out: &mut String) {
    let _ = write!(
        out,
        "<tr><th>Cache lookups:</th><td>{}</td></tr>\
<tr><th>Cache hits:</th><td>{}</td><td>({}%)</td></tr>\
<tr><th>Failed hdr rewrites:</th><td>{}</td></tr>\
<tr><th>Internal errors:</th><td>{}</td></tr>",
        f.h(CACHE_LOOKUPS),
        f.h(CACHE_HITS),
        pct(f.n(CACHE_HITS), f.n(CACHE_LOOKUPS)),
        f.h(WREW),
        f.h(EINT)
    );
}

fn pct(part: u64, whole: u64) -> u64 {
    part.saturating_mul(100).checked_div(whole).unwrap_or(0)
}

/// The page head and style sheet, as HAProxy 2.6 sends them.
const HEAD: &str = r##"<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN"
"http://www.w3.org/TR/html4/loose.dtd">
<html><head><title>Statistics Report for HAProxy</title>
<link rel="icon" href="data:,">
<meta http-equiv="content-type" content="text/html; charset=iso-8859-1">
<style type="text/css"><!--
body { font-family: arial, helvetica, sans-serif; font-size: 12px; font-weight: normal; color: black; background: white;}
th,td { font-size: 10px;}
h1 { font-size: x-large; margin-bottom: 0.5em;}
h2 { font-family: helvetica, arial; font-size: x-large; font-weight: bold; font-style: italic; color: #6020a0; margin-top: 0em; margin-bottom: 0em;}
h3 { font-family: helvetica, arial; font-size: 16px; font-weight: bold; color: #b00040; background: #e8e8d0; margin-top: 0em; margin-bottom: 0em;}
li { margin-top: 0.25em; margin-right: 2em;}
.hr {margin-top: 0.25em; border-color: black; border-bottom-style: solid;}
.titre	{background: #20D0D0;color: #000000; font-weight: bold; text-align: center;}
.total	{background: #20D0D0;color: #ffff80;}
.frontend	{background: #e8e8d0;}
.socket	{background: #d0d0d0;}
.backend	{background: #e8e8d0;}
.active_down		{background: #ff9090;}
.active_going_up		{background: #ffd020;}
.active_going_down	{background: #ffffa0;}
.active_up		{background: #c0ffc0;}
.active_nolb		{background: #20a0ff;}
.active_draining		{background: #20a0FF;}
.active_no_check		{background: #e0e0e0;}
.backup_down		{background: #ff9090;}
.backup_going_up		{background: #ff80ff;}
.backup_going_down	{background: #c060ff;}
.backup_up		{background: #b0d0ff;}
.backup_nolb		{background: #90b0e0;}
.backup_draining		{background: #cc9900;}
.backup_no_check		{background: #e0e0e0;}
.maintain	{background: #c07820;}
.rls      {letter-spacing: 0.2em; margin-right: 1px;}

a.px:link {color: #ffff40; text-decoration: none;}a.px:visited {color: #ffff40; text-decoration: none;}a.px:hover {color: #ffffff; text-decoration: none;}a.lfsb:link {color: #000000; text-decoration: none;}a.lfsb:visited {color: #000000; text-decoration: none;}a.lfsb:hover {color: #505050; text-decoration: none;}
table.tbl { border-collapse: collapse; border-style: none;}
table.tbl td { text-align: right; border-width: 1px 1px 1px 1px; border-style: solid solid solid solid; padding: 2px 3px; border-color: gray; white-space: nowrap;}
table.tbl td.ac { text-align: center;}
table.tbl th { border-width: 1px; border-style: solid solid solid solid; border-color: gray;}
table.tbl th.pxname { background: #b00040; color: #ffff40; font-weight: bold; border-style: solid solid none solid; padding: 2px 3px; white-space: nowrap;}
table.tbl th.empty { border-style: none; empty-cells: hide; background: white;}
table.tbl th.desc { background: white; border-style: solid solid none solid; text-align: left; padding: 2px 3px;}

table.lgd { border-collapse: collapse; border-width: 1px; border-style: none none none solid; border-color: black;}
table.lgd td { border-width: 1px; border-style: solid solid solid solid; border-color: gray; padding: 2px;}
table.lgd td.noborder { border-style: none; padding: 2px; white-space: nowrap;}
table.det { border-collapse: collapse; border-style: none; }
table.det th { text-align: left; border-width: 0px; padding: 0px 1px 0px 0px; font-style:normal;font-size:11px;font-weight:bold;font-family: sans-serif;}
table.det td { text-align: right; border-width: 0px; padding: 0px 0px 0px 4px; white-space: nowrap; font-style:normal;font-size:11px;font-weight:normal;}
u {text-decoration:none; border-bottom: 1px dotted black;}
div.tips {
 display:block;
 visibility:hidden;
 z-index:2147483647;
 position:absolute;
 padding:2px 4px 3px;
 background:#f0f060; color:#000000;
 border:1px solid #7040c0;
 white-space:nowrap;
 font-style:normal;font-size:11px;font-weight:normal;
 -moz-border-radius:3px;-webkit-border-radius:3px;border-radius:3px;
 -moz-box-shadow:gray 2px 2px 3px;-webkit-box-shadow:gray 2px 2px 3px;box-shadow:gray 2px 2px 3px;
}
u:hover div.tips {visibility:visible;}
@media (prefers-color-scheme: dark) {
 body { font-family: arial, helvetica, sans-serif; font-size: 12px; font-weight: normal; color: #e8e6e3; background: #131516;}
 h1 { color: #a265e0!important; }
 h2 { color: #a265e0; }
 h3 { color: #ff5190; background-color: #3e3e1f; }
 a { color: #3391ff; }
 input { background-color: #2f3437; }
 .hr { border-color: #8c8273; }
 .titre { background-color: #1aa6a6; color: #e8e6e3; }
 .frontend {background: #2f3437;}
 .socket	{background: #2a2d2f;}
 .backend {background: #2f3437;}
 .active_down {background: #760000;}
 .active_going_up {background: #b99200;}
 .active_going_down {background: #6c6c00;}
 .active_up {background: #165900;}
 .active_nolb {background: #006ab9;}
 .active_draining {background: #006ab9;}
 .active_no_check {background: #2a2d2f;}
 .backup_down {background: #760000;}
 .backup_going_up {background: #7f007f;}
 .backup_going_down {background: #580092;}
 .backup_up {background: #2e3234;}
 .backup_nolb {background: #1e3c6a;}
 .backup_draining {background: #a37a00;}
 .backup_no_check {background: #2a2d2f;}
 .maintain {background: #9a601a;}
 a.px:link {color: #d8d83b; text-decoration: none;}
 a.px:visited {color: #d8d83b; text-decoration: none;}
 a.px:hover {color: #ffffff; text-decoration: none;}
 a.lfsb:link {color: #e8e6e3; text-decoration: none;}
 a.lfsb:visited {color: #e8e6e3; text-decoration: none;}
 a.lfsb:hover {color: #b5afa6; text-decoration: none;}
 table.tbl th.empty { background-color: #181a1b; }
 table.tbl th.desc { background: #181a1b; }
 table.tbl th.pxname { background-color: #8d0033; color: #ffff46; }
 table.tbl th { border-color: #808080; }
 table.tbl td { border-color: #808080; }
 u {text-decoration:none; border-bottom: 1px dotted #e8e6e3;}
 div.tips {
  background:#8e8e0d;
  color:#e8e6e3;
  border-color: #4e2c86;
  -moz-box-shadow: #60686c 2px 2px 3px;
  -webkit-box-shadow: #60686c 2px 2px 3px;
  box-shadow: #60686c 2px 2px 3px;
 }
}
-->
</style></head>
"##;

const LEGEND: &str = "<table class=\"lgd\"><tr>\n\
<td class=\"active_up\">&nbsp;</td><td class=\"noborder\">active UP </td><td class=\"backup_up\">&nbsp;</td><td class=\"noborder\">backup UP </td></tr><tr>\n\
<td class=\"active_going_down\"></td><td class=\"noborder\">active UP, going down </td><td class=\"backup_going_down\"></td><td class=\"noborder\">backup UP, going down </td></tr><tr>\n\
<td class=\"active_going_up\"></td><td class=\"noborder\">active DOWN, going up </td><td class=\"backup_going_up\"></td><td class=\"noborder\">backup DOWN, going up </td></tr><tr>\n\
<td class=\"active_down\"></td><td class=\"noborder\">active or backup DOWN &nbsp;</td><td class=\"active_no_check\"></td><td class=\"noborder\">not checked </td></tr><tr>\n\
<td class=\"maintain\"></td><td class=\"noborder\" colspan=\"3\">active or backup DOWN for maintenance (MAINT) &nbsp;</td></tr><tr>\n\
<td class=\"active_draining\"></td><td class=\"noborder\" colspan=\"3\">active or backup SOFT STOPPED for maintenance &nbsp;</td></tr></table>\n\
Note: \"NOLB\"/\"DRAIN\" = UP with load-balancing disabled.</td>";

const COLUMN_HEADS: &str = "<th rowspan=2></th><th colspan=3>Queue</th><th colspan=3>Session rate</th><th colspan=6>Sessions</th><th colspan=2>Bytes</th><th colspan=2>Denied</th><th colspan=3>Errors</th><th colspan=2>Warnings</th><th colspan=9>Server</th></tr>\n\
<tr class=\"titre\"><th>Cur</th><th>Max</th><th>Limit</th><th>Cur</th><th>Max</th><th>Limit</th><th>Cur</th><th>Max</th><th>Limit</th><th>Total</th><th>LbTot</th><th>Last</th><th>In</th><th>Out</th><th>Req</th><th>Resp</th><th>Req</th><th>Conn</th><th>Resp</th><th>Retr</th><th>Redis</th><th>Status</th><th>LastChk</th><th>Wght</th><th>Act</th><th>Bck</th><th>Chk</th><th>Dwn</th><th>Dwntme</th><th>Thrtle</th>\n</tr>";

/// The whole page (the body of the 200 response).
pub fn render_html(snap: &Snapshot, o: &HtmlOpts, out: &mut String) {
    out.push_str(HEAD);
    push_info(&snap.info, o, out);
    let sopts = StatOpts {
        hide_down: o.req.hide_down,
        ..StatOpts::default()
    };
    let filter = StatDump::new(sopts);
    let mut sc = Scratch::default();
    for px in &snap.proxies {
        if px.disabled || (px.frontend.is_none() && px.backend.is_none()) {
            continue;
        }
        if !o.req.scope_allows(&px.name) {
            continue;
        }
        // HAProxy 2.6: in admin mode every table gains a first column; a backend with servers
        // is wrapped in a form with a checkbox per server and the action list.
        let form = o.admin && px.backend.is_some() && !px.servers.is_empty();
        if form {
            out.push_str("<form method=\"post\">");
        }
        let admin_th = match (o.admin, form) {
            (false, _) => String::new(),
            (true, false) => "<th rowspan=2></th>".to_string(),
            (true, true) => format!(
                "<th rowspan=2 width=1><input type=\"checkbox\" onclick=\"for(c in document.getElementsByClassName('{n}-checkbox')) document.getElementsByClassName('{n}-checkbox').item(c).checked = this.checked\"></th>",
                n = esc(&px.name)
            ),
        };
        let legend = o.legends.then(|| {
            let cap = match (px.frontend.is_some(), px.backend.is_some()) {
                (true, true) => "proxy",
                (true, false) => "frontend",
                _ => "backend",
            };
            format!("cap: {cap}, mode: {}, id: {}", px.mode.as_str(), px.id)
        });
        push_px_head(&px.name, &admin_th, legend.as_deref(), out);
        let empty_cell = if o.admin { "<td></td>" } else { "" };
        if let Some(fe) = &px.frontend {
            let at = out.len();
            frontend_html(&F(&stat::frontend_row(px, fe)), out);
            admin_cell(out, at, empty_cell);
            if px.socket_stats {
                for li in &px.listeners {
                    let at = out.len();
                    listener_html(&F(&stat::listener_row(px, li, false)), out);
                    admin_cell(out, at, empty_cell);
                }
            }
        }
        if let Some(be) = &px.backend {
            for sv in &px.servers {
                if !filter.server_shown(snap, sv) {
                    continue;
                }
                sc.clear();
                let at = out.len();
                server_html(&F(&stat::server_row(snap, px, sv, &sopts, &mut sc)), out);
                if o.legends {
                    let addr = match sv.addr {
                        Some(IpAddr::V4(a)) => format!("IPv4: {a}:{}, ", sv.port),
                        Some(IpAddr::V6(a)) => format!("IPv6: [{a}]:{}, ", sv.port),
                        None => String::new(),
                    };
                    let cookie = sv
                        .cookie
                        .as_deref()
                        .map_or(String::new(), |c| format!(", cookie: '{}'", esc(c)));
                    let tips = format!("{addr}id: {}{cookie}", sv.id);
                    legend_name(out, at, "<a class=lfsb href=", &tips);
                }
                if o.admin {
                    let cell = format!(
                        "<td><input class='{}-checkbox' type=\"checkbox\" name=\"s\" value=\"{}\"></td>",
                        esc(&px.name),
                        esc(&sv.name)
                    );
                    admin_cell(out, at, &cell);
                }
            }
            sc.clear();
            let row = stat::backend_row(px, be, &sopts, &mut sc.status);
            let at = out.len();
            backend_html(&F(&row), out);
            if o.legends {
                legend_name(out, at, "<a name=", &format!("balancing: {}", be.algo));
            }
            admin_cell(out, at, empty_cell);
        }
        if form {
            let _ = writeln!(
                out,
                "</table>Choose the action to perform on the checked servers : <select name=action>{ADMIN_ACTIONS}</select><input type=\"hidden\" name=\"b\" value=\"#{}\">&nbsp;<input type=\"submit\" value=\"Apply\"></form><p>",
                px.id
            );
        } else {
            out.push_str("</table><p>\n");
        }
    }
    out.push_str("</body></html>\n");
}

fn push_info(i: &ProcessInfo, o: &HtmlOpts, out: &mut String) {
    let version = if o.hide_version {
        String::new()
    } else {
        format!(" version {}, released {}", i.version, i.release_date)
    };
    let up = i.uptime_secs;
    let memmax = if i.memmax_mb == 0 {
        "unlimited".to_string()
    } else {
        format!("{} MB", i.memmax_mb)
    };
    // Bytes/s to bits/s on the wire: Ethernet framing of full TCP segments (1538 per 1448).
    let bps = i.bytes_out_rate.saturating_mul(8).saturating_mul(1538) / 1448;
    let (rate, unit) = if bps >= 1_000_000_000 {
        (bps as f64 / 1e9, 'G')
    } else if bps >= 1_000_000 {
        (bps as f64 / 1e6, 'M')
    } else {
        (bps as f64 / 1e3, 'k')
    };
    let _ = write!(
        out,
        "<body><h1><a href=\"http://www.haproxy.org/\" style=\"text-decoration: none;\">HAProxy{version}</a></h1>\n\
<h2>Statistics Report for pid {pid}{node}{desc}</h2>\n\
<hr width=\"100%\" class=\"hr\">\n\
<h3>&gt; General process information</h3>\n\
<table border=0><tr><td align=\"left\" nowrap width=\"1%\">\n\
<p><b>pid = </b> {pid} (process #1, nbproc = 1, nbthread = {nbthread})<br>\n\
<b>uptime = </b> {d}d {h}h{m:02}m{s:02}s<br>\n\
<b>system limits:</b> memmax = {memmax}; ulimit-n = {ulimit}<br>\n\
<b>maxsock = </b> {maxsock}; <b>maxconn = </b> {maxconn}; <b>maxpipes = </b> {maxpipes}<br>\n\
current conns = {conns}; current pipes = {pu}/{pt}; conn rate = {cr}/sec; bit rate = {rate:.3} {unit}bps<br>\n\
Running tasks: {rq}/{tasks}; idle = {idle} %<br>\n\
</td><td align=\"center\" nowrap>\n{LEGEND}\
<td align=\"left\" valign=\"top\" nowrap width=\"1%\"><b>Display option:</b><ul style=\"margin-top: 0.25em;\">",
        pid = i.pid,
        // Configuration text, printed as HAProxy does (unescaped).
        node = o
            .node
            .as_deref()
            .map_or(String::new(), |n| format!(" on {n}")),
        desc = o
            .desc
            .as_deref()
            .map_or(String::new(), |d| format!(": {d}")),
        nbthread = i.nbthread,
        d = up / 86400,
        h = up % 86400 / 3600,
        m = up % 3600 / 60,
        s = up % 60,
        ulimit = i.ulimit_n,
        maxsock = i.maxsock,
        maxconn = i.maxconn,
        maxpipes = i.maxpipes,
        conns = i.curr_conns,
        pu = i.pipes_used,
        pt = i.pipes_used.saturating_add(i.pipes_free),
        cr = i.conn_rate,
        rq = i.run_queue,
        tasks = i.tasks,
        idle = i.idle_pct,
    );
    let r = &o.req;
    let uri = esc(&o.uri);
    let scope_txt = if r.scope.is_empty() {
        String::new()
    } else {
        format!(";scope={}", esc(&r.scope))
    };
    let _ = writeln!(
        out,
        "<li><form method=\"GET\">Scope : <input value=\"{}\" name=\"scope\" size=\"8\" maxlength=\"{SCOPE_MAX}\" tabindex=\"1\"/></form>",
        esc(&r.scope)
    );
    let norefresh = if r.no_refresh { ";norefresh" } else { "" };
    let up_opt = if r.hide_down { ";up" } else { "" };
    if r.hide_down {
        let _ = writeln!(
            out,
            "<li><a href=\"{uri}{norefresh}{scope_txt}\">Show all servers</a><br>"
        );
    } else {
        let _ = writeln!(
            out,
            "<li><a href=\"{uri};up{norefresh}{scope_txt}\">Hide 'DOWN' servers</a><br>"
        );
    }
    if o.refresh > 0 {
        if r.no_refresh {
            let _ = writeln!(
                out,
                "<li><a href=\"{uri}{up_opt}{scope_txt}\">Enable refresh</a><br>"
            );
        } else {
            let _ = writeln!(
                out,
                "<li><a href=\"{uri}{up_opt};norefresh{scope_txt}\">Disable refresh</a><br>"
            );
        }
    }
    let _ = writeln!(
        out,
        "<li><a href=\"{uri}{up_opt}{norefresh}{scope_txt}\">Refresh now</a><br>"
    );
    let nr = if o.refresh > 0 { ";norefresh" } else { "" };
    let _ = writeln!(
        out,
        "<li><a href=\"{uri};csv{nr}{scope_txt}\">CSV export</a><br>"
    );
    let _ = writeln!(
        out,
        "<li><a href=\"{uri};json{nr}{scope_txt}\">JSON export</a> (<a href=\"{uri};json-schema\">schema</a>)<br>"
    );
    out.push_str(
        "</ul></td><td align=\"left\" valign=\"top\" nowrap width=\"1%\"><b>External resources:</b><ul style=\"margin-top: 0.25em;\">\n\
<li><a href=\"http://www.haproxy.org/\">Primary site</a><br>\n\
<li><a href=\"http://www.haproxy.org/#down\">Updates (v2.6)</a><br>\n\
<li><a href=\"http://www.haproxy.org/#docs\">Online manual</a><br>\n\
</ul></td></tr></table>\n",
    );
    if let Some(st) = r.status {
        let (class, text) = st.banner();
        let _ = write!(
            out,
            "<p><div class={class}><a class=lfsb href=\"{uri}{up_opt}{norefresh}{scope_txt}\" title=\"Remove this message\">[X]</a> {text}</div>\n<p>\n"
        );
    }
}

/// The stats page's action list (admin mode).
const ADMIN_ACTIONS: &str = "<option value=\"\"></option><option value=\"ready\">Set state to READY</option><option value=\"drain\">Set state to DRAIN</option><option value=\"maint\">Set state to MAINT</option><option value=\"dhlth\">Health: disable checks</option><option value=\"ehlth\">Health: enable checks</option><option value=\"hrunn\">Health: force UP</option><option value=\"hnolb\">Health: force NOLB</option><option value=\"hdown\">Health: force DOWN</option><option value=\"dagent\">Agent: disable checks</option><option value=\"eagent\">Agent: enable checks</option><option value=\"arunn\">Agent: force UP</option><option value=\"adown\">Agent: force DOWN</option><option value=\"shutdown\">Kill Sessions</option>";

/// Puts the admin-mode first cell right after the `<tr …>` that starts at `at`.
fn admin_cell(out: &mut String, at: usize, cell: &str) {
    if cell.is_empty() {
        return;
    }
    if let Some(i) = out.get(at..).and_then(|r| r.find('>')) {
        out.insert_str(at + i + 1, cell);
    }
}

/// `stats show-legends` on a row written from `at`: the name cell, from `from` to its `</td>`,
/// is underlined with the tooltip `tips` at its end (HAProxy 2.6's layout).
fn legend_name(out: &mut String, at: usize, from: &str, tips: &str) {
    let Some(start) = out.get(at..).and_then(|r| r.find(from)).map(|i| at + i) else {
        return;
    };
    let Some(end) = out
        .get(start..)
        .and_then(|r| r.find("</td>"))
        .map(|i| start + i)
    else {
        return;
    };
    out.insert_str(end, &format!("<div class=tips>{tips}</div></u>"));
    out.insert_str(start, "<u>");
}

fn push_px_head(name: &str, admin_th: &str, legend: Option<&str>, out: &mut String) {
    let (u, tips) = match legend {
        Some(l) => ("<u>", format!("<div class=tips>{l}</div></u>")),
        None => ("", String::new()),
    };
    let _ = write!(
        out,
        "<table class=\"tbl\" width=\"100%\">\n\
<tr class=\"titre\"><th class=\"pxname\" width=\"10%\"><a name=\"{name}\"></a>{u}<a class=px href=\"#{name}\">{name}</a>{tips}</th><th class=\"empty\" width=\"90%\"></th></tr>\n\
</table>\n\
<table class=\"tbl\" width=\"100%\">\n\
<tr class=\"titre\">{admin_th}{COLUMN_HEADS}"
    );
}

/// Bytes-out cell with the compression tooltip (underlined only when compression was used).
fn bytes_out_cell(f: &F, out: &mut String) {
    let comp = f.n(COMP_IN) != 0 || f.n(COMP_BYP) != 0;
    let saved = f.n(COMP_IN).saturating_sub(f.n(COMP_OUT));
    let _ = write!(
        out,
        "<td>{}{}<div class=tips><table class=det><tr><th>Response bytes in:</th><td>{}</td></tr>\
<tr><th>Compression in:</th><td>{}</td></tr>\
<tr><th>Compression out:</th><td>{}</td><td>({}%)</td></tr>\
<tr><th>Compression bypass:</th><td>{}</td></tr>\
<tr><th>Total bytes saved:</th><td>{}</td><td>({}%)</td></tr></table></div>{}</td>",
        if comp { "<u>" } else { "" },
        f.h(BOUT),
        f.h(BOUT),
        f.h(COMP_IN),
        f.h(COMP_OUT),
        pct(f.n(COMP_OUT), f.n(COMP_IN)),
        f.h(COMP_BYP),
        u2h(saved),
        pct(saved, f.n(BOUT)),
        if comp { "</u>" } else { "" },
    );
}

fn frontend_html(f: &F, out: &mut String) {
    let px = f.s(0);
    let http = f.http();
    let _ = write!(
        out,
        "<tr class=\"frontend\"><td class=ac><a name=\"{px}/Frontend\"></a><a class=lfsb href=\"#{px}/Frontend\">Frontend</a></td><td colspan=3></td>\
<td><u>{}<div class=tips><table class=det><tr><th>Current connection rate:</th><td>{}/s</td></tr><tr><th>Current session rate:</th><td>{}/s</td></tr>",
        f.h(RATE),
        f.h(CONN_RATE),
        f.h(RATE)
    );
    if http {
        let _ = write!(
            out,
            "<tr><th>Current request rate:</th><td>{}/s</td></tr>",
            f.h(REQ_RATE)
        );
    }
    let _ = write!(
        out,
        "</table></div></u></td><td><u>{}<div class=tips><table class=det><tr><th>Max connection rate:</th><td>{}/s</td></tr><tr><th>Max session rate:</th><td>{}/s</td></tr>",
        f.h(RATE_MAX),
        f.h(CONN_RATE_MAX),
        f.h(RATE_MAX)
    );
    if http {
        let _ = write!(
            out,
            "<tr><th>Max request rate:</th><td>{}/s</td></tr>",
            f.h(REQ_RATE_MAX)
        );
    }
    let _ = write!(
        out,
        "</table></div></u></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td><u>{}<div class=tips><table class=det><tr><th>Cum. connections:</th><td>{}</td></tr><tr><th>Cum. sessions:</th><td>{}</td></tr>",
        f.lim(RATE_LIM, "-"),
        f.h(SCUR),
        f.h(SMAX),
        f.h(SLIM),
        f.h(STOT),
        f.h(CONN_TOT),
        f.h(STOT)
    );
    if http {
        push_http_responses(f, out);
        let _ = write!(
            out,
            "<tr><th>Intercepted requests:</th><td>{}</td></tr>",
            f.h(INTERCEPTED)
        );
        push_cache_and_errors(f, out);
    }
    let _ = write!(
        out,
        "</table></div></u></td><td></td><td></td><td>{}</td>",
        f.h(BIN)
    );
    bytes_out_cell(f, out);
    let _ = write!(
        out,
        "<td>{}</td><td>{}</td><td>{}</td><td></td><td></td><td></td><td></td><td class=ac>{}</td><td class=ac colspan=8></td></tr>",
        f.h(DREQ),
        f.h(DRESP),
        f.h(EREQ),
        f.s(STATUS)
    );
}

fn listener_html(f: &F, out: &mut String) {
    let (px, li) = (f.s(0), f.s(1));
    let _ = write!(
        out,
        "<tr class=socket><td class=ac><a name=\"{px}/+{li}\"></a><a class=lfsb href=\"#{px}/+{li}\">{li}</a></td><td colspan=3></td>\
<td colspan=3>&nbsp;</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>&nbsp;</td><td>&nbsp;</td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td><td>{}</td><td></td><td></td><td></td><td></td><td class=ac>{}</td><td class=ac colspan=8></td></tr>",
        f.h(SCUR),
        f.h(SMAX),
        f.h(SLIM),
        f.h(STOT),
        f.h(BIN),
        f.h(BOUT),
        f.h(DREQ),
        f.h(DRESP),
        f.h(EREQ),
        f.s(STATUS)
    );
}

/// The CSS class of a server row, from its status text, health and weight (HAProxy's rules:
/// MAINT wins; `DOWN x/y` is going up; `UP x/y` is going down; UP with weight 0 is draining).
pub fn server_row_class(
    status: &str,
    backup: bool,
    checked: bool,
    full_health: bool,
    weight: u64,
) -> String {
    if status.starts_with("MAINT") {
        return "maintain".into();
    }
    let style = if status == "DOWN" || status == "DOWN (agent)" {
        "down"
    } else if status.starts_with("DOWN ") {
        "going_up"
    } else if status == "DRAIN" {
        "draining"
    } else if status.starts_with("NOLB ") {
        "going_down"
    } else if status == "NOLB" {
        "nolb"
    } else if status == "no check" {
        "no_check"
    } else if !checked || full_health {
        if weight > 0 { "up" } else { "draining" }
    } else {
        "going_down"
    };
    format!("{}_{style}", if backup { "backup" } else { "active" })
}

fn push_check_cell(
    f: &F,
    status_i: usize,
    code_i: usize,
    dur_i: usize,
    desc_i: usize,
    last_i: usize,
    out: &mut String,
) {
    let _ = write!(out, "</td><td class=ac><u> {}", f.s(status_i));
    if f.set(code_i) {
        let _ = write!(out, "/{}", f.n(code_i));
    }
    if f.set(dur_i) {
        let _ = write!(out, " in {}ms", f.n(dur_i));
    }
    let _ = write!(out, "<div class=tips>{}", f.s(desc_i));
    if !f.s(last_i).is_empty() {
        out.push_str(": ");
        push_esc(f.s(last_i), out);
    }
    out.push_str("</div></u>");
}

fn server_html(f: &F, out: &mut String) {
    let (px, sv) = (f.s(0), f.s(1));
    let status = f.s(STATUS);
    let health = f.n(CHECK_HEALTH);
    let full = (f.n(CHECK_RISE) + f.n(CHECK_FALL)).saturating_sub(1);
    let class = server_row_class(
        status,
        f.n(BCK) != 0,
        f.set(CHKFAIL),
        health == full,
        f.n(WEIGHT),
    );
    let http = f.http();
    let _ = write!(
        out,
        "<tr class=\"{class}\"><td class=ac><a name=\"{px}/{sv}\"></a><a class=lfsb href=\"#{px}/{sv}\">{sv}</a></td>\
<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td></td>\
<td><u>{}<div class=tips><table class=det><tr><th>Current active connections:</th><td>{}</td></tr>\
<tr><th>Current used connections:</th><td>{}</td></tr>\
<tr><th>Current idle connections:</th><td>{}</td></tr>\
<tr><th>- unsafe:</th><td>{}</td></tr>\
<tr><th>- safe:</th><td>{}</td></tr>\
<tr><th>Estimated need of connections:</th><td>{}</td></tr>\
<tr><th>Active connections limit:</th><td>{}</td></tr>\
<tr><th>Idle connections limit:</th><td>{}</td></tr></table></div></u></td><td>{}</td><td>{}</td>\
<td><u>{}<div class=tips><table class=det><tr><th>Cum. sessions:</th><td>{}</td></tr>",
        f.h(QCUR),
        f.h(QMAX),
        f.lim(QLIMIT, "-"),
        f.h(RATE),
        f.h(RATE_MAX),
        f.h(SCUR),
        f.h(SCUR),
        f.h(USED_CONN_CUR),
        f.h(SRV_ICUR),
        f.h(IDLE_CONN_CUR),
        f.h(SAFE_CONN_CUR),
        f.h(NEED_CONN_EST),
        f.lim(SLIM, "-"),
        if f.set(SRV_ILIM) {
            f.h(SRV_ILIM)
        } else {
            "-".into()
        },
        f.h(SMAX),
        f.lim(SLIM, "-"),
        f.h(STOT),
        f.h(STOT),
    );
    if http {
        let req = f.n(REQ_TOT);
        let _ = write!(
            out,
            "<tr><th>New connections:</th><td>{}</td></tr><tr><th>Reused connections:</th><td>{}</td><td>({}%)</td></tr><tr><th>Cum. HTTP requests:</th><td>{}</td></tr>",
            f.h(CONNECT),
            f.h(REUSE),
            pct(f.n(REUSE), f.n(CONNECT) + f.n(REUSE)),
            f.h(REQ_TOT)
        );
        for (i, label) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
            let _ = write!(
                out,
                "<tr><th>- HTTP {label} responses:</th><td>{}</td><td>({}%)</td></tr>",
                f.h(HRSP_1XX + i),
                pct(f.n(HRSP_1XX + i), req)
            );
        }
        let _ = write!(
            out,
            "<tr><th>- other responses:</th><td>{}</td><td>({}%)</td></tr><tr><th>Failed hdr rewrites:</th><td>{}</td></tr><tr><th>Internal error:</th><td>{}</td></tr>",
            f.h(HRSP_1XX + 5),
            pct(f.n(HRSP_1XX + 5), req),
            f.h(WREW),
            f.h(EINT)
        );
    }
    push_times(f, http, out);
    let _ = write!(
        out,
        "</table></div></u></td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td><td></td><td>{}</td><td></td><td>{}</td>\
<td><u>{}<div class=tips>Connection resets during transfers: {} client, {} server</div></u></td><td>{}</td><td>{}</td><td class=ac>",
        f.h(LBTOT),
        human_time(f.i(LASTSESS)),
        f.h(BIN),
        f.h(BOUT),
        f.h(DRESP),
        f.h(ECON),
        f.h(ERESP),
        f.n(CLI_ABRT),
        f.n(SRV_ABRT),
        f.n(WRETR),
        f.n(WREDIS)
    );
    let lastchg = human_time(f.i(LASTCHG));
    if status.starts_with("MAINT") {
        let _ = write!(out, "{lastchg} MAINT");
    } else if status == "no check" {
        out.push_str("<i>no check</i>");
    } else {
        let _ = write!(out, "{lastchg} {status}");
        if status.starts_with("DOWN") {
            if health != 0 {
                out.push_str(" &uarr;");
            }
        } else if health < full {
            out.push_str(" &darr;");
        }
    }
    if status.starts_with("DOWN") && f.set(AGENT_STATUS) && f.n(AGENT_HEALTH) == 0 {
        push_check_cell(
            f,
            AGENT_STATUS,
            AGENT_CODE,
            AGENT_DURATION,
            AGENT_DESC,
            LAST_AGT,
            out,
        );
    } else if f.set(CHECK_STATUS) {
        push_check_cell(
            f,
            CHECK_STATUS,
            CHECK_CODE,
            CHECK_DURATION,
            CHECK_DESC,
            LAST_CHK,
            out,
        );
    } else {
        out.push_str("</td><td>");
    }
    let bck = f.n(BCK) != 0;
    let _ = write!(
        out,
        "</td><td class=ac>{}/{}</td><td class=ac>{}</td><td class=ac>{}</td>",
        f.n(WEIGHT),
        f.n(UWEIGHT),
        if bck { "-" } else { "Y" },
        if bck { "Y" } else { "-" }
    );
    if status == "MAINT (resolution)" {
        out.push_str("<td class=ac colspan=3>resolution</td>");
    } else if f.set(CHKFAIL) {
        let _ = write!(out, "<td><u>{}", f.n(CHKFAIL));
        if f.set(HANAFAIL) {
            let _ = write!(out, "/{}", f.n(HANAFAIL));
        }
        let _ = write!(
            out,
            "<div class=tips>Failed Health Checks{}</div></u></td><td>{}</td><td>{}</td>",
            if f.set(HANAFAIL) {
                "/Health Analyses"
            } else {
                ""
            },
            f.n(CHKDOWN),
            human_time(f.i(DOWNTIME))
        );
    } else if status != "MAINT" && f.set(TRACKED) {
        let t = f.s(TRACKED);
        let _ = write!(
            out,
            "<td class=ac colspan=3><a class=lfsb href=\"#{t}\">via {t}</a></td>"
        );
    } else {
        out.push_str("<td colspan=3></td>");
    }
    if f.set(THROTTLE) {
        let _ = writeln!(out, "<td class=ac>{} %</td>", f.n(THROTTLE));
    } else {
        out.push_str("<td class=ac>-</td>");
    }
    out.push_str("</tr>\n");
}

fn push_times(f: &F, http: bool, out: &mut String) {
    let _ = write!(
        out,
        "<tr><th colspan=3>Max / Avg over last 1024 success. conn.</th></tr>\
<tr><th>- Queue time:</th><td>{} / {}</td><td>ms</td></tr>\
<tr><th>- Connect time:</th><td>{} / {}</td><td>ms</td></tr>",
        f.h(QT_MAX),
        f.h(QTIME),
        f.h(CT_MAX),
        f.h(CTIME)
    );
    if http {
        let _ = write!(
            out,
            "<tr><th>- Responses time:</th><td>{} / {}</td><td>ms</td></tr>",
            f.h(RT_MAX),
            f.h(RTIME)
        );
    }
    let _ = write!(
        out,
        "<tr><th>- Total time:</th><td>{} / {}</td><td>ms</td></tr>",
        f.h(TT_MAX),
        f.h(TTIME)
    );
}

fn backend_html(f: &F, out: &mut String) {
    let px = f.s(0);
    let http = f.http();
    let _ = write!(
        out,
        "<tr class=\"backend\"><td class=ac><a name=\"{px}/Backend\"></a><a class=lfsb href=\"#{px}/Backend\">Backend</a></td>\
<td>{}</td><td>{}</td><td></td><td>{}</td><td>{}</td><td></td>\
<td>{}</td><td>{}</td><td>{}</td><td><u>{}<div class=tips><table class=det><tr><th>Cum. sessions:</th><td>{}</td></tr>",
        f.h(QCUR),
        f.h(QMAX),
        f.h(RATE),
        f.h(RATE_MAX),
        f.h(SCUR),
        f.h(SMAX),
        f.h(SLIM),
        f.h(STOT),
        f.h(STOT)
    );
    if http {
        let _ = write!(
            out,
            "<tr><th>New connections:</th><td>{}</td></tr>\
<tr><th>Reused connections:</th><td>{}</td><td>({}%)</td></tr>",
            f.h(CONNECT),
            f.h(REUSE),
            pct(f.n(REUSE), f.n(CONNECT) + f.n(REUSE)),
        );
        push_http_responses(f, out);
        push_cache_and_errors(f, out);
    }
    push_times(f, http, out);
    let _ = write!(
        out,
        "</table></div></u></td><td>{}</td><td>{}</td><td>{}</td>",
        f.h(LBTOT),
        human_time(f.i(LASTSESS)),
        f.h(BIN)
    );
    bytes_out_cell(f, out);
    let status = f.s(STATUS);
    let status_html = if status == "DOWN" {
        "<font color=\"red\"><b>DOWN</b></font>".to_string()
    } else {
        status.to_string()
    };
    let _ = write!(
        out,
        "<td>{}</td><td>{}</td><td></td><td>{}</td>\
<td><u>{}<div class=tips>Connection resets during transfers: {} client, {} server</div></u></td><td>{}</td><td>{}</td>\
<td class=ac>{} {}</td><td class=ac>&nbsp;</td><td class=ac>{}/{}</td><td class=ac>{}</td><td class=ac>{}</td>\
<td class=ac>&nbsp;</td><td>{}</td><td>{}</td><td></td></tr>",
        f.h(DREQ),
        f.h(DRESP),
        f.h(ECON),
        f.h(ERESP),
        f.n(CLI_ABRT),
        f.n(SRV_ABRT),
        f.n(WRETR),
        f.n(WREDIS),
        human_time(f.i(LASTCHG)),
        status_html,
        f.n(WEIGHT),
        f.n(UWEIGHT),
        f.n(ACT),
        f.n(BCK),
        f.n(CHKDOWN),
        if f.set(DOWNTIME) {
            human_time(f.i(DOWNTIME))
        } else {
            "&nbsp;".into()
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN_PAGE: &str = include_str!("../testdata/haproxy-2.6/stats/stats-page.html");
    const GOLDEN_REFRESH_PAGE: &str =
        include_str!("../testdata/haproxy-2.6/stats/stats-page-refresh.html");

    /// The golden page's moment: seed-loopback after drain+maint, with its info block.
    fn golden_snapshot() -> Snapshot {
        let mut snap = crate::tests::after_drain_maint().snap;
        let i = &mut snap.info;
        i.pid = 14641;
        i.uptime_secs = 16;
        i.curr_conns = 1;
        i.conn_rate = 2;
        i.bytes_out_rate = 65600;
        i.run_queue = 0;
        i.tasks = 26;
        i.idle_pct = 100;
        snap
    }

    fn golden_opts() -> HtmlOpts {
        HtmlOpts {
            uri: "/".into(),
            refresh: 10,
            hide_version: true,
            req: StatsRequest::default(),
            admin: false,
            ..HtmlOpts::default()
        }
    }

    /// Admin mode (`stats admin`), with the strings of HAProxy 2.6.12's page and banners.
    #[test]
    fn admin_mode_adds_checkboxes_forms_and_banners() {
        let snap = golden_snapshot();
        let mut o = golden_opts();
        o.admin = true;
        o.req = StatsRequest::parse(";up;st=DONE");
        let mut out = String::new();
        render_html(&snap, &o, &mut out);
        assert!(out.contains("</ul></td></tr></table>\n<p><div class=active_up><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> Action processed successfully.</div>\n<p>\n<table class=\"tbl\""), "{out}");
        let be = "istio-http-backend";
        assert!(out.contains(&format!("<form method=\"post\"><table class=\"tbl\" width=\"100%\">\n<tr class=\"titre\"><th class=\"pxname\" width=\"10%\"><a name=\"{be}\">")));
        assert!(out.contains(&format!("<tr class=\"titre\"><th rowspan=2 width=1><input type=\"checkbox\" onclick=\"for(c in document.getElementsByClassName('{be}-checkbox')) document.getElementsByClassName('{be}-checkbox').item(c).checked = this.checked\"></th><th rowspan=2></th><th colspan=3>Queue</th>")));
        assert!(out.contains(&format!("<td><input class='{be}-checkbox' type=\"checkbox\" name=\"s\" value=\"worker2\"></td><td class=ac><a name=\"{be}/worker2\"></a>")));
        assert!(out.contains(&format!(
            "<tr class=\"backend\"><td></td><td class=ac><a name=\"{be}/Backend\">"
        )));
        assert!(
            out.contains(
                "<tr class=\"frontend\"><td></td><td class=ac><a name=\"stats/Frontend\">"
            )
        );
        assert!(out.contains(
            "<tr class=\"titre\"><th rowspan=2></th><th rowspan=2></th><th colspan=3>Queue</th>"
        ));
        let id = snap.proxies.iter().find(|p| p.name == be).unwrap().id;
        assert!(out.contains(&format!("</tr></table>Choose the action to perform on the checked servers : <select name=action><option value=\"\"></option><option value=\"ready\">Set state to READY</option><option value=\"drain\">Set state to DRAIN</option><option value=\"maint\">Set state to MAINT</option><option value=\"dhlth\">Health: disable checks</option><option value=\"ehlth\">Health: enable checks</option><option value=\"hrunn\">Health: force UP</option><option value=\"hnolb\">Health: force NOLB</option><option value=\"hdown\">Health: force DOWN</option><option value=\"dagent\">Agent: disable checks</option><option value=\"eagent\">Agent: enable checks</option><option value=\"arunn\">Agent: force UP</option><option value=\"adown\">Agent: force DOWN</option><option value=\"shutdown\">Kill Sessions</option></select><input type=\"hidden\" name=\"b\" value=\"#{id}\">&nbsp;<input type=\"submit\" value=\"Apply\"></form><p>\n")));
        // Without admin rights the page is the plain one.
        let mut plain = String::new();
        render_html(&snap, &golden_opts(), &mut plain);
        assert!(!plain.contains("checkbox") && !plain.contains("<form method=\"post\">"));
        // Every banner, as HAProxy 2.6 prints it after `;up;st=<code>`.
        for (code, want) in [
            (
                "PART",
                "<p><div class=active_going_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> Action partially processed.<br>Some server names are probably unknown or ambiguous (duplicated names in the backend).</div>",
            ),
            (
                "ERRP",
                "<p><div class=active_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> Action not processed because of invalid parameters.<ul><li>The action is maybe unknown.</li><li>Invalid key parameter (empty or too long).</li><li>The backend name is probably unknown or ambiguous (duplicated names).</li><li>Some server names are probably unknown or ambiguous (duplicated names in the backend).</li></ul></div>",
            ),
            (
                "EXCD",
                "<p><div class=active_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> <b>Action not processed : the buffer couldn't store all the data.<br>You should retry with less servers at a time.</b></div>",
            ),
            (
                "DENY",
                "<p><div class=active_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> <b>Action denied.</b></div>",
            ),
            (
                "NONE",
                "<p><div class=active_going_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> Nothing has changed.</div>",
            ),
            (
                "IVAL",
                "<p><div class=active_down><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> <b>Invalid requests (unsupported method or chunked encoded request).</b></div>",
            ),
            (
                "XXXX",
                "<p><div class=active_no_check><a class=lfsb href=\"/;up\" title=\"Remove this message\">[X]</a> Unexpected result.</div>",
            ),
        ] {
            let mut o = golden_opts();
            o.req = StatsRequest::parse(&format!(";up;st={code}"));
            let mut out = String::new();
            render_html(&snap, &o, &mut out);
            assert!(out.contains(&format!("{want}\n<p>\n")), "{code}");
        }
    }

    #[test]
    fn post_forms_parse_like_haproxy() {
        let f = PostForm::parse(b"s=worker1&s=worker%32&action=drain&b=%232").unwrap();
        assert_eq!(f.backend.as_deref(), Some("#2"));
        assert_eq!(f.action, Some(PostAction::Drain));
        assert_eq!(f.servers, ["worker1", "worker2"]);
        let f = PostForm::parse(b"action=maint&b=be&action=ready").unwrap();
        assert_eq!(f.action, Some(PostAction::Ready));
        assert!(f.servers.is_empty());
        assert_eq!(
            PostForm::parse(b"s=a&action=bogus&b=be"),
            Err(StatStatus::Errp)
        );
        assert_eq!(
            PostForm::parse(b"s=%zz&action=maint&b=be"),
            Err(StatStatus::Errp)
        );
        assert_eq!(PostForm::parse(b"zzz").unwrap().action, None);
        assert_eq!(StatStatus::of_post(0, 0), StatStatus::None);
        assert_eq!(StatStatus::of_post(2, 0), StatStatus::Errp);
        assert_eq!(StatStatus::of_post(2, 1), StatStatus::Part);
        assert_eq!(StatStatus::of_post(2, 2), StatStatus::Done);
    }

    /// Everything before the `stats` frontend table (whose counters moved between the CSV
    /// and the page capture) matches HAProxy byte for byte.
    #[test]
    fn page_matches_haproxy_byte_for_byte() {
        let mut out = String::new();
        render_html(&golden_snapshot(), &golden_opts(), &mut out);
        let cut = "<table class=\"tbl\" width=\"100%\">\n<tr class=\"titre\"><th class=\"pxname\" width=\"10%\"><a name=\"stats\">";
        let mine = out.split(cut).next().unwrap();
        let gold = GOLDEN_PAGE.split(cut).next().unwrap();
        for (n, (a, b)) in mine.lines().zip(gold.lines()).enumerate() {
            assert_eq!(a, b, "line {}", n + 1);
        }
        assert_eq!(mine, gold);
        // The `stats` frontend's own counters differ: compare with digit runs folded.
        let squash = |s: &str| -> String {
            let mut o = String::new();
            for c in s
                .replace("<span class=\"rls\">", "")
                .replace("</span>", "")
                .chars()
            {
                if !(c.is_ascii_digit() && o.ends_with('0')) {
                    o.push(if c.is_ascii_digit() { '0' } else { c });
                }
            }
            o
        };
        let tail = |s: &str| squash(s.split(cut).nth(1).unwrap());
        assert_eq!(tail(&out), tail(GOLDEN_PAGE));
    }

    #[test]
    fn row_classes_follow_server_state() {
        let mut out = String::new();
        render_html(&golden_snapshot(), &golden_opts(), &mut out);
        for (row, class) in [
            ("istio-http-backend/master1", "active_down"),
            ("istio-http-backend/worker1", "maintain"),
            ("istio-http-backend/worker2", "active_draining"),
            ("kube-apiserver/master1", "active_up"),
        ] {
            let needle = format!("<tr class=\"{class}\"><td class=ac><a name=\"{row}\">");
            assert!(out.contains(&needle), "{needle}");
        }
        assert_eq!(
            server_row_class("UP 1/2", true, true, false, 1),
            "backup_going_down"
        );
        assert_eq!(
            server_row_class("DOWN 1/2", false, true, false, 1),
            "active_going_up"
        );
        assert_eq!(
            server_row_class("no check", true, false, false, 1),
            "backup_no_check"
        );
        assert_eq!(
            server_row_class("NOLB", false, true, true, 0),
            "active_nolb"
        );
        assert_eq!(
            server_row_class("MAINT (via a/b)", true, true, true, 1),
            "maintain"
        );
        assert_eq!(server_row_class("UP", true, true, true, 1), "backup_up");
    }

    /// With the version shown and `stats refresh`, the header and option links match the live
    /// capture (`stats uri /`, `stats refresh 10s`).
    #[test]
    fn version_and_refresh_links_match_haproxy() {
        let mut out = String::new();
        let snap = golden_snapshot();
        let mut o = golden_opts();
        o.hide_version = false;
        render_html(&snap, &o, &mut out);
        let h1 = "<body><h1><a href=\"http://www.haproxy.org/\" style=\"text-decoration: none;\">HAProxy version 2.6.12-1+deb12u4, released 2026/10/17</a></h1>\n";
        assert!(out.contains(h1));
        assert!(GOLDEN_REFRESH_PAGE.contains(h1));
        let links = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| l.starts_with("<li>"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(links(&out), links(GOLDEN_REFRESH_PAGE));
        // `;up;norefresh` and a scope change the links as HAProxy does.
        o.req = StatsRequest::parse(";up;norefresh?scope=kube");
        out.clear();
        render_html(&snap, &o, &mut out);
        assert!(out.contains("<li><a href=\"/;norefresh;scope=kube\">Show all servers</a><br>\n"));
        assert!(out.contains("<li><a href=\"/;up;scope=kube\">Enable refresh</a><br>\n"));
        assert!(out.contains("<input value=\"kube\" name=\"scope\""));
        assert_eq!(out.matches("<th class=\"pxname\"").count(), 2);
        assert!(out.contains("<td class=ac>16s UP (1/1)</td>"));
    }

    #[test]
    fn numbers_and_durations_use_haproxy_formats() {
        assert_eq!(u2h(0), "0");
        assert_eq!(u2h(999), "999");
        assert_eq!(u2h(4000), "<span class=\"rls\">4</span>000");
        assert_eq!(
            u2h(1234567),
            "<span class=\"rls\">1</span>23<span class=\"rls\">4</span>567"
        );
        assert_eq!(human_time(0), "0s");
        assert_eq!(human_time(-1), "?");
        assert_eq!(human_time(59), "59s");
        assert_eq!(human_time(61), "1m1s");
        assert_eq!(human_time(3600), "1h");
        assert_eq!(human_time(3661), "1h1m");
        assert_eq!(human_time(90061), "1d1h");
        assert_eq!(human_time(86400 + 59), "1d59s");
    }

    #[test]
    fn request_options_parse_like_haproxy() {
        let r = StatsRequest::parse(";csv;norefresh");
        assert_eq!(r.format, StatsFormat::Csv);
        assert!(r.no_refresh && !r.hide_down);
        assert_eq!(StatsRequest::parse(";json").format, StatsFormat::Json);
        assert_eq!(StatsRequest::parse("").format, StatsFormat::Html);
        assert_eq!(StatsRequest::parse("?scope=<script>").scope, "");
        assert_eq!(
            StatsRequest::parse("?scope=abcdefghijklmnopqrstuvwxyz")
                .scope
                .len(),
            20
        );
    }
}
