//! `mode tcp` transports: the userspace passthrough relay (`relay`), the kernel splice
//! (`splice`), the automatic switch between them (`auto`). The session around them is
//! `stream::tcp`.

pub mod auto;
pub mod hello;
pub mod pipe;
pub mod relay;
pub mod splice;

pub use relay::{End, RelayStats, RelayTimeouts, SpliceDirs, relay};
