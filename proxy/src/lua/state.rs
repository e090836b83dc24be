//! Lua states: the checking state that runs each `lua-load` while the configuration is parsed,
//! and one serving state per worker thread, made at its first use by replaying the same
//! `lua-prepend-path`/`lua-load` lines (HAProxy's `lua-load-per-thread`). Running a registered
//! function: the deadline of `tune.lua.session-timeout`, HAProxy's error messages.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};

use super::registry::{self, Step};
use super::txn::{Call, Msg};
use crate::ana::sample::{SampleCtx, SampleValue};
use crate::ana::script::{Kind, Outcome, Tune};
use crate::http::head::RequestHead;

/// Per-state facts the native functions read (Lua app data).
pub(crate) struct Ctl {
    /// The checking state: registrations also become configuration keywords.
    pub checking: bool,
    /// HAProxy's `[state-id N]` in error messages (0 for the checking state, else the worker's).
    pub id: usize,
    /// When the running function must stop (`tune.lua.session-timeout`).
    pub deadline: Cell<Option<Instant>>,
    /// The hook stopped the function on its deadline.
    pub timed_out: Cell<bool>,
    /// `core.done()` was called: the function ends without an error.
    pub done: Cell<bool>,
    /// `tune.lua.session-timeout` in ms (0: none).
    pub session_ms: u64,
    /// `tune.lua.service-timeout` in ms (0: none).
    pub service_ms: u64,
}

pub(crate) struct State {
    lua: Lua,
    generation: u64,
    /// The prelude's constructor of txn objects.
    make_txn: Function,
    /// The prelude's constructor of applet objects (`core.register_service`).
    make_applet: Function,
}

thread_local! {
    static CHECK: RefCell<Option<State>> = const { RefCell::new(None) };
    static SERVE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Numbers the serving states as HAProxy numbers its per-thread ones (from 1).
static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Registry tables of a state: registered functions by name.
pub(crate) const ACTIONS: &str = "portcullis.actions";
pub(crate) const FETCHES: &str = "portcullis.fetches";
pub(crate) const CONVERTERS: &str = "portcullis.converters";
pub(crate) const INITS: &str = "portcullis.inits";
pub(crate) const SERVICES: &str = "portcullis.services";

fn new_state(checking: bool, generation: u64, tune: Tune) -> mlua::Result<State> {
    let lua = Lua::new();
    if tune.maxmem > 0 {
        lua.set_memory_limit(tune.maxmem)?;
    }
    let id = if checking {
        0
    } else {
        NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
    lua.set_app_data(Ctl {
        checking,
        id,
        deadline: Cell::new(None),
        timed_out: Cell::new(false),
        done: Cell::new(false),
        session_ms: tune.session_timeout_ms,
        service_ms: tune.service_timeout_ms,
    });
    for t in [ACTIONS, FETCHES, CONVERTERS, INITS, SERVICES] {
        lua.set_named_registry_value(t, lua.create_table()?)?;
    }
    super::core::install(&lua)?;
    let prelude: Table = lua
        .load(include_str!("prelude.lua"))
        .set_name("=portcullis")
        .eval()?;
    let make_txn: Function = prelude.get("txn")?;
    let make_applet: Function = prelude.get("applet")?;
    // HAProxy checks its timeouts when it forces a yield; a state checks its deadline as often.
    let triggers = HookTriggers {
        every_nth_instruction: Some(tune.forced_yield.max(1)),
        ..HookTriggers::new()
    };
    lua.set_hook(triggers, |lua, _| {
        let Some(ctl) = lua.app_data_ref::<Ctl>() else {
            return Ok(VmState::Continue);
        };
        if ctl.deadline.get().is_some_and(|d| Instant::now() >= d) {
            ctl.timed_out.set(true);
            return Err(mlua::Error::runtime("execution timeout"));
        }
        Ok(VmState::Continue)
    })?;
    Ok(State {
        lua,
        generation,
        make_txn,
        make_applet,
    })
}

/// HAProxy's `hlua_traceback` from the traceback mlua appends to a runtime error (Lua's
/// `luaL_traceback` text): its first frame is mlua's own handler, unnamed C frames are left out
/// (the caller's included), and each frame is worded as HAProxy words it (`in function line N`,
/// `in global 'f'`, ` ...` after a tail call), joined with `, `. `None` without a traceback.
pub(crate) fn haproxy_traceback(m: &str) -> Option<String> {
    let (_, tb) = m.split_once("\nstack traceback:\n")?;
    let mut frames: Vec<String> = Vec::new();
    for line in tb.lines().skip(1) {
        let line = line.trim_start_matches('\t');
        if line == "(...tail calls...)" {
            if let Some(last) = frames.last_mut() {
                last.push_str(" ...");
            }
            continue;
        }
        let Some((place, what)) = line.split_once(" in ") else {
            continue;
        };
        if place == "[C]:" && what == "?" {
            continue;
        }
        let what = if let Some(rest) = what.strip_prefix("function <") {
            let line_no = rest.trim_end_matches('>').rsplit(':').next().unwrap_or("");
            format!("function line {line_no}")
        } else if let Some(rest) = what.strip_prefix("function '") {
            // Lua names a global function by where it found it; HAProxy asks the call site.
            match rest.trim_end_matches('\'').rsplit_once('.') {
                Some((_, field)) => format!("field '{field}'"),
                None => format!("global '{}", rest),
            }
        } else {
            what.to_string()
        };
        frames.push(format!("{place} in {what}"));
    }
    (!frames.is_empty()).then(|| frames.join(", "))
}

/// The message of a Lua error as Lua wrote it (`file.lua:3: attempt to …`), without mlua's
/// wrapping.
pub(crate) fn message(e: &mlua::Error) -> String {
    match e {
        // mlua appends Lua's traceback; HAProxy prints the message alone.
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m
            .split_once("\nstack traceback:")
            .map_or(m.as_str(), |(head, _)| head)
            .to_string(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::WithContext { cause, .. } => message(cause),
        other => other.to_string(),
    }
}

/// Reads a `lua-load` file, in HAProxy's words on failure.
fn read_file(file: &str) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
            _ => e.to_string(),
        };
        format!("error in Lua file '{file}': cannot open {file}: {why}")
    })
}

