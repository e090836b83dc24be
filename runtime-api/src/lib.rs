//! The HAProxy 2.6 runtime API (admin socket) as a pure library: command grammar, dispatch and
//! every reply byte-compatible with HAProxy 2.6.12 (Debian 12 build). No I/O, no clock: the
//! proxy's admin module owns the socket, fills a [`model::Snapshot`] and applies state changes
//! through [`Runtime`].
//!
//! Integration, per connection:
//! 1. `let mut s = CliSession::new(level)` with the `stats socket … level` (default operator).
//! 2. For each received line (without its LF), `let out = execute(line, &mut s, &mut rt)`; write
//!    `out.data`.
//! 3. `out.conn`: [`Conn::KeepOpen`] (prompt mode) waits for the next line; [`Conn::CloseIfIdle`]
//!    runs any further lines already buffered, then closes; [`Conn::Close`] (`quit`) closes now.
//!
//! Large dumps can also be streamed: [`stat::StatDump`] writes whole rows up to a byte budget and
//! resumes where it stopped.
//!
//! Layout: [`model`] (what the proxy fills), [`stat`] (one column table for CSV/typed/JSON),
//! [`info`], [`servers`] (`show servers state`, `show backend`), [`cli`] (keyword table,
//! sessions, server commands, all reply texts), [`field`] (value encodings).

pub mod cli;
pub mod dynamic;
pub mod field;
pub mod html;
pub mod info;
pub mod limits;
pub mod model;
pub mod prom;
pub mod reply;
pub mod servers;
pub mod ssl;
pub mod stat;

pub use cli::{
    AdminOp, CliSession, Conn, HealthOp, Level, Output, PortSpec, Runtime, SrvRef,
    dump_cli_keywords, execute, execute_with_payload,
};
pub use model::Snapshot;

#[cfg(test)]
mod tests;
