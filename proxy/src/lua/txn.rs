//! One call of a registered function: the message it may change, and the native side of the
//! `txn` object (`txn.http:req_*`/`res_*`, variables, `get_priv`/`set_priv`, `log`, `done`,
//! the fetch and converter objects). The prelude's methods all call [`Call::native`] with the
//! operation's name first.

use std::borrow::Cow;

use mlua::{Lua, MultiValue, Table, Value};

use super::bridge;
use super::core;
use super::state::Ctl;
use crate::ana::rewrite;
use crate::ana::sample::{SampleCtx, SampleValue};
use crate::ana::script::Outcome;
use crate::ana::vars::{Scope, SetCond, VarName};
use crate::config::model::LinePart;
use crate::http::head::{Headers, RequestHead, ResponseHead, Version};

/// The message an action may change.
pub(crate) enum Msg<'a> {
    Req(&'a mut RequestHead),
    Res(&'a mut ResponseHead),
    None,
}

pub(crate) struct Call<'a, 'c> {
    /// The rule's context, without the message (which is in `msg`).
    base: &'a SampleCtx<'c>,
    msg: Msg<'a>,
    /// The registered name, for messages.
    #[allow(dead_code)]
    name: &'a str,
    /// Set by `txn:done()`.
    pub outcome: Option<Outcome>,
    /// The response a service (`core.register_service`) is writing.
    svc: Option<Svc>,
}

/// What an HTTP applet wrote.
#[derive(Default)]
struct Svc {
    status: u16,
    reason: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The request has no body: `getline`/`receive` give the empty string.
    no_body: bool,
}

/// Where `set_priv` keeps a string, number or boolean: a variable no configuration can name.
fn priv_var() -> VarName {
    VarName {
        scope: Scope::Txn,
        name: "\u{1}lua.priv".to_string(),
    }
}

/// A table (or function) given to `set_priv` lives in this registry table of the state, under
/// an id kept in the hidden variable; the oldest are dropped past `PRIV_KEEP`.
const PRIV_TABLE: &str = "portcullis.priv";
const PRIV_KEEP: i64 = 4096;

fn err(m: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(m.into())
}

impl<'a, 'c> Call<'a, 'c> {
    pub fn new(base: &'a SampleCtx<'c>, msg: Msg<'a>, name: &'a str) -> Self {
        Call {
            base,
            msg,
            name,
            outcome: None,
            svc: None,
        }
    }

    /// This call runs a service on `req`.
    pub fn start_service(&mut self, req: &RequestHead) {
        let cl = req.headers.get_last("content-length");
        let no_body = !req.headers.contains("transfer-encoding")
            && cl.is_none_or(|v| v.iter().all(|b| *b == b'0'));
        self.svc = Some(Svc {
            status: 200,
            no_body,
            ..Svc::default()
        });
    }

    /// The response the service wrote, framed as HAProxy's H1 mux frames an applet's: with its
    /// own `content-length`, else chunked to an HTTP/1.1 client, else (HTTP/1.0) ended by the
    /// close. A service that failed answers 500. Also whether the connection must close.
    pub fn service_response(self, req: &RequestHead, failed: bool) -> (u16, Vec<u8>, bool) {
        let svc = self.svc.unwrap_or_default();
        if failed {
            let bytes = crate::http::errors::return_page(500, None, b"", &[], false).wire();
            return (500, bytes, false);
        }
        let status = svc.status;
        let reason = svc
            .reason
            .unwrap_or_else(|| crate::http::errors::reason(status).to_string());
        let version = if req.version == Version::Http10 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        };
        let mut out = format!("{version} {status} {reason}\r\n").into_bytes();
        let mut length = false;
        for (n, v) in &svc.headers {
            let n = n.to_ascii_lowercase();
            if n == "connection" || n == "transfer-encoding" {
                continue;
            }
            length |= n == "content-length";
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        let bodyless = matches!(status, 204 | 304) || status < 200;
        let chunked = !length && !bodyless && req.version != Version::Http10;
        if chunked {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if chunked {
            if !svc.body.is_empty() {
                out.extend_from_slice(format!("{:x}\r\n", svc.body.len()).as_bytes());
                out.extend_from_slice(&svc.body);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else if !bodyless {
            out.extend_from_slice(&svc.body);
        }
        (status, out, !length && !chunked && !bodyless)
    }

    fn svc(&mut self) -> mlua::Result<&mut Svc> {
        self.svc
            .as_mut()
            .ok_or_else(|| err("this function is only available in a service"))
    }

    /// The sample context with the message at hand.
    fn ctx(&self) -> SampleCtx<'_> {
        match &self.msg {
            Msg::Req(r) => SampleCtx {
                req: Some(&**r),
                ..*self.base
            },
            Msg::Res(r) => SampleCtx {
                res: Some(&**r),
                ..*self.base
            },
            Msg::None => *self.base,
        }
    }

    fn req(&mut self) -> mlua::Result<&mut RequestHead> {
        match &mut self.msg {
            Msg::Req(r) => Ok(r),
            _ => Err(err(
                "this function is only available in an http-request action",
            )),
        }
    }

    fn res(&mut self) -> mlua::Result<&mut ResponseHead> {
        match &mut self.msg {
            Msg::Res(r) => Ok(r),
            _ => Err(err(
                "this function is only available in an http-response action",
            )),
        }
    }

    fn headers(&mut self, response: bool) -> mlua::Result<&mut Headers> {
        Ok(if response {
            &mut self.res()?.headers
        } else {
            &mut self.req()?.headers
        })
    }

    pub fn native(&mut self, lua: &Lua, a: MultiValue) -> mlua::Result<MultiValue> {
        let mut a = a.into_iter();
        let op = match a.next() {
            Some(Value::String(s)) => s.to_string_lossy(),
            _ => return Err(err("bad native call")),
        };
        let mut next = || a.next().unwrap_or(Value::Nil);
        let none = || Ok(MultiValue::new());
        let one = |v: Value| Ok(MultiValue::from_iter([v]));
        match op.as_str() {
            "req_get_headers" | "res_get_headers" => {
                let ctx = self.ctx();
                let hs = if op == "req_get_headers" {
                    ctx.req.map(|r| &r.headers)
                } else {
                    ctx.res.map(|r| &r.headers)
                };
                one(Value::Table(headers_table(lua, hs)?))
            }
            "req_set_header" | "req_add_header" | "res_set_header" | "res_add_header" => {
                let name = core::text(lua, next())?;
                let value = core::text(lua, next())?;
                check_field(&name, &value)?;
                let hs = self.headers(op.starts_with("res"))?;
                if op.ends_with("set_header") {
                    hs.set(&name, value.into_bytes());
                } else {
                    hs.append(name, value.into_bytes());
                }
                none()
            }
            "req_del_header" | "res_del_header" => {
                let name = core::text(lua, next())?;
                self.headers(op.starts_with("res"))?.remove(&name);
                none()
            }
            "req_rep_header" | "req_rep_value" | "res_rep_header" | "res_rep_value" => {
                let name = core::text(lua, next())?;
                let re = core::text(lua, next())?;
                let rep = core::text(lua, next())?;
                let re = regex::bytes::Regex::new(&re)
                    .map_err(|e| err(crate::ana::acl::regex_invalid(&re, &e)))?;
                let values = op.ends_with("value");
                let hs = self.headers(op.starts_with("res"))?;
                rewrite::replace_header(&mut hs.0, &name, &re, &rep, values);
                none()
            }
            "req_set_method" | "req_set_path" | "req_set_query" | "req_set_uri" => {
                let v = core::text(lua, next())?;
                let part = match op.as_str() {
                    "req_set_method" => LinePart::Method,
                    "req_set_path" => LinePart::Path,
                    "req_set_query" => LinePart::Query,
                    _ => LinePart::Uri,
                };
                rewrite::set_part(self.req()?, part, &v);
                one(Value::Boolean(true))
            }
            "res_set_status" => {
                let status = match next() {
                    Value::Integer(i) => u16::try_from(i).ok(),
                    Value::Number(n) => Some(n as u16),
                    Value::String(s) => s.to_str().ok().and_then(|s| s.parse().ok()),
                    _ => None,
                }
                .filter(|s| (100..=999).contains(s))
                .ok_or_else(|| err("bad argument #1 to 'res_set_status' (invalid status code)"))?;
                let reason = match next() {
                    Value::Nil => None,
                    v => Some(core::text(lua, v)?),
                };
                let res = self.res()?;
                res.status = status;
                res.reason =
                    reason.unwrap_or_else(|| crate::http::errors::reason(status).to_string());
                none()
            }
            "get_var" => {
                let name = core::text(lua, next())?;
                let v = match (VarName::parse(&name), self.base.vars) {
                    (Ok(n), Some(vars)) => vars.get(&n),
                    _ => None,
                };
                match v {
                    Some(v) => one(bridge::to_lua(lua, &v)?),
                    None => one(Value::Nil),
                }
            }
            "set_var" => {
                let name = core::text(lua, next())?;
                let value = next();
                let ifexist = matches!(next(), Value::Boolean(true));
                let (Ok(n), Some(vars)) = (VarName::parse(&name), self.base.vars) else {
                    return one(Value::Boolean(false));
                };
                let Some(v) = bridge::from_lua(&value) else {
                    return one(Value::Boolean(false));
                };
                let conds: &[SetCond] = if ifexist { &[SetCond::IfExists] } else { &[] };
                vars.set(&n, v, conds);
                one(Value::Boolean(true))
            }
            "unset_var" => {
                let name = core::text(lua, next())?;
                if let (Ok(n), Some(vars)) = (VarName::parse(&name), self.base.vars) {
                    vars.unset(&n);
                }
                one(Value::Boolean(true))
            }
            "set_priv" => {
                self.set_priv(lua, next())?;
                none()
            }
            "get_priv" => one(self.get_priv(lua)?),
            "log" => {
                let l = core::level(&next(), "log")?;
                let m = core::text(lua, next())?;
                core::send_log(Some(self.base.frontend), l, &m);
                none()
            }
            "Debug" | "Info" | "Warning" | "Alert" => {
                let l = match op.as_str() {
                    "Debug" => 7,
                    "Info" => 6,
                    "Warning" => 4,
                    _ => 1,
                };
                let m = core::text(lua, next())?;
                core::send_log(Some(self.base.frontend), l, &m);
                none()
            }
            "done" => {
                let reply = next();
                self.outcome = Some(match (&reply, &self.msg) {
                    (Value::Table(t), Msg::Req(_)) => {
                        let (status, bytes) = reply_bytes(t)?;
                        Outcome::Reply { status, bytes }
                    }
                    _ => Outcome::Done,
                });
                if let Some(c) = lua.app_data_ref::<Ctl>() {
                    c.done.set(true);
                }
                Err(err("done"))
            }
            "set_status" => {
                let status = match next() {
                    Value::Integer(i) => u16::try_from(i).ok(),
                    Value::Number(n) => Some(n as u16),
                    _ => None,
                }
                .filter(|s| (100..=599).contains(s))
                .ok_or_else(|| err("bad argument #1 to 'set_status' (invalid status code)"))?;
                let reason = match next() {
                    Value::Nil => None,
                    v => Some(core::text(lua, v)?),
                };
                let svc = self.svc()?;
                svc.status = status;
                svc.reason = reason;
                none()
            }
            "add_header" => {
                let name = core::text(lua, next())?;
                let value = core::text(lua, next())?;
                check_field(&name, &value)?;
                self.svc()?.headers.push((name, value));
                none()
            }
            "start_response" => {
                self.svc()?;
                none()
            }
            "send" => {
                let v = next();
                let bytes = match &v {
                    Value::String(s) => s.as_bytes().to_vec(),
                    v => core::text(lua, v.clone())?.into_bytes(),
                };
                self.svc()?.body.extend_from_slice(&bytes);
                none()
            }
            "getline" | "receive" => {
                if !self.svc()?.no_body {
                    return Err(err(
                        "the request body is not available to Lua services in portcullis",
                    ));
                }
                one(Value::String(lua.create_string("")?))
            }
            "fetch" => {
                let kw = core::text(lua, next())?;
                let string = matches!(next(), Value::Boolean(true));
                let args = rest_text(lua, &mut next)?;
                let v = bridge::fetch(&self.ctx(), &kw, &args).map_err(err)?;
                sample_out(lua, v, string)
            }
            "conv" => {
                let kw = core::text(lua, next())?;
                let string = matches!(next(), Value::Boolean(true));
                let input = bridge::from_lua(&next());
                let args = rest_text(lua, &mut next)?;
                let v = match input {
                    Some(i) => bridge::convert(&self.ctx(), &kw, i, &args).map_err(err)?,
                    None => None,
                };
                sample_out(lua, v, string)
            }
            other => Err(err(format!("unknown function '{other}'"))),
        }
    }

    fn set_priv(&mut self, lua: &Lua, v: Value) -> mlua::Result<()> {
        let Some(vars) = self.base.vars else {
            return Ok(());
        };
        let var = priv_var();
        match v {
            Value::Nil => vars.unset(&var),
            Value::Table(_) | Value::Function(_) | Value::UserData(_) => {
                let store: Table = match lua.named_registry_value::<Value>(PRIV_TABLE)? {
                    Value::Table(t) => t,
                    _ => {
                        let t = lua.create_table()?;
                        lua.set_named_registry_value(PRIV_TABLE, &t)?;
                        t
                    }
                };
                let id: i64 = store.get::<Option<i64>>("next")?.unwrap_or(1);
                store.set("next", id + 1)?;
                store.set(id, v)?;
                store.set(id - PRIV_KEEP, Value::Nil)?;
                // Tagged so that a plain string cannot be taken for a reference.
                vars.set(
                    &var,
                    SampleValue::Bin(Cow::Owned(id.to_be_bytes().to_vec())),
                    &[],
                );
            }
            v => {
                if let Some(s) = bridge::from_lua(&v) {
                    vars.set(&var, s, &[]);
                }
            }
        }
        Ok(())
    }

    fn get_priv(&self, lua: &Lua) -> mlua::Result<Value> {
        let Some(v) = self.base.vars.and_then(|vars| vars.get(&priv_var())) else {
            return Ok(Value::Nil);
        };
        if let SampleValue::Bin(b) = &v
            && let Ok(id) = <[u8; 8]>::try_from(b.as_ref())
        {
            let store: Value = lua.named_registry_value(PRIV_TABLE)?;
            return match store {
                Value::Table(t) => t.get(i64::from_be_bytes(id)),
                _ => Ok(Value::Nil),
            };
        }
        bridge::to_lua(lua, &v)
    }
}

/// The fields of an applet: `method`, `version`, `path`, `qs`, `length`, `headers`.
pub(crate) fn applet_fields(lua: &Lua, req: &RequestHead) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("method", req.method.as_str())?;
    t.set("version", req.version.as_str().trim_start_matches("HTTP/"))?;
    t.set("path", req.path())?;
    t.set("qs", req.query().unwrap_or(""))?;
    let length = req
        .headers
        .get_last("content-length")
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok())
        .unwrap_or(0);
    t.set("length", length)?;
    t.set("headers", headers_table(lua, Some(&req.headers))?)?;
    Ok(t)
}

/// A header a script adds must be one the H1 writer can send as is.
fn check_field(name: &str, value: &str) -> mlua::Result<()> {
    if !is_token(name) || value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(err(format!("invalid header '{name}'")));
    }
    Ok(())
}

fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The remaining arguments as strings (numbers as Lua prints them).
fn rest_text(lua: &Lua, next: &mut impl FnMut() -> Value) -> mlua::Result<Vec<String>> {
    let mut out = Vec::new();
    loop {
        match next() {
            Value::Nil => return Ok(out),
            v => out.push(core::text(lua, v)?),
        }
    }
}

/// A fetch or converter result: `sf`/`sc` give a string (empty for none), `f`/`c` the value or
/// `nil`.
fn sample_out(
    lua: &Lua,
    v: Option<SampleValue<'static>>,
    string: bool,
) -> mlua::Result<MultiValue> {
    let v = match (v, string) {
        (Some(v), true) => Value::String(lua.create_string(v.to_str().as_bytes())?),
        (None, true) => Value::String(lua.create_string("")?),
        (Some(v), false) => bridge::to_lua(lua, &v)?,
        (None, false) => Value::Nil,
    };
    Ok(MultiValue::from_iter([v]))
}

/// `txn.http:req_get_headers()`: lowercased names, each to its values indexed from 0.
fn headers_table(lua: &Lua, hs: Option<&Headers>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for h in hs.map_or(&[][..], |h| &h.0[..]) {
        let name = h.name.to_ascii_lowercase();
        let vals: Table = match t.get::<Value>(name.as_str())? {
            Value::Table(v) => v,
            _ => {
                let v = lua.create_table()?;
                t.set(name.as_str(), &v)?;
                v
            }
        };
        let n = vals.raw_len() + usize::from(vals.contains_key(0)?);
        vals.set(n, lua.create_string(&h.value)?)?;
    }
    Ok(t)
}