/// Runs one file's `code` in `lua` with the `lua-load` arguments (`...` in the chunk), in
/// HAProxy's words on failure.
fn run_file(lua: &Lua, file: &str, code: &[u8], args: &[String]) -> Result<(), String> {
    let chunk = lua
        .load(code)
        .set_name(format!("@{file}"))
        .into_function()
        .map_err(|e| format!("error in Lua file '{file}': {}", message(&e)))?;
    let args: MultiValue = args
        .iter()
        .map(|a| lua.create_string(a).map(Value::String))
        .collect::<mlua::Result<_>>()
        .map_err(|e| format!("Lua runtime error: {}", message(&e)))?;
    chunk.call::<()>(args).map_err(|e| match e {
        mlua::Error::MemoryError(_) => "Lua out of memory error.".to_string(),
        e => format!("Lua runtime error: {}", message(&e)),
    })
}

/// `lua-prepend-path`: into the checking state now (if there is one), and for every state made
/// later.
pub(crate) fn prepend_path(path: &str, cpath: bool) {
    registry::push(Step::Path {
        path: path.to_string(),
        cpath,
    });
    CHECK.with(|c| {
        if let Some(s) = c.borrow().as_ref() {
            let _ = apply_path(&s.lua, path, cpath);
        }
    });
}

fn apply_path(lua: &Lua, path: &str, cpath: bool) -> mlua::Result<()> {
    let package: Table = lua.globals().get("package")?;
    let key = if cpath { "cpath" } else { "path" };
    let old: String = package.get(key)?;
    package.set(key, format!("{path};{old}"))
}

/// `lua-load <file> [args]` while parsing: runs it in this thread's checking state.
pub(crate) fn load(file: &str, args: &[String], _per_thread: bool) -> Result<Vec<String>, String> {
    let generation = registry::generation();
    let code = CHECK.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|s| s.generation != generation) {
            let s = new_state(true, generation, registry::tune())
                .map_err(|e| format!("Lua runtime error: {}", message(&e)))?;
            // Paths given before this state existed.
            for step in registry::snapshot().1 {
                if let Step::Path { path, cpath } = step {
                    let _ = apply_path(&s.lua, &path, cpath);
                }
            }
            *c = Some(s);
        }
        let Some(s) = c.as_ref() else {
            return Err("Lua runtime error: no state".to_string());
        };
        let code = read_file(file)?;
        run_file(&s.lua, file, &code, args)?;
        Ok(code)
    })?;
    registry::push(Step::Load {
        file: file.to_string(),
        args: args.to_vec(),
        code: code.into(),
    });
    Ok(registry::take_warnings())
}

