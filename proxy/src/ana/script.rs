//! The scripting hook: what the config parser, the rules and the sample engine ask of an
//! embedded interpreter (Lua, `lua.<name>` actions, fetches and converters). `ana` owns the
//! interface and `crate::lua` implements it and installs it once at start, so nothing here
//! imports the interpreter (no cycle between the layers). Without a host installed (unit tests,
//! fuzzing) `lua-load` is refused and no `lua.<name>` keyword exists.

use std::sync::OnceLock;

use crate::ana::sample::{SampleCtx, SampleValue};
use crate::http::head::{RequestHead, ResponseHead};

/// Where a registered action may be used (`core.register_action`'s `http-req`, `http-res`,
/// `tcp-req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    HttpReq,
    HttpRes,
    TcpReq,
}

/// What an action asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The next rule runs.
    Continue,
    /// `txn:done(reply)`: this response goes to the client (a complete HTTP/1.1 head without
    /// `connection`, then the body) and the transaction ends.
    Reply { status: u16, bytes: Vec<u8> },
    /// `txn:done()` without a reply: the transaction ends, nothing more is sent.
    Done,
}

/// `tune.lua.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tune {
    /// `tune.lua.session-timeout` (actions, fetches, converters), ms.
    pub session_timeout_ms: u64,
    /// `tune.lua.task-timeout`, ms (0: none).
    pub task_timeout_ms: u64,
    /// `tune.lua.service-timeout`, ms.
    pub service_timeout_ms: u64,
    /// `tune.lua.forced-yield`: instructions between two checks of the timeout.
    pub forced_yield: u32,
    /// `tune.lua.maxmem` in bytes (0: unlimited).
    pub maxmem: usize,
}

impl Default for Tune {
    /// HAProxy 2.6's defaults: 4 s for sessions and services, no task limit, a check every
    /// 10000 instructions, no memory limit.
    fn default() -> Tune {
        Tune {
            session_timeout_ms: 4000,
            task_timeout_ms: 0,
            service_timeout_ms: 4000,
            forced_yield: 10000,
            maxmem: 0,
        }
    }
}

/// The interpreter, as the rest of the proxy sees it.
pub trait Host: Send + Sync {
    /// `lua-load`/`lua-load-per-thread <file> [args]`: runs the file in the checking state (the
    /// registrations become keywords) and records it for the workers' states. `Ok` carries
    /// warnings; `Err` is HAProxy's message without the `parsing [f:l] :` prefix.
    fn load(&self, file: &str, args: &[String], per_thread: bool) -> Result<Vec<String>, String>;
    /// `lua-prepend-path <path> [path|cpath]`.
    fn prepend_path(&self, path: &str, cpath: bool);
    /// `tune.lua.*`, read before the states of the workers are made.
    fn set_tune(&self, tune: Tune);
    /// A new configuration is being parsed: forget the files, paths and registrations of the
    /// previous one (states made from them are remade at their next use).
    fn reset(&self);
    /// A registered action and its argument count.
    fn action(&self, kind: Kind, name: &str) -> Option<usize>;
    /// Every action registered for `kind`, in registration order (for HAProxy's error text).
    fn actions(&self, kind: Kind) -> Vec<String>;
    fn has_fetch(&self, name: &str) -> bool;
    fn has_converter(&self, name: &str) -> bool;
    /// `lua.<name>` is a registered HTTP service (`core.register_service`).
    fn has_service(&self, name: &str) -> bool;
    /// Runs HTTP service `lua.<name>` on the request (`http-request use-service`): the status,
    /// the whole response (head without `connection`, framed body) and whether the connection
    /// must close after it; `None` when the service is unknown.
    fn http_service(
        &self,
        name: &str,
        req: &RequestHead,
        ctx: &SampleCtx<'_>,
    ) -> Option<(u16, Vec<u8>, bool)>;
    /// Runs fetch `lua.<name>(args)`.
    fn fetch(
        &self,
        name: &str,
        args: &[String],
        ctx: &SampleCtx<'_>,
    ) -> Option<SampleValue<'static>>;
    /// Runs converter `lua.<name>(args)` on `input`.
    fn convert(
        &self,
        name: &str,
        args: &[String],
        input: SampleValue<'_>,
    ) -> Option<SampleValue<'static>>;
    /// Runs an `http-request lua.<name>` action.
    fn http_request(
        &self,
        name: &str,
        args: &[String],
        req: &mut RequestHead,
        ctx: &SampleCtx<'_>,
    ) -> Outcome;
    /// Runs an `http-response lua.<name>` action.
    fn http_response(
        &self,
        name: &str,
        args: &[String],
        res: &mut ResponseHead,
        ctx: &SampleCtx<'_>,
    ) -> Outcome;
    /// Runs a `tcp-request content lua.<name>` action.
    fn tcp_request(&self, name: &str, args: &[String], ctx: &SampleCtx<'_>) -> Outcome;
}

static HOST: OnceLock<&'static dyn Host> = OnceLock::new();

/// Installs the interpreter (once per process; later calls are ignored).
pub fn install(h: &'static dyn Host) {
    let _ = HOST.set(h);
}

/// The installed interpreter, if any.
pub fn host() -> Option<&'static dyn Host> {
    HOST.get().copied()
}

/// The registered action `lua.<name>` for `kind`: its argument count.
pub fn action(kind: Kind, name: &str) -> Option<usize> {
    host()?.action(kind, name)
}

/// `'lua.<name>'` for every action registered for `kind` (HAProxy lists them last when an
/// action is unknown).
pub fn listed_actions(kind: Kind) -> Vec<String> {
    host().map_or_else(Vec::new, |h| {
        h.actions(kind)
            .into_iter()
            .map(|n| format!("lua.{n}"))
            .collect()
    })
}

/// `lua.<name>` is a registered fetch.
pub fn has_fetch(name: &str) -> bool {
    host().is_some_and(|h| h.has_fetch(name))
}

/// `lua.<name>` is a registered HTTP service.
pub fn has_service(name: &str) -> bool {
    host().is_some_and(|h| h.has_service(name))
}

/// `lua.<name>` is a registered converter.
pub fn has_converter(name: &str) -> bool {
    host().is_some_and(|h| h.has_converter(name))
}