/// The response `txn:done(reply)` sends, as HAProxy 2.6 writes it: status line (the reply's
/// reason or the status's), the reply's headers with lowercased names, `content-length`
/// (except for 204 and 304, which carry no body), then the body.
pub(crate) fn reply_bytes(r: &Table) -> mlua::Result<(u16, Vec<u8>)> {
    let status = match r.get::<Value>("status")? {
        Value::Integer(i) => u16::try_from(i).ok(),
        Value::Number(n) => Some(n as u16),
        Value::Nil => Some(200),
        _ => None,
    }
    .filter(|s| (100..=599).contains(s))
    .ok_or_else(|| err("txn:done(): invalid reply status"))?;
    let reason = match r.get::<Value>("reason")? {
        Value::String(s) => s.to_string_lossy(),
        _ => crate::http::errors::reason(status).to_string(),
    };
    let body = match r.get::<Value>("body")? {
        Value::String(s) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    };
    let bodyless = matches!(status, 204 | 304) || status < 200;
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    if let Value::Table(hs) = r.get::<Value>("headers")? {
        for pair in hs.pairs::<String, Value>() {
            let (name, vals) = pair?;
            let name = name.to_ascii_lowercase();
            // The mux writes these itself.
            if name == "content-length" || name == "connection" || !is_token(&name) {
                continue;
            }
            let vals: Vec<Value> = match vals {
                Value::Table(t) => t.sequence_values::<Value>().collect::<mlua::Result<_>>()?,
                v => vec![v],
            };
            for v in vals {
                let v = match v {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(i) => i.to_string().into_bytes(),
                    Value::Number(n) => n.to_string().into_bytes(),
                    _ => continue,
                };
                // A value cannot end the head early.
                if v.iter().any(|b| matches!(b, b'\r' | b'\n')) {
                    continue;
                }
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(&v);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    if !bodyless {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if !bodyless {
        out.extend_from_slice(&body);
    }
    Ok((status, out))
}
