//! `mode tcp`: the userspace passthrough relay (`relay`), the kernel splice (`splice`) and the
//! session around them (`session`).

pub mod auto;
pub mod hello;
pub mod pipe;
pub mod relay;
pub mod session;
pub mod splice;

pub use relay::{End, RelayStats, RelayTimeouts, SpliceDirs, relay};
