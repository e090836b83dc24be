//! Cookie-based persistence (`cookie` keyword), HAProxy 2.6's `http_manage_client_side_cookies`
//! and `http_manage_server_side_cookies` and the `Set-Cookie` insertion of
//! `http_process_res_common`: pure functions over the heads, no I/O.
//!
//! `dynamic` cookies are computed once, from the configured address (not again when a
//! resolver or the CLI changes it; the CLI's `dynamic-cookie` commands are not there yet).

use super::head::Headers;
use crate::config::model::{CookieCfg, CookieMode};

/// What the client's cookie did (`%tsc` third character): `N` none, `I` invalid, `D` its server
/// is down, `V` valid, `U` unused (a server was assigned already).
/// What happened to the server's (`%tsc` fourth): `N` none, `P` passed, `D` deleted,
/// `I` inserted, `R` rewritten, `U` updated.
/// Also the dates the client's cookie carried (`maxidle`/`maxlife`; seconds since the epoch,
/// 0: none), which the response side refreshes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub client: u8,
    pub server: u8,
    pub last_date: u32,
    pub first_date: u32,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            client: b'N',
            server: b'N',
            last_date: 0,
            first_date: 0,
        }
    }
}

/// The request side's view of the backend: its cookie settings, its servers, `option
/// persist`, and the time (seconds since the epoch).
pub struct ReqCtx<'a> {
    pub ck: &'a CookieCfg,
    pub servers: &'a [Candidate<'a>],
    /// `option persist` or a `force-persist` rule: a stopped server is used all the same.
    pub persist: bool,
    /// An `ignore-persist` rule matched: the cookie chooses no server (`U`).
    pub ignore: bool,
    pub now: u32,
}

/// The response side's facts: the client's cookie chose the answering server (`direct`), the
/// request was a POST, the response is cacheable ([`cacheable`]), the time.
pub struct ResCtx {
    pub direct: bool,
    /// An `ignore-persist` rule matched: the response's cookies are left alone.
    pub ignore: bool,
    pub post: bool,
    pub cacheable: bool,
    pub now: u32,
}

/// A server as the cookie matching sees it: its `cookie` value and whether it is running.
pub struct Candidate<'a> {
    pub cookie: Option<&'a str>,
    pub running: bool,
}

/// `COOKIE_DELIM`: the prefix mode's separator between the server's value and the original.
const PREFIX_DELIM: u8 = b'~';
/// `COOKIE_DELIM_DATE`: the dates after the server's value.
const DATE_DELIM: u8 = b'|';

