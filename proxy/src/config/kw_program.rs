//! `program` sections: external commands the master process runs beside its workers
//! (HAProxy 2.6's `cfg_parse_program` / `cfg_program_postparser`, in its words).

use super::diag::{Diag, Severity};
use super::model::Program;
use super::parser::Ctx;

/// `program <name>`: the new section, or None (reported).
pub(crate) fn open(ctx: &mut Ctx<'_>, words: &[String], progs: &[Program]) -> Option<Program> {
    if ctx.too_many(words, 1, 1) {
        return None;
    }
    let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
        ctx.alert("'program' expects an <id> argument");
        return None;
    };
    if progs.iter().any(|p| p.name == *name) {
        ctx.alert_tight(format!(
            "'{name}' program section already exists in the configuration."
        ));
        return None;
    }
    Some(Program {
        name: name.clone(),
        command: Vec::new(),
        user: None,
        group: None,
        start_on_reload: true,
        loc: ctx.loc.clone(),
    })
}

/// One line inside a `program` section.
pub(crate) fn dispatch(p: &mut Program, ctx: &mut Ctx<'_>, words: &[String]) {
    let (no, words) = match words.first().map(String::as_str) {
        Some("no") => (true, words.get(1..).unwrap_or_default()),
        _ => (false, words),
    };
    let kw = words.first().map_or("", String::as_str);
    let a1 = words.get(1).map_or("", String::as_str);
    match kw {
        "command" if !no => {
            if a1.is_empty() {
                ctx.alert_tight(
                    "'command' expects a command with optional arguments separated in words.",
                );
                return;
            }
            p.command = words
                .iter()
                .skip(1)
                .take_while(|w| !w.is_empty())
                .cloned()
                .collect();
        }
        "option" => {
            if a1.is_empty() {
                ctx.alert_tight("'option' expects an option name.");
                return;
            }
            if a1 != "start-on-reload" {
                ctx.alert(format!("unknown option '{a1}'."));
                return;
            }
            if ctx.too_many(words, 2, 0) {
                return;
            }
            p.start_on_reload = !no;
        }
        "user" | "group" if !no => {
            let what = if kw == "user" {
                "user name"
            } else {
                "group name"
            };
            if a1.is_empty() {
                ctx.alert_tight(format!("'{kw}' expects a {what}."));
                return;
            }
            if ctx.too_many(words, 1, 1) {
                return;
            }
            let slot = if kw == "user" {
                &mut p.user
            } else {
                &mut p.group
            };
            if slot.is_some() {
                ctx.alert(format!(
                    "{kw}/{}id already specified. Continuing.",
                    &kw[..1]
                ));
                return;
            }
            let known = if kw == "user" {
                nix::unistd::User::from_name(a1).ok().flatten().is_some()
            } else {
                nix::unistd::Group::from_name(a1).ok().flatten().is_some()
            };
            if !known {
                ctx.alert(format!("cannot find {kw} id for '{a1}' (0:Success)"));
                return;
            }
            *slot = Some(a1.to_string());
        }
        _ => {
            if no {
                ctx.alert_tight("negation/default currently supported only for options, log, busy-polling, set-dumpable, strict-limits, insecure-fork-wanted and numa-cpu-mapping.");
            }
            ctx.alert(format!("unknown keyword '{kw}' in 'program' section"));
        }
    }
}

/// After parsing: every program has a command, and programs need master-worker mode
/// (`master_worker`: `-W` or `master-worker` in `global`).
pub fn check(progs: &[Program], master_worker: bool) -> Vec<Diag> {
    let mut out: Vec<Diag> = progs
        .iter()
        .filter(|p| p.command.is_empty())
        .map(|p| {
            Diag::global(
                Severity::Alert,
                format!(
                    "The program section '{}' lacks a command to launch.",
                    p.name
                ),
            )
        })
        .collect();
    if !progs.is_empty() && !master_worker {
        out.push(Diag::global(
            Severity::Alert,
            "Can't use a 'program' section without master worker mode.",
        ));
    }
    out
}
