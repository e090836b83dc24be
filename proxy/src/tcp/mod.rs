//! `mode tcp`: the userspace passthrough relay (`relay`) and the session around it (`session`).

pub mod hello;
pub mod relay;
pub mod session;

pub use relay::{End, RelayStats, RelayTimeouts, relay};
