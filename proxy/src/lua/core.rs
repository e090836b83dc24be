//! The `core` table of HAProxy's Lua API: registrations (`register_action`, `register_fetches`,
//! `register_converters`, `register_init`), logging (`log`, `Debug`…`Alert` and the
//! `core.emerg`…`core.debug` levels), `done`, `tokenize`, `now`, `yield`. Messages go where
//! HAProxy 2.6 sends them: to the loggers of the proxy at hand (`txn:log`) or of `global`
//! (`core.log`), and to stderr as `[level] ddd/hhmmss (pid) : msg`.

use std::sync::OnceLock;

use mlua::{Function, Lua, Table, Value};

use super::state::{ACTIONS, CONVERTERS, Ctl, FETCHES, INITS, SERVICES, action_key};
use crate::ana::script::Kind;

/// HAProxy's syslog level names, by level.
pub(crate) const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// Where log lines of scripts go besides stderr: `(proxy name or None for global, level, text)`.
pub type LogSink = Box<dyn Fn(Option<&str>, u8, &str) + Send + Sync>;

static SINK: OnceLock<LogSink> = OnceLock::new();

/// Connects the scripts' log lines to the process's loggers (once, when they are made).
pub fn set_log_sink(sink: LogSink) {
    let _ = SINK.set(sink);
}

/// HAProxy's `hlua_sendlog`: to the loggers, then to stderr (`debug` only in debug mode, which
/// portcullis has not).
pub(crate) fn send_log(proxy: Option<&str>, level: u8, msg: &str) {
    if let Some(s) = SINK.get() {
        s(proxy, level, msg);
    }
    if usize::from(level) >= LEVELS.len() - 1 {
        return;
    }
    let now = chrono::Local::now();
    use chrono::{Datelike, Timelike};
    eprintln!(
        "[{}] {:03}/{:02}{:02}{:02} ({}) : {msg}",
        LEVELS[usize::from(level)],
        now.ordinal0(),
        now.hour(),
        now.minute(),
        now.second(),
        std::process::id()
    );
}

/// HAProxy's `SEND_ERR` for a script failing at run time: an `[ALERT]` on stderr and an `err`
/// line to the proxy's loggers.
pub(crate) fn send_err(proxy: &str, msg: &str) {
    if let Some(s) = SINK.get() {
        s((!proxy.is_empty()).then_some(proxy), 3, msg);
    }
    alert(msg);
}

/// An `[ALERT]` line on stderr.
pub(crate) fn alert(msg: &str) {
    eprintln!("{:<10} ({}) : {msg}", "[ALERT]", std::process::id());
}

fn checking(lua: &Lua) -> bool {
    lua.app_data_ref::<Ctl>().is_some_and(|c| c.checking)
}

/// A log level argument, checked as HAProxy checks it.
pub(crate) fn level(v: &Value, fname: &str) -> mlua::Result<u8> {
    match v {
        Value::Integer(i) if (0..8).contains(i) => Ok(*i as u8),
        Value::Number(n) if (0.0..8.0).contains(n) => Ok(*n as u8),
        _ => Err(mlua::Error::runtime(format!(
            "bad argument #1 to '{fname}' (Invalid loglevel.)"
        ))),
    }
}

/// A message argument: strings and numbers as Lua prints them.
pub(crate) fn text(lua: &Lua, v: Value) -> mlua::Result<String> {
    match lua.coerce_string(v)? {
        Some(s) => Ok(s.to_string_lossy()),
        None => Err(mlua::Error::runtime("bad argument: string expected")),
    }
}

pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let core = lua.create_table()?;
    for (i, name) in LEVELS.iter().enumerate() {
        core.set(*name, i)?;
    }
    core.set(
        "log",
        lua.create_function(|lua, (l, m): (Value, Value)| {
            send_log(None, level(&l, "log")?, &text(lua, m)?);
            Ok(())
        })?,
    )?;
    for (fname, l) in [("Debug", 7u8), ("Info", 6), ("Warning", 4), ("Alert", 1)] {
        core.set(
            fname,
            lua.create_function(move |lua, m: Value| {
                send_log(None, l, &text(lua, m)?);
                Ok(())
            })?,
        )?;
    }
    core.set(
        "register_action",
        lua.create_function(
            |lua, (name, kinds, f, nargs): (String, Table, Function, Option<i64>)| {
                let nargs = usize::try_from(nargs.unwrap_or(0)).map_err(|_| {
                    mlua::Error::runtime("bad argument #4 to 'register_action' (positive integer expected)")
                })?;
                let actions: Table = lua.named_registry_value(ACTIONS)?;
                for k in kinds.sequence_values::<String>() {
                    let k = k?;
                    let kind = match k.as_str() {
                        "http-req" => Some(Kind::HttpReq),
                        "http-res" => Some(Kind::HttpRes),
                        "tcp-req" => Some(Kind::TcpReq),
                        // Registered, but portcullis has no `tcp-response content` rules.
                        "tcp-res" => None,
                        other => {
                            return Err(mlua::Error::runtime(format!(
                                "Lua action '{other}' is not a valid action type ('tcp-req', 'tcp-res', 'http-req' or 'http-res' expected)"
                            )));
                        }
                    };
                    let Some(kind) = kind else { continue };
                    actions.set(action_key(kind, &name), f.clone())?;
                    if checking(lua) {
                        super::registry::record_action(kind, &name, nargs);
                    }
                }
                Ok(())
            },
        )?,
    )?;
    for (fname, table, converter) in [
        ("register_fetches", FETCHES, false),
        ("register_converters", CONVERTERS, true),
    ] {
        core.set(
            fname,
            lua.create_function(move |lua, (name, f): (String, Function)| {
                let t: Table = lua.named_registry_value(table)?;
                t.set(name.as_str(), f)?;
                if checking(lua) {
                    super::registry::record_sample(converter, &name);
                }
                Ok(())
            })?,
        )?;
    }
    core.set(
        "register_service",
        lua.create_function(|lua, (name, mode, f): (String, String, Function)| {
            match mode.as_str() {
                "http" => {}
                // Registered, but portcullis has no `tcp-request content use-service`.
                "tcp" => return Ok(()),
                _ => {
                    return Err(mlua::Error::runtime("'mode' must be 'tcp' or 'http'"));
                }
            }
            let t: Table = lua.named_registry_value(SERVICES)?;
            t.set(name.as_str(), f)?;
            if checking(lua) {
                super::registry::record_service(&name);
            }
            Ok(())
        })?,
    )?;
    core.set(
        "register_init",
        lua.create_function(|lua, f: Function| {
            let t: Table = lua.named_registry_value(INITS)?;
            t.push(f)
        })?,
    )?;
    // Ends the running function at once, without an error (HAProxy's `core.done`).
    core.set(
        "done",
        lua.create_function(|lua, _: mlua::MultiValue| -> mlua::Result<()> {
            if let Some(c) = lua.app_data_ref::<Ctl>() {
                c.done.set(true);
            }
            Err(mlua::Error::runtime("done"))
        })?,
    )?;
    // Nothing runs concurrently inside one state: there is nothing to yield to.
    core.set("yield", lua.create_function(|_, ()| Ok(()))?)?;
    core.set(
        "now",
        lua.create_function(|lua, ()| {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let t = lua.create_table()?;
            t.set("sec", d.as_secs())?;
            t.set("usec", d.subsec_micros())?;
            Ok(t)
        })?,
    )?;
    core.set(
        "tokenize",
        lua.create_function(
            |lua, (s, seps, noblank): (mlua::LuaString, mlua::LuaString, Option<bool>)| {
                let s = s.as_bytes();
                let seps = seps.as_bytes();
                let noblank = noblank.unwrap_or(false);
                let out = lua.create_table()?;
                for tok in s.split(|b| seps.contains(b)) {
                    if noblank && tok.is_empty() {
                        continue;
                    }
                    out.push(lua.create_string(tok)?)?;
                }
                Ok(out)
            },
        )?,
    )?;
    core.set("thread", lua.app_data_ref::<Ctl>().map_or(0, |c| c.id))?;
    lua.globals().set("core", core)
}
