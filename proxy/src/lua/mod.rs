//! Lua 5.3, as HAProxy 2.6 runs it: `lua-load`ed scripts register actions (`http-request
//! lua.<name>`, `http-response lua.<name>`, `tcp-request content lua.<name>`), sample fetches
//! and converters, which the rules and the sample engine call through [`crate::ana::script`].
//!
//! A Lua state is not `Send`: like HAProxy's `lua-load-per-thread`, every worker thread has its
//! own state, made at its first use by running the same files (`state`). The file also runs
//! once while the configuration is parsed, in a checking state, so that load errors are
//! reported at `-c` with HAProxy's words and the registrations become keywords (`registry`).
//! `core` is the `core` table, `txn` the object an action receives, `bridge` the conversions
//! between samples and Lua values.

mod bridge;
mod core;
mod registry;
mod state;
mod txn;

pub use self::core::{LogSink, set_log_sink};

use crate::ana::sample::{SampleCtx, SampleValue};
use crate::ana::script::{Host, Kind, Outcome, Tune};
use crate::http::head::{RequestHead, ResponseHead};

/// Makes Lua available to the configuration and the rules (once, at start).
pub fn install() {
    static INTERP: Interp = Interp;
    crate::ana::script::install(&INTERP);
}

/// Makes the calling worker thread's Lua state, if the configuration loads any script (called
/// once per worker thread at start).
pub fn warm() {
    state::warm();
}

struct Interp;

impl Host for Interp {
    fn load(&self, file: &str, args: &[String], per_thread: bool) -> Result<Vec<String>, String> {
        state::load(file, args, per_thread)
    }
    fn prepend_path(&self, path: &str, cpath: bool) {
        state::prepend_path(path, cpath);
    }
    fn set_tune(&self, tune: Tune) {
        registry::set_tune(tune);
    }
    fn reset(&self) {
        registry::reset();
    }
    fn action(&self, kind: Kind, name: &str) -> Option<usize> {
        registry::action(kind, name)
    }
    fn actions(&self, kind: Kind) -> Vec<String> {
        registry::actions(kind)
    }
    fn has_fetch(&self, name: &str) -> bool {
        registry::has_fetch(name)
    }
    fn has_converter(&self, name: &str) -> bool {
        registry::has_converter(name)
    }
    fn has_service(&self, name: &str) -> bool {
        registry::has_service(name)
    }
    fn http_service(
        &self,
        name: &str,
        req: &RequestHead,
        ctx: &SampleCtx<'_>,
    ) -> Option<(u16, Vec<u8>, bool)> {
        state::service(name, req, ctx)
    }
    fn fetch(
        &self,
        name: &str,
        args: &[String],
        ctx: &SampleCtx<'_>,
    ) -> Option<SampleValue<'static>> {
        state::fetch(name, args, ctx)
    }
    fn convert(
        &self,
        name: &str,
        args: &[String],
        input: SampleValue<'_>,
    ) -> Option<SampleValue<'static>> {
        state::convert(name, args, input)
    }
    fn http_request(
        &self,
        name: &str,
        args: &[String],
        req: &mut RequestHead,
        ctx: &SampleCtx<'_>,
    ) -> Outcome {
        state::action(Kind::HttpReq, name, args, txn::Msg::Req(req), ctx)
    }
    fn http_response(
        &self,
        name: &str,
        args: &[String],
        res: &mut ResponseHead,
        ctx: &SampleCtx<'_>,
    ) -> Outcome {
        state::action(Kind::HttpRes, name, args, txn::Msg::Res(res), ctx)
    }
    fn tcp_request(&self, name: &str, args: &[String], ctx: &SampleCtx<'_>) -> Outcome {
        state::action(Kind::TcpReq, name, args, txn::Msg::None, ctx)
    }
}

#[cfg(test)]
mod tests;