/// A worker's state: every step replayed, then the `core.register_init` functions run.
fn serving_state() -> mlua::Result<State> {
    let (generation, steps, tune) = registry::snapshot();
    let s = new_state(false, generation, tune)?;
    for step in steps {
        match step {
            Step::Path { path, cpath } => apply_path(&s.lua, &path, cpath)?,
            Step::Load { file, args, code } => {
                if let Err(e) = run_file(&s.lua, &file, &code, &args) {
                    super::core::alert(&e);
                }
            }
        }
    }
    let inits: Table = s.lua.named_registry_value(INITS)?;
    for f in inits.sequence_values::<Function>() {
        if let Err(e) = f.and_then(|f| f.call::<()>(())) {
            super::core::alert(&format!("Lua init: runtime error: {}.", message(&e)));
        }
    }
    Ok(s)
}

/// Runs `f` with this thread's serving state, made (or remade for a new configuration) first.
fn with_state<R>(f: impl FnOnce(&State) -> Option<R>) -> Option<R> {
    SERVE.with(|cell| {
        let current = registry::generation();
        let stale = match cell.try_borrow() {
            Ok(s) => s.as_ref().is_none_or(|s| s.generation != current),
            // Re-entered from a function running in this state: it is current.
            Err(_) => false,
        };
        if stale {
            match serving_state() {
                Ok(s) => *cell.try_borrow_mut().ok()? = Some(s),
                Err(e) => {
                    super::core::alert(&format!("Lua: cannot make a state: {}", message(&e)));
                    return None;
                }
            }
        }
        let s = cell.try_borrow().ok()?;
        f(s.as_ref()?)
    })
}

/// A runtime error as HAProxy reports it: `<message> from <traceback>`.
fn runtime_message(e: &mlua::Error) -> String {
    let raw = match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            return runtime_message(cause);
        }
        mlua::Error::RuntimeError(m) => m.as_str(),
        other => return message(other),
    };
    match haproxy_traceback(raw) {
        Some(tb) => format!("{} from {tb}", message(e)),
        None => message(e),
    }
}

/// Makes this thread's serving state now (a worker at start) when the configuration loads
/// any file: its `core.register_init` functions run and its load errors show before the first
/// request rather than with it.
pub(crate) fn warm() {
    let (_, steps, _) = registry::snapshot();
    if steps.iter().any(|s| matches!(s, Step::Load { .. })) {
        with_state(|_| Some(()));
    }
}

/// How a function ended.
enum Ended {
    Ok(MultiValue),
    /// `core.done()` or `txn:done()`.
    Done,
    Timeout,
    Error(String),
}

/// Calls `f` under the session deadline (an outer call's deadline stays when re-entered).
fn guarded(s: &State, f: &Function, args: MultiValue) -> Ended {
    guarded_for(s, f, args, false)
}

/// [`guarded`], under the service deadline for a service.
fn guarded_for(s: &State, f: &Function, args: MultiValue, service: bool) -> Ended {
    let Some(ctl) = s.lua.app_data_ref::<Ctl>() else {
        return Ended::Error("no state".into());
    };
    let outer = ctl.deadline.get();
    if outer.is_none() {
        let ms = if service {
            ctl.service_ms
        } else {
            ctl.session_ms
        };
        ctl.deadline
            .set((ms > 0).then(|| Instant::now() + Duration::from_millis(ms)));
        ctl.timed_out.set(false);
        ctl.done.set(false);
    }
    drop(ctl);
    let r = f.call::<MultiValue>(args);
    let Some(ctl) = s.lua.app_data_ref::<Ctl>() else {
        return Ended::Error("no state".into());
    };
    let ended = match r {
        Ok(v) => Ended::Ok(v),
        Err(_) if ctl.done.get() => Ended::Done,
        Err(_) if ctl.timed_out.get() => Ended::Timeout,
        Err(e) => Ended::Error(runtime_message(&e)),
    };
    if outer.is_none() {
        ctl.deadline.set(None);
        ctl.done.set(false);
    }
    ended
}

