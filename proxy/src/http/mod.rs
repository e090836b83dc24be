//! HTTP: the strict HTTP/1 codec (`h1`, sans-I/O), message heads (`head`), the responses HAProxy
//! generates itself (`errors`), and the applets' pages (`stats`). The L7 transaction is the stream
//! layer's (`crate::stream::http`). ACLs, samples
//! and rules live in `crate::ana` (re-exported here under their old paths).

pub use crate::ana::{acl, rules, sample};

pub mod comp;
pub mod cookie;
pub mod errors;
pub mod field;
pub mod h1;
pub mod h2;
pub mod head;
pub mod stats;
