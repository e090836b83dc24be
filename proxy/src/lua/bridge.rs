//! Samples and Lua values, and the `txn.f`/`txn.sf` fetches and `txn.c`/`txn.sc` converters
//! over the proxy's own sample engine.

use std::borrow::Cow;

use mlua::{Lua, Value};

use crate::ana::sample::{Conv, SampleCtx, SampleExpr, SampleValue, find_fetch, parse_sample};

/// A sample as Lua sees it: strings (addresses as text), integers, booleans.
pub(crate) fn to_lua(lua: &Lua, v: &SampleValue<'_>) -> mlua::Result<Value> {
    Ok(match v {
        SampleValue::Str(s) => Value::String(lua.create_string(s.as_bytes())?),
        SampleValue::Bin(b) => Value::String(lua.create_string(b.as_ref())?),
        SampleValue::Int(i) => Value::Integer(*i),
        SampleValue::Bool(b) => Value::Boolean(*b),
        SampleValue::Ip(ip) => Value::String(lua.create_string(ip.to_string())?),
    })
}

/// A Lua value as a sample; `nil` (and values that are none of these) is no sample.
pub(crate) fn from_lua(v: &Value) -> Option<SampleValue<'static>> {
    Some(match v {
        Value::String(s) => match std::str::from_utf8(&s.as_bytes()) {
            Ok(t) => SampleValue::Str(Cow::Owned(t.to_string())),
            Err(_) => SampleValue::Bin(Cow::Owned(s.as_bytes().to_vec())),
        },
        Value::Integer(i) => SampleValue::Int(*i),
        // HAProxy stores Lua numbers as integers.
        Value::Number(n) => SampleValue::Int(*n as i64),
        Value::Boolean(b) => SampleValue::Bool(*b),
        _ => return None,
    })
}

/// The fetch keyword a method name stands for: `req_fhdr` is `req.fhdr` (HAProxy makes the
/// method names by replacing `.` with `_`).
fn fetch_keyword(method: &str) -> Option<String> {
    let unders: Vec<usize> = method.match_indices('_').map(|(i, _)| i).collect();
    if unders.len() > 8 {
        return find_fetch(method).map(|_| method.to_string());
    }
    (0u32..1 << unders.len()).find_map(|mask| {
        let mut kw = method.as_bytes().to_vec();
        for (bit, &at) in unders.iter().enumerate() {
            if mask & (1 << bit) != 0 {
                kw[at] = b'.';
            }
        }
        let kw = String::from_utf8(kw).ok()?;
        find_fetch(&kw).map(|_| kw)
    })
}

/// An argument as the sample parser reads it back (`\` before what would end or split it).
fn quote(a: &str) -> String {
    let mut out = String::with_capacity(a.len());
    for c in a.chars() {
        if matches!(c, ',' | ')' | '(' | '\\' | '"' | '\'') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `txn.f:<method>(args…)`: the fetch compiled from its keyword and arguments.
pub(crate) fn fetch_expr(method: &str, args: &[String]) -> Result<SampleExpr, String> {
    let kw = fetch_keyword(method).ok_or_else(|| format!("unknown fetch method '{method}'"))?;
    let text = if args.is_empty() {
        kw
    } else {
        let a: Vec<String> = args.iter().map(|a| quote(a)).collect();
        format!("{kw}({})", a.join(","))
    };
    parse_sample(&text)
}

thread_local! {
    /// Compiled `txn.f` calls of this thread, by method and arguments (scripts call the same
    /// few again and again).
    static COMPILED: std::cell::RefCell<std::collections::HashMap<(String, Vec<String>), SampleExpr>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Bound on [`COMPILED`]: arguments built from request data could make every call new.
const COMPILED_MAX: usize = 1024;

/// Evaluates `txn.f:<method>(args…)`.
pub(crate) fn fetch(
    ctx: &SampleCtx<'_>,
    method: &str,
    args: &[String],
) -> Result<Option<SampleValue<'static>>, String> {
    let key = (method.to_string(), args.to_vec());
    let cached = COMPILED.with(|c| c.borrow().get(&key).cloned());
    let e = match cached {
        Some(e) => e,
        None => {
            let e = fetch_expr(method, args)?;
            COMPILED.with(|c| {
                let mut c = c.borrow_mut();
                if c.len() >= COMPILED_MAX {
                    c.clear();
                }
                c.insert(key, e.clone());
            });
            e
        }
    };
    Ok(e.eval(ctx).map(SampleValue::into_owned))
}

/// Applies `txn.c:<name>(input, args…)`.
pub(crate) fn convert(
    ctx: &SampleCtx<'_>,
    name: &str,
    input: SampleValue<'static>,
    args: &[String],
) -> Result<Option<SampleValue<'static>>, String> {
    let conv = match Conv::parse(name, args) {
        Some(c) => c?,
        None => return Err(format!("unknown converter '{name}'")),
    };
    let env = crate::ana::conv::ConvEnv {
        vars: ctx.vars,
        stick: ctx.stick,
    };
    Ok(conv.apply_with(input, &env).map(SampleValue::into_owned))
}
