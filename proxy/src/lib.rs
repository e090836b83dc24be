//! portcullis: an HAProxy-compatible load balancer.
//!
//! One module per HAProxy concept (see `../shared/docs/design.md` in the workplace, and README):
//! pure cores (`config`, `http::h1`, `lb`, `log::format`, `ana`) carry no
//! I/O; the shells (`engine`, `tcp`, `stream`, `log::sink`) stay thin.

pub mod admin;
pub mod ana;
pub mod backend;
pub mod check;
pub mod clock;
pub mod cmdline;
pub mod config;
pub mod engine;
pub mod http;
pub mod kernel;
pub mod lb;
pub mod log;
pub mod lua;
pub mod map;
pub mod master;
pub mod master_cli;
pub mod model;
pub mod peers;
pub mod process;
pub mod proxy_proto;
pub mod resolve;
pub mod stick;
pub mod stream;
pub mod tcp;
pub mod tls;
