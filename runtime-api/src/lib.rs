//! The HAProxy 2.6 runtime API (admin socket) as a pure library: command grammar, dispatch and
//! every reply byte-compatible with HAProxy 2.6. No I/O, no clock: the proxy's admin module owns
//! the socket, fills a [`model::Snapshot`] and applies state changes through [`Runtime`].
//!
//! Entry point: [`execute`] takes one received line (which may hold several `;`-separated
//! commands), the session (level, prompt mode) and the runtime, and returns the exact bytes to
//! write plus what to do with the connection.

pub mod cli;
pub mod field;
pub mod info;
pub mod model;
pub mod servers;
pub mod stat;

pub use cli::{
    AdminOp, CliSession, Conn, HealthOp, Level, Output, PortSpec, Runtime, SrvRef, execute,
};
pub use model::Snapshot;

#[cfg(test)]
mod tests;