fn is_sp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `http_find_cookie_value_end`: the first `,` or `;` outside a quoted string.
fn value_end(b: &[u8], mut i: usize) -> usize {
    let mut quoted = false;
    while i < b.len() {
        match b[i] {
            b'"' => quoted = !quoted,
            b'\\' if quoted && i + 1 < b.len() => i += 1,
            b',' | b';' if !quoted => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// One cookie of a `Cookie` value: where it starts (`prev`: its delimiter, or 0), its name and
/// value spans, and where the next one's delimiter is.
struct Item {
    prev: usize,
    att: (usize, usize),
    val: Option<(usize, usize)>,
    next: usize,
}

/// The cookies of one `Cookie` header value, as HAProxy walks them.
fn items(b: &[u8]) -> Vec<Item> {
    let mut out = Vec::new();
    let mut prev = 0;
    let mut first = true;
    while prev < b.len() {
        let mut att_beg = if first { prev } else { prev + 1 };
        first = false;
        while att_beg < b.len() && is_sp(b[att_beg]) {
            att_beg += 1;
        }
        let (mut equal, mut att_end) = (att_beg, att_beg);
        while equal < b.len() && !matches!(b[equal], b'=' | b',' | b';') {
            let c = b[equal];
            equal += 1;
            if !is_sp(c) {
                att_end = equal;
            }
        }
        let (val, next) = if equal < b.len() && b[equal] == b'=' {
            let mut vb = equal + 1;
            while vb < b.len() && is_sp(b[vb]) {
                vb += 1;
            }
            let next = value_end(b, vb);
            let mut ve = next;
            while ve > vb && is_sp(b[ve - 1]) {
                ve -= 1;
            }
            (Some((vb, ve)), next)
        } else {
            (None, equal)
        };
        out.push(Item {
            prev,
            att: (att_beg, att_end),
            val,
            next,
        });
        prev = next;
    }
    out
}

/// The request side: finds the server the client's persistence cookie names (the index in
/// `servers`, None: the balancer picks), and edits the `Cookie` headers as the mode says
/// (`insert indirect` removes the cookie, `prefix` strips `<server>~`). `persist`: `option
/// persist` (a down server is used all the same).
pub fn client_side(cx: &ReqCtx<'_>, headers: &mut Headers, flags: &mut Flags) -> Option<usize> {
    let mut chosen = None;
    let mut i = 0;
    while i < headers.0.len() {
        if !headers.0[i].name.eq_ignore_ascii_case("cookie") {
            i += 1;
            continue;
        }
        let value = std::mem::take(&mut headers.0[i].value);
        match client_header(cx, &value, &mut chosen, flags) {
            Some(v) if v.is_empty() => {
                headers.0.remove(i);
                continue;
            }
            Some(v) => headers.0[i].value = v.into(),
            None => headers.0[i].value = value,
        }
        i += 1;
    }
    chosen
}

/// One `Cookie` header: the match, then the edited value (None: unchanged, empty: removed).
fn client_header(
    cx: &ReqCtx<'_>,
    b: &[u8],
    chosen: &mut Option<usize>,
    flags: &mut Flags,
) -> Option<Vec<u8>> {
    let ck = cx.ck;
    let delete_ours = ck.mode == Some(CookieMode::Insert) && ck.indirect;
    let list = items(b);
    // Per item: kept, deleted (with the `$` attributes after it), or its value cut at `cut`.
    let mut deleted = vec![false; list.len()];
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut preserve = false;
    let mut in_del = false;
    for (k, it) in list.iter().enumerate() {
        let name = &b[it.att.0..it.att.1];
        if name.first() == Some(&b'$') {
            deleted[k] = in_del;
            continue;
        }
        let Some((vb, ve)) = it.val else {
            preserve = true;
            in_del = false;
            continue;
        };
        if name != ck.name.as_bytes() {
            preserve = true;
            in_del = false;
            continue;
        }
        let delim = if ck.mode == Some(CookieMode::Prefix) {
            b[vb..ve]
                .iter()
                .position(|&c| c == PREFIX_DELIM)
                .map_or(ve, |p| vb + p)
        } else {
            dated_value(cx, &b[vb..ve], flags) + vb
        };
        match_server(&b[vb..delim], cx, chosen, flags);
        if ck.mode == Some(CookieMode::Prefix) && delim != ve {
            cuts.push((vb, delim + 1));
            preserve = true;
            in_del = false;
        } else if delete_ours {
            deleted[k] = true;
            in_del = true;
        }
    }
    if !deleted.iter().any(|d| *d) && cuts.is_empty() {
        return None;
    }
    if !preserve && deleted.iter().all(|d| *d) {
        return Some(Vec::new());
    }
    Some(rebuild(b, &list, &deleted, &cuts))
}

/// The value with the deleted runs taken out as `http_del_hdr_value` does (a run at the start
/// takes the delimiter after it; another the delimiter before it, the one after it becoming
/// `<delim> `), and the prefix cuts made.
fn rebuild(b: &[u8], list: &[Item], deleted: &[bool], cuts: &[(usize, usize)]) -> Vec<u8> {
    // Byte ranges to drop, and what replaces each.
    let mut edits: Vec<(usize, usize, Vec<u8>)> =
        cuts.iter().map(|&(s, e)| (s, e, vec![])).collect();
    let mut k = 0;
    while k < list.len() {
        if !deleted[k] {
            k += 1;
            continue;
        }
        let start = k;
        while k < list.len() && deleted[k] {
            k += 1;
        }
        let end = list[k - 1].next;
        if start == 0 {
            let mut e = end;
            if e < b.len() {
                e += 1;
            }
            while e < b.len() && is_sp(b[e]) {
                e += 1;
            }
            edits.push((0, e, vec![]));
        } else {
            let mut s = list[start].prev;
            while s > 0 && is_sp(b[s - 1]) {
                s -= 1;
            }
            if end >= b.len() {
                edits.push((s, b.len(), vec![]));
            } else {
                let mut e = end + 1;
                while e < b.len() && is_sp(b[e]) {
                    e += 1;
                }
                edits.push((s, e, vec![b[end], b' ']));
            }
        }
    }
    edits.sort_by_key(|e| e.0);
    let mut out = Vec::with_capacity(b.len());
    let mut pos = 0;
    for (s, e, with) in edits {
        if s < pos {
            continue;
        }
        out.extend_from_slice(&b[pos..s]);
        out.extend_from_slice(&with);
        pos = e;
    }
    out.extend_from_slice(&b[pos..]);
    out
}

/// The length of the server's part of a `<server>[|<last>[|<first>]]` value, the dates kept
/// in `flags`; 0 (no server) when a date says the cookie is too old (`O`, `maxlife`) or idle
/// (`E`, `maxidle`), or more than a day in the future.
fn dated_value(cx: &ReqCtx<'_>, v: &[u8], flags: &mut Flags) -> usize {
    let Some(bar) = v.iter().position(|&c| c == DATE_DELIM) else {
        return v.len();
    };
    let rest = &v[bar + 1..];
    if let Some(d) = rest.get(..5).and_then(b64tos30).filter(|d| *d > 0) {
        flags.last_date = d << 2;
    }
    if let Some(b2) = rest.iter().position(|&c| c == DATE_DELIM)
        && let Some(d) = rest
            .get(b2 + 1..b2 + 6)
            .and_then(b64tos30)
            .filter(|d| *d > 0)
    {
        flags.first_date = d << 2;
    }
    let now = i64::from(cx.now);
    let too_far = |d: u32, max: u32| {
        d > 0 && max > 0 && (now - i64::from(d) > i64::from(max) || i64::from(d) - now > 86400)
    };
    let expired = if too_far(flags.first_date, cx.ck.maxlife) {
        Some(b'O')
    } else if too_far(flags.last_date, cx.ck.maxidle) {
        Some(b'E')
    } else {
        None
    };
    match expired {
        Some(c) => {
            flags.client = c;
            flags.last_date = 0;
            flags.first_date = 0;
            0
        }
        None => bar,
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// HAProxy's `b64tos30`: five base64 characters, most significant first (None: invalid).
fn b64tos30(s: &[u8]) -> Option<u32> {
    s.iter().try_fold(0u32, |acc, c| {
        let v = B64.iter().position(|b| b == c)?;
        Some((acc << 6) | v as u32)
    })
}

/// HAProxy's `s30tob64`: the low 30 bits as five base64 characters.
fn s30tob64(v: u32, out: &mut String) {
    for i in (0..5).rev() {
        out.push(char::from(B64[((v >> (6 * i)) & 0x3f) as usize]));
    }
}

/// The first server whose cookie is `val`, if running (or `persist`); the client flag.
fn match_server(val: &[u8], cx: &ReqCtx<'_>, chosen: &mut Option<usize>, flags: &mut Flags) {
    let persist = cx.persist;
    let mut found = None;
    if !val.is_empty() && chosen.is_none() && !cx.ignore {
        for (idx, s) in cx.servers.iter().enumerate() {
            if s.cookie.is_none_or(|c| c.as_bytes() != val) {
                continue;
            }
            if s.running || persist {
                flags.client = if s.running { b'V' } else { b'D' };
                found = Some(idx);
                break;
            }
            flags.client = b'D';
        }
    }
    match found {
        Some(idx) => *chosen = Some(idx),
        None if !matches!(flags.client, b'D' | b'E' | b'O') => {
            flags.client = if chosen.is_some() || cx.ignore {
                b'U'
            } else {
                b'I'
            };
        }
        None => {}
    }
}

/// The response side: the server's own `Set-Cookie` for the persistence cookie is passed,
/// deleted (insert mode, or `indirect` on a direct access), rewritten or prefixed; then the
/// cookie is inserted if the mode asks. `srv_cookie`: the answering server's `cookie`;
/// `direct`: the client's cookie chose that server; `post`: the request was a POST; `cacheable`: see [`cacheable`].
pub fn server_side(
    ck: &CookieCfg,
    headers: &mut Headers,
    srv_cookie: Option<&str>,
    rx: &ResCtx,
    flags: &mut Flags,
) {
    let direct = rx.direct;
    if rx.ignore {
        return;
    }
    let mode = ck.mode;
    let mut i = 0;
    while i < headers.0.len() {
        let h = &headers.0[i];
        if !h.name.eq_ignore_ascii_case("set-cookie") {
            i += 1;
            continue;
        }
        let b = &h.value;
        let it = match items(b).into_iter().next() {
            Some(it) => it,
            None => {
                i += 1;
                continue;
            }
        };
        let Some((vb, ve)) = it
            .val
            .filter(|_| &b[it.att.0..it.att.1] == ck.name.as_bytes())
        else {
            i += 1;
            continue;
        };
        flags.server = b'P';
        if ck.preserve {
        } else if mode == Some(CookieMode::Insert) || (direct && ck.indirect) {
            headers.0.remove(i);
            flags.server = b'D';
            continue;
        } else if let (Some(sc), Some(CookieMode::Rewrite)) = (srv_cookie, mode) {
            let mut v = b[..vb].to_vec();
            v.extend_from_slice(sc.as_bytes());
            v.extend_from_slice(&b[ve..]);
            headers.0[i].value = v.into();
            flags.server = b'R';
        } else if let (Some(sc), Some(CookieMode::Prefix)) = (srv_cookie, mode) {
            let mut v = b[..vb].to_vec();
            v.extend_from_slice(sc.as_bytes());
            v.push(PREFIX_DELIM);
            v.extend_from_slice(&b[vb..]);
            headers.0[i].value = v.into();
            flags.server = b'R';
        }
        i += 1;
    }
    let (last, first) = (flags.last_date, flags.first_date);
    // A direct access gets the cookie again to refresh (or drop) its dates.
    let dates = ((ck.maxidle > 0 || last > 0)
        && (last == 0 || i64::from(last) < i64::from(rx.now)))
        || (ck.maxlife > 0 && first == 0)
        || (ck.maxlife == 0 && first > 0);
    let insert = mode == Some(CookieMode::Insert)
        && !(flags.server == b'P' && ck.preserve)
        && (!direct || dates)
        && (!ck.postonly || rx.post);
    if !insert {
        return;
    }
    headers.append(
        "set-cookie",
        set_cookie_value(ck, srv_cookie, flags, rx.now),
    );
    flags.server = if srv_cookie.is_some() && direct {
        b'U'
    } else {
        b'I'
    };
    if ck.nocache && rx.cacheable {
        headers.append("cache-control", "private");
    }
}

/// The inserted `Set-Cookie` value (an expired one for a server without a cookie).
fn set_cookie_value(ck: &CookieCfg, srv_cookie: Option<&str>, f: &Flags, now: u32) -> String {
    let mut v = match srv_cookie {
        Some(c) => {
            let mut v = format!("{}={c}", ck.name);
            if ck.maxidle > 0 || ck.maxlife > 0 {
                // The last seen date, then the first one, in 4-second units.
                let stamp = (now + 3) >> 2;
                v.push(char::from(DATE_DELIM));
                s30tob64(stamp, &mut v);
                if ck.maxlife > 0 {
                    v.push(char::from(DATE_DELIM));
                    let first = if f.first_date > 0 {
                        f.first_date >> 2
                    } else {
                        stamp
                    };
                    s30tob64(first, &mut v);
                }
            }
            v.push_str("; path=/");
            v
        }
        None => format!(
            "{}=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/",
            ck.name
        ),
    };
    if let Some(d) = &ck.domain {
        v.push_str("; domain=");
        v.push_str(d);
    }
    if ck.httponly {
        v.push_str("; HttpOnly");
    }
    if ck.secure {
        v.push_str("; Secure");
    }
    if let Some(a) = &ck.attrs {
        v.push_str("; ");
        v.push_str(a);
    }
    v
}

/// HAProxy's `TX_CACHEABLE` when the cookie is inserted: set for a safe method
/// (`http_wait_for_request`), cleared by an `Authorization` or `Cache-Control: no-store` request
/// (`http_check_request_for_cacheability`), by a status not cacheable by default, and by
/// `http_check_response_for_cacheability` as 2.6 does it (`Pragma: no-cache`, the
/// `Cache-Control` values, and a response with neither freshness information nor validator).
pub fn cacheable(req: &super::head::RequestHead, status: u16, res: &Headers) -> bool {
    let safe = matches!(req.method.as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE");
    let req_ok = !req.headers.contains("authorization")
        && !comma_values(&req.headers, "cache-control").any(|v| starts_with_ci(v, b"no-store"));
    let status_ok = matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 404 | 405 | 410 | 414 | 501
    );
    let mut yes = safe && req_ok && status_ok;
    if res
        .get_first("pragma")
        .is_some_and(|v| v.eq_ignore_ascii_case(b"no-cache"))
    {
        return false;
    }
    let mut fresh = false;
    for d in comma_values(res, "cache-control") {
        if d.eq_ignore_ascii_case(b"public") {
            yes = true;
        } else if [
            &b"private"[..],
            b"no-cache",
            b"no-store",
            b"max-age=0",
            b"s-maxage=0",
        ]
        .iter()
        .any(|x| d.eq_ignore_ascii_case(x))
        {
            yes = false;
        } else if starts_with_ci(d, b"no-cache=\"set-cookie") {
        } else if starts_with_ci(d, b"s-maxage") || starts_with_ci(d, b"max-age") {
            fresh = true;
        }
    }
    let fresh = fresh || res.contains("expires");
    let validator = res.contains("etag") || res.contains("last-modified");
    yes && (fresh || validator)
}

/// The comma-separated values of every `name` header, trimmed.
fn comma_values<'a>(h: &'a Headers, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    h.get_all(name)
        .flat_map(|v| v.split(|&c| c == b','))
        .map(|d| d.trim_ascii())
}

fn starts_with_ci(v: &[u8], p: &[u8]) -> bool {
    v.len() >= p.len() && v[..p.len()].eq_ignore_ascii_case(p)
}

/// `capture cookie <name> len <len>`: the first cookie (of the `Cookie` headers, or the first
/// of each `Set-Cookie` with `set`) whose name starts with `name`, as `name=value` cut to
/// `len` bytes.
pub fn capture(headers: &Headers, set: bool, name: &str, len: usize) -> Option<String> {
    let hname = if set { "set-cookie" } else { "cookie" };
    for v in headers.get_all(hname) {
        let list = items(v);
        let n = if set { list.len().min(1) } else { list.len() };
        for it in &list[..n] {
            let Some((_, ve)) = it.val else { continue };
            let c = &v[it.att.0..ve];
            if c.len() >= name.len() && c.starts_with(name.as_bytes()) {
                return Some(String::from_utf8_lossy(&c[..c.len().min(len)]).into_owned());
            }
        }
    }
    None
}

/// `cookie … dynamic` with a `dynamic-cookie-key`: a server without a `cookie` gets HAProxy's
/// `srv_set_dyncookie` value, the XXH64 of the key, the address's bytes and the port (32-bit,
/// network order), in 16 hex digits.
pub fn dynamic_cookie(key: &str, addr: std::net::SocketAddr) -> String {
    let mut buf = key.as_bytes().to_vec();
    match addr.ip() {
        std::net::IpAddr::V4(a) => buf.extend_from_slice(&a.octets()),
        std::net::IpAddr::V6(a) => buf.extend_from_slice(&a.octets()),
    }
    buf.extend_from_slice(&u32::from(addr.port()).to_be_bytes());
    format!("{:016x}", xxh64(&buf, 0))
}

/// The server's `cookie` value, or its dynamic one when the backend asks for it.
pub fn server_cookie(
    s: &crate::config::model::Server,
    px: &crate::config::model::Proxy,
) -> Option<String> {
    if let Some(c) = &s.opts.cookie {
        return Some(c.clone());
    }
    px.extra.cookie.as_ref().filter(|c| c.dynamic)?;
    let key = px.extra.dynamic_cookie_key.as_deref()?;
    (s.unix.is_none()).then(|| dynamic_cookie(key, s.addr))
}

/// XXH64 (the xxHash 64-bit digest) of `data`.
fn xxh64(data: &[u8], seed: u64) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    let round = |acc: u64, v: u64| {
        acc.wrapping_add(v.wrapping_mul(P2))
            .rotate_left(31)
            .wrapping_mul(P1)
    };
    let merge = |h: u64, v: u64| (h ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4);
    let u64_at = |b: &[u8]| {
        b.iter()
            .take(8)
            .rev()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x))
    };
    let u32_at = |b: &[u8]| {
        b.iter()
            .take(4)
            .rev()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x))
    };
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, u64_at(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for x in v {
            h = merge(h, x);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u64);
    while rest.len() >= 8 {
        h ^= round(0, u64_at(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        h ^= u32_at(rest).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: Option<CookieMode>, indirect: bool) -> CookieCfg {
        CookieCfg {
            name: "SRV".into(),
            mode,
            indirect,
            ..CookieCfg::default()
        }
    }

    const NOW: u32 = 1_800_000_000;

    fn req(ck: &CookieCfg, cookie: &str) -> (Option<usize>, Flags, Vec<String>) {
        let mut h = Headers::default();
        h.append("Cookie", cookie);
        let servers = [
            Candidate {
                cookie: Some("c1"),
                running: true,
            },
            Candidate {
                cookie: Some("c2"),
                running: false,
            },
        ];
        let mut f = Flags::default();
        let cx = ReqCtx {
            ck,
            servers: &servers,
            persist: false,
            ignore: false,
            now: NOW,
        };
        let s = client_side(&cx, &mut h, &mut f);
        let left = h
            .get_all("cookie")
            .map(|v| String::from_utf8_lossy(v).into_owned());
        (s, f, left.collect())
    }

    /// The header edits HAProxy 2.6 makes (observed with `cookie SRV insert indirect`).
    #[test]
    fn insert_indirect_removes_the_cookie() {
        let ck = cfg(Some(CookieMode::Insert), true);
        assert_eq!(
            req(&ck, "SRV=c1"),
            (
                Some(0),
                Flags {
                    client: b'V',
                    ..Flags::default()
                },
                vec![]
            )
        );
        assert_eq!(req(&ck, "SRV=c1;a=b").2, ["a=b"]);
        assert_eq!(req(&ck, "a=1;SRV=c1;$Path=/;b=2").2, ["a=1; b=2"]);
        assert_eq!(req(&ck, "a=1; SRV=c1").2, ["a=1"]);
        let (s, f, left) = req(&ck, "SRV=c2; x=y");
        assert_eq!((s, f.client, left), (None, b'D', vec!["x=y".to_string()]));
        assert_eq!(req(&ck, "SRV=zz").1.client, b'I');
        assert_eq!(req(&ck, "SRV=").1.client, b'I');
        assert_eq!(req(&ck, "SRV=c1; SRV=c1").1.client, b'U');
    }

    #[test]
    fn prefix_strips_the_server() {
        let ck = cfg(Some(CookieMode::Prefix), false);
        let (s, f, left) = req(&ck, "SRV=c1~app; b=2");
        assert_eq!(
            (s, f.client, left),
            (Some(0), b'V', vec!["SRV=app; b=2".to_string()])
        );
        assert_eq!(req(&ck, "SRV=c1").2, ["SRV=c1"]);
    }

    #[test]
    fn response_side() {
        let mut ck = cfg(Some(CookieMode::Insert), true);
        ck.nocache = true;
        ck.httponly = true;
        ck.domain = Some(".ex.com".into());
        let mut h = Headers::default();
        h.append("Set-Cookie", "SRV=app; path=/");
        h.append("Cache-Control", "public");
        let mut f = Flags::default();
        let rx = ResCtx {
            ignore: false,
            direct: false,
            post: false,
            cacheable: true,
            now: NOW,
        };
        server_side(&ck, &mut h, Some("c2"), &rx, &mut f);
        let sc: Vec<_> = h.get_all("set-cookie").collect();
        assert_eq!(sc, [&b"SRV=c2; path=/; domain=.ex.com; HttpOnly"[..]]);
        assert_eq!(h.get_last("cache-control"), Some(&b"private"[..]));
        assert_eq!(f.server, b'I');
        let ck = cfg(Some(CookieMode::Prefix), false);
        let mut h = Headers::default();
        h.append("Set-Cookie", "SRV=app; path=/");
        let mut f = Flags::default();
        let rx = ResCtx {
            ignore: false,
            direct: true,
            post: false,
            cacheable: false,
            now: NOW,
        };
        server_side(&ck, &mut h, Some("c2"), &rx, &mut f);
        assert_eq!(h.get_first("set-cookie"), Some(&b"SRV=c2~app; path=/"[..]));
        assert_eq!(f.server, b'R');
    }

    /// xxHash's reference digests.
    #[test]
    fn xxh64_vectors() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
    }

    /// The value HAProxy 2.6.12 inserted for `dynamic-cookie-key s3cr3t`, `cookie SRV insert
    /// dynamic`, `server s1 127.0.0.1:19120`.
    #[test]
    fn dynamic_cookie_as_haproxy() {
        let addr = "127.0.0.1:19120".parse().expect("addr");
        assert_eq!(dynamic_cookie("s3cr3t", addr), "364a4d86704bf263");
    }

    /// `maxidle`/`maxlife` dates: HAProxy's base64 of the time in 4-second units.
    #[test]
    fn dates() {
        let mut v = String::new();
        s30tob64(1, &mut v);
        assert_eq!(v, "AAAAB");
        assert_eq!(b64tos30(b"AAAAB"), Some(1));
        let mut stamp = String::new();
        s30tob64(NOW >> 2, &mut stamp);
        assert_eq!(b64tos30(stamp.as_bytes()), Some(NOW >> 2));
        let mut ck = cfg(Some(CookieMode::Insert), true);
        ck.maxidle = 3600;
        ck.maxlife = 86400;
        assert_eq!(req(&ck, &format!("SRV=c1|{stamp}|{stamp}")).1.client, b'V');
        assert_eq!(req(&ck, "SRV=c1|AAAAB").1.client, b'E');
        assert_eq!(req(&ck, "SRV=c1|AAAAB|AAAAB").1.client, b'O');
        let (s, f, _) = req(&ck, &format!("SRV=c1|{stamp}|AAAAB"));
        assert_eq!((s, f.client), (None, b'O'));
    }

    /// Any `Cookie` / `Set-Cookie` bytes (quotes, escapes, stray delimiters, dates): no panic.
    #[test]
    fn arbitrary_headers_do_not_panic() {
        const ALPHABET: &[u8] = b"SRV=c1~|;, $\"\\\tAab";
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for mode in [
            Some(CookieMode::Insert),
            Some(CookieMode::Prefix),
            Some(CookieMode::Rewrite),
            None,
        ] {
            let mut ck = cfg(mode, mode == Some(CookieMode::Insert));
            ck.maxidle = 10;
            ck.maxlife = 10;
            for _ in 0..3000 {
                let len = (next() % 24) as usize;
                let v: Vec<u8> = (0..len)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                    .collect();
                let text = String::from_utf8_lossy(&v).into_owned();
                let _ = req(&ck, &text);
                let mut h = Headers::default();
                h.append("Set-Cookie", v.clone());
                let rx = ResCtx {
                    direct: next() % 2 == 0,
                    ignore: false,
                    post: true,
                    cacheable: true,
                    now: NOW,
                };
                server_side(&ck, &mut h, Some("c1"), &rx, &mut Flags::default());
                let _ = capture(&h, true, "S", 3);
                let _ = capture(&h, false, "", 0);
            }
        }
    }
}