fn state_id(s: &State) -> usize {
    s.lua.app_data_ref::<Ctl>().map_or(0, |c| c.id)
}

/// The registered function `name` in registry table `table`.
fn lookup(s: &State, table: &str, key: &str) -> Option<Value> {
    let t: Table = s.lua.named_registry_value(table).ok()?;
    t.get::<Value>(key).ok().filter(|v| !v.is_nil())
}

pub(crate) fn action_key(kind: Kind, name: &str) -> String {
    let k = match kind {
        Kind::HttpReq => "http-req",
        Kind::HttpRes => "http-res",
        Kind::TcpReq => "tcp-req",
    };
    format!("{k}:{name}")
}

/// Runs action `lua.<name>` of `kind` on the message at hand.
pub(crate) fn action(
    kind: Kind,
    name: &str,
    args: &[String],
    msg: Msg<'_>,
    ctx: &SampleCtx<'_>,
) -> Outcome {
    with_state(|s| Some(run_action(s, kind, name, args, msg, ctx))).unwrap_or(Outcome::Continue)
}

/// [`action`] in a given state.
pub(crate) fn run_action(
    s: &State,
    kind: Kind,
    name: &str,
    args: &[String],
    msg: Msg<'_>,
    ctx: &SampleCtx<'_>,
) -> Outcome {
    let Some(Value::Function(f)) = lookup(s, ACTIONS, &action_key(kind, name)) else {
        return Outcome::Continue;
    };
    let http = !matches!(msg, Msg::None);
    let call = RefCell::new(Call::new(ctx, msg, name));
    let ended = s.lua.scope(|scope| {
        let native =
            scope.create_function(|lua, a: MultiValue| call.borrow_mut().native(lua, a))?;
        let txn: Table = s.make_txn.call((native, http))?;
        let mut a = MultiValue::new();
        a.push_back(Value::Table(txn));
        for x in args {
            a.push_back(Value::String(s.lua.create_string(x)?));
        }
        Ok(guarded(s, &f, a))
    });
    let call = call.into_inner();
    match ended {
        Ok(Ended::Ok(_)) | Ok(Ended::Done) => {}
        Ok(Ended::Timeout) => super::core::send_err(
            ctx.frontend,
            &format!("Lua function '{name}': execution timeout."),
        ),
        Ok(Ended::Error(m)) | Err(mlua::Error::RuntimeError(m)) => super::core::send_err(
            ctx.frontend,
            &format!(
                "Lua function '{name}': [state-id {}] runtime error: {m}.",
                state_id(s)
            ),
        ),
        Err(e) => super::core::send_err(
            ctx.frontend,
            &format!("Lua function '{name}': {}.", message(&e)),
        ),
    }
    call.outcome.unwrap_or(Outcome::Continue)
}

/// Runs fetch `lua.<name>(args)`: its result as a sample (`nil` is none).
pub(crate) fn fetch(
    name: &str,
    args: &[String],
    ctx: &SampleCtx<'_>,
) -> Option<SampleValue<'static>> {
    with_state(|s| run_fetch(s, name, args, ctx))
}

pub(crate) fn run_fetch(
    s: &State,
    name: &str,
    args: &[String],
    ctx: &SampleCtx<'_>,
) -> Option<SampleValue<'static>> {
    let Some(Value::Function(f)) = lookup(s, FETCHES, name) else {
        return None;
    };
    let call = RefCell::new(Call::new(ctx, Msg::None, name));
    let ended = s.lua.scope(|scope| {
        let native =
            scope.create_function(|lua, a: MultiValue| call.borrow_mut().native(lua, a))?;
        let http = ctx.req.is_some() || ctx.res.is_some();
        let txn: Table = s.make_txn.call((native, http))?;
        let mut a = MultiValue::new();
        a.push_back(Value::Table(txn));
        for x in args {
            a.push_back(Value::String(s.lua.create_string(x)?));
        }
        Ok(guarded(s, &f, a))
    });
    finish_sample(s, ctx.frontend, "sample-fetch", name, ended)
}

