//! The L7 session (I/O shell): filled in next.
use std::sync::Arc;

use crate::engine::io::Accepted;
use crate::engine::worker::Shared;
use crate::model::Proxy;

pub async fn run(shared: Arc<Shared>, fe: Arc<Proxy>, acc: Accepted) {
    let _ = (shared, fe, acc);
}
