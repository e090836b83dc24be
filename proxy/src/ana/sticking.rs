//! `stick on|match|store-request|store-response <pattern> [table <t>] [if|unless <cond>]`: the
//! server a request sticks to and the keys it stores, as HAProxy 2.6's
//! `process_sticking_rules` (request) and `process_store_rules` (response).

use std::sync::Arc;

use super::acl::Condition;
use super::sample::{SampleCtx, SampleExpr};
use crate::config::model::StickKind;
use crate::stick::{Key, Table, Tables};

/// A compiled `stick` line.
pub struct StickRun {
    pub kind: StickKind,
    pub expr: SampleExpr,
    /// The table's name (the proxy's own when the rule names none).
    pub table: String,
    pub cond: Option<Condition>,
}

/// HAProxy keeps at most this many keys to store per stream (`s->store`).
const MAX_STORES: usize = 8;

/// What the request-side rules found: the servers matched entries name (by id, in rule order:
/// the first one usable wins), and the keys to store once a server is chosen.
#[derive(Default)]
pub struct StickPlan {
    pub servers: Vec<u32>,
    pub stores: Vec<(Arc<Table>, Key)>,
}

impl std::fmt::Debug for StickPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StickPlan({:?}, {})", self.servers, self.stores.len())
    }
}

fn key_of(r: &StickRun, t: &Table, ctx: &SampleCtx<'_>) -> Option<Key> {
    if r.cond.as_ref().is_some_and(|c| !c.eval(ctx)) {
        return None;
    }
    let v = r.expr.eval(ctx)?;
    super::stkey::from_sample(t.key, &v)
}

/// `stick on|match|store-request` on the request: a matching entry names a server (its expiry
/// renewed); only the first store rule that applies to a table keeps a key for it.
pub fn on_request(rules: &[StickRun], tables: &Tables, ctx: &SampleCtx<'_>, now: u64) -> StickPlan {
    let mut plan = StickPlan::default();
    for r in rules.iter().filter(|r| r.kind != StickKind::StoreResponse) {
        let Some(t) = tables.find(&r.table) else {
            continue;
        };
        let stored = |p: &StickPlan| p.stores.iter().any(|(x, _)| Arc::ptr_eq(x, t));
        if r.kind.stores() && stored(&plan) {
            continue;
        }
        let Some(key) = key_of(r, t, ctx) else {
            continue;
        };
        if r.kind.matches()
            && let Some(Some((id, _))) = t.modify_existing(&key, now, |e, _| e.server.clone())
        {
            plan.servers.push(id);
        }
        if r.kind.stores() && plan.stores.len() < MAX_STORES {
            plan.stores.push((Arc::clone(t), key));
        }
    }
    plan
}

/// `stick store-response` on the response: the first rule that applies to a table gives its
/// key.
pub fn on_response(
    rules: &[StickRun],
    tables: &Tables,
    ctx: &SampleCtx<'_>,
) -> Vec<(Arc<Table>, Key)> {
    let mut out: Vec<(Arc<Table>, Key)> = Vec::new();
    for r in rules.iter().filter(|r| r.kind == StickKind::StoreResponse) {
        let Some(t) = tables.find(&r.table) else {
            continue;
        };
        if out.iter().any(|(x, _)| Arc::ptr_eq(x, t)) || out.len() >= MAX_STORES {
            continue;
        }
        if let Some(key) = key_of(r, t, ctx) {
            out.push((Arc::clone(t), key));
        }
    }
    out
}

/// The keys stick to server `id` (`name`) from now on.
pub fn store(stores: &[(Arc<Table>, Key)], id: u32, name: &str, now: u64) {
    for (t, k) in stores {
        t.stick(k.clone(), id, name, now);
    }
}