/// Runs converter `lua.<name>(args)` on `input`.
pub(crate) fn convert(
    name: &str,
    args: &[String],
    input: SampleValue<'_>,
) -> Option<SampleValue<'static>> {
    with_state(|s| run_convert(s, name, args, &input))
}

pub(crate) fn run_convert(
    s: &State,
    name: &str,
    args: &[String],
    input: &SampleValue<'_>,
) -> Option<SampleValue<'static>> {
    let Some(Value::Function(f)) = lookup(s, CONVERTERS, name) else {
        return None;
    };
    let ended = (|| {
        let mut a = MultiValue::new();
        a.push_back(super::bridge::to_lua(&s.lua, input)?);
        for x in args {
            a.push_back(Value::String(s.lua.create_string(x)?));
        }
        Ok(guarded(s, &f, a))
    })();
    finish_sample(s, "", "converter", name, ended)
}

/// Runs HTTP service `lua.<name>` (`http-request use-service`) on the request: the response
/// it wrote (status, bytes, whether the connection must close after it).
pub(crate) fn service(
    name: &str,
    req: &RequestHead,
    ctx: &SampleCtx<'_>,
) -> Option<(u16, Vec<u8>, bool)> {
    with_state(|s| run_service(s, name, req, ctx))
}

pub(crate) fn run_service(
    s: &State,
    name: &str,
    req: &RequestHead,
    ctx: &SampleCtx<'_>,
) -> Option<(u16, Vec<u8>, bool)> {
    let Some(Value::Function(f)) = lookup(s, SERVICES, name) else {
        return None;
    };
    let ctx = SampleCtx {
        req: Some(req),
        ..*ctx
    };
    let call = RefCell::new(Call::new(&ctx, Msg::None, name));
    call.borrow_mut().start_service(req);
    let ended = s.lua.scope(|scope| {
        let native =
            scope.create_function(|lua, a: MultiValue| call.borrow_mut().native(lua, a))?;
        let fields = super::txn::applet_fields(&s.lua, req)?;
        let applet: Table = s.make_applet.call((native, fields))?;
        Ok(guarded_for(
            s,
            &f,
            MultiValue::from_iter([Value::Table(applet)]),
            true,
        ))
    });
    let failed = match ended {
        Ok(Ended::Ok(_)) | Ok(Ended::Done) => None,
        Ok(Ended::Timeout) => Some("execution timeout".to_string()),
        Ok(Ended::Error(m)) | Err(mlua::Error::RuntimeError(m)) => {
            Some(format!("[state-id {}] runtime error: {m}", state_id(s)))
        }
        Err(e) => Some(message(&e)),
    };
    if let Some(m) = &failed {
        super::core::send_err(ctx.frontend, &format!("Lua applet http '{name}': {m}."));
    }
    let call = call.into_inner();
    Some(call.service_response(req, failed.is_some()))
}

/// A serving state running `code` (unit tests: no registry, no thread-local).
#[cfg(test)]
pub(crate) fn test_state(code: &str, tune: Tune) -> mlua::Result<State> {
    let s = new_state(false, 0, tune)?;
    s.lua.load(code).set_name("@test.lua").exec()?;
    Ok(s)
}

fn finish_sample(
    s: &State,
    proxy: &str,
    what: &str,
    name: &str,
    ended: mlua::Result<Ended>,
) -> Option<SampleValue<'static>> {
    match ended {
        Ok(Ended::Ok(v)) => v
            .into_iter()
            .next()
            .and_then(|v| super::bridge::from_lua(&v)),
        Ok(Ended::Done) => None,
        Ok(Ended::Timeout) => {
            super::core::send_err(proxy, &format!("Lua {what} '{name}': execution timeout."));
            None
        }
        Ok(Ended::Error(m)) | Err(mlua::Error::RuntimeError(m)) => {
            super::core::send_err(
                proxy,
                &format!(
                    "Lua {what} '{name}': [state-id {}] runtime error: {m}.",
                    state_id(s)
                ),
            );
            None
        }
        Err(e) => {
            super::core::send_err(proxy, &format!("Lua {what} '{name}': {}.", message(&e)));
            None
        }
    }
}
