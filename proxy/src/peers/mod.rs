//! HAProxy's peers protocol, so portcullis and HAProxy processes keep stick tables in sync:
//! the wire format (`wire`, pure), the per-connection protocol state (`session`, pure) and
//! the task of each section (`task`, the sockets).

pub mod session;
pub mod status;
pub mod task;
pub mod wire;

pub use task::{handover_pending, tasks};

#[cfg(test)]
mod tests;
