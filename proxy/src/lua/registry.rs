//! What the configuration asked of Lua, process-wide: the `lua-prepend-path` and `lua-load`
//! lines in order (each worker's state replays them), `tune.lua.*`, and the keywords the
//! scripts registered while the configuration was parsed (the parser and the rule compiler ask
//! for them; the functions themselves live in each state).

use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::ana::script::{Kind, Tune};

/// One line a state replays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Path {
        path: String,
        cpath: bool,
    },
    /// The file's text as read while parsing: a worker replays it even after `chroot`.
    Load {
        file: String,
        args: Vec<String>,
        code: std::sync::Arc<[u8]>,
    },
}

#[derive(Default)]
struct Config {
    steps: Vec<Step>,
    tune: Tune,
    /// Bumped by `reset`: states made for an older configuration are remade.
    generation: u64,
    actions: Vec<(Kind, String, usize)>,
    fetches: Vec<String>,
    converters: Vec<String>,
    /// HTTP services (`core.register_service(name, "http", …)`).
    services: Vec<String>,
    /// Registration warnings not yet reported by the `lua-load` line that caused them.
    warnings: Vec<String>,
}

static CONFIG: LazyLock<Mutex<Config>> = LazyLock::new(Mutex::default);

fn config() -> MutexGuard<'static, Config> {
    CONFIG.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn reset() {
    let mut c = config();
    let generation = c.generation + 1;
    *c = Config {
        generation,
        ..Config::default()
    };
}

pub(crate) fn set_tune(t: Tune) {
    config().tune = t;
}

pub(crate) fn push(step: Step) {
    config().steps.push(step);
}

/// What a new state replays: the generation it belongs to, the steps and `tune.lua.*`.
pub(crate) fn snapshot() -> (u64, Vec<Step>, Tune) {
    let c = config();
    (c.generation, c.steps.clone(), c.tune)
}

pub(crate) fn generation() -> u64 {
    config().generation
}

pub(crate) fn tune() -> Tune {
    config().tune
}

/// The `lua.` prefix HAProxy gives a registered keyword.
fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::HttpReq | Kind::HttpRes | Kind::TcpReq => "action",
    }
}

/// `core.register_action` in the checking state; a second registration of the same name and
/// kind replaces the first with HAProxy's warning.
pub(crate) fn record_action(kind: Kind, name: &str, nargs: usize) {
    let mut c = config();
    if let Some(a) = c
        .actions
        .iter_mut()
        .find(|(k, n, _)| *k == kind && n == name)
    {
        a.2 = nargs;
        let w = format!(
            "Trying to register {} 'lua.{name}' more than once. This will become a hard error in version 2.5.",
            kind_word(kind)
        );
        c.warnings.push(w);
        return;
    }
    c.actions.push((kind, name.to_string(), nargs));
}

/// `core.register_fetches` / `core.register_converters` in the checking state.
pub(crate) fn record_sample(converter: bool, name: &str) {
    let mut c = config();
    let c = &mut *c;
    let (list, what) = if converter {
        (&mut c.converters, "converter")
    } else {
        (&mut c.fetches, "sample-fetch")
    };
    if list.iter().any(|n| n == name) {
        c.warnings.push(format!(
            "Trying to register {what} 'lua.{name}' more than once. This will become a hard error in version 2.5."
        ));
        return;
    }
    list.push(name.to_string());
}

pub(crate) fn take_warnings() -> Vec<String> {
    std::mem::take(&mut config().warnings)
}

pub(crate) fn action(kind: Kind, name: &str) -> Option<usize> {
    config()
        .actions
        .iter()
        .find(|(k, n, _)| *k == kind && n == name)
        .map(|a| a.2)
}

pub(crate) fn actions(kind: Kind) -> Vec<String> {
    config()
        .actions
        .iter()
        .filter(|(k, _, _)| *k == kind)
        .map(|(_, n, _)| n.clone())
        .collect()
}

pub(crate) fn has_fetch(name: &str) -> bool {
    config().fetches.iter().any(|n| n == name)
}

pub(crate) fn has_converter(name: &str) -> bool {
    config().converters.iter().any(|n| n == name)
}

/// `core.register_service(name, "http", …)` in the checking state.
pub(crate) fn record_service(name: &str) {
    let mut c = config();
    if c.services.iter().any(|n| n == name) {
        c.warnings.push(format!(
            "Trying to register service 'lua.{name}' more than once. This will become a hard error in version 2.5."
        ));
        return;
    }
    c.services.push(name.to_string());
}

pub(crate) fn has_service(name: &str) -> bool {
    config().services.iter().any(|n| n == name)
}
