//! Health checks, split at the I/O line: `fsm` is HAProxy 2.6's health arithmetic, statuses and
//! log texts (pure: results and time are passed in); `probe` runs one check against a socket
//! (tokio, on the control thread) and only produces a `CheckOutcome`; `sample` is what check
//! expressions and log-format strings can fetch (pure).

pub mod fsm;
mod h2;
pub mod probe;
pub mod sample;

pub use fsm::{CheckOutcome, CheckState, Status, Transition};
pub use probe::CheckSpec;
