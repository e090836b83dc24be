//! HAProxy's peers protocol, so portcullis and HAProxy processes keep stick tables in sync:
//! the wire format (`wire`, pure) and the per-connection protocol state (`session`, pure).

pub mod session;
pub mod wire;

#[cfg(test)]
mod tests;
