//! DNS resolution at run time, as HAProxy 2.6's `resolvers` sections do it: every server
//! given by name with `resolvers <id>` is re-resolved every `timeout resolve`; answers move
//! its address without a reload, and a name that stops resolving puts it in maintenance once
//! its `hold` is over. `server-template` slots on an SRV name are filled from the SRV records
//! (address from the additional records, or resolved per target).
//!
//! The cores are pure ([`wire`]: messages; [`answer`]: which address a server takes;
//! [`resolution`]: queries, retries and fallbacks; [`counters`]: `show resolvers`); `task` is
//! the I/O shell on the control thread.

pub mod answer;
pub mod counters;
pub mod resolution;
mod task;
pub mod wire;

pub use task::tasks;
