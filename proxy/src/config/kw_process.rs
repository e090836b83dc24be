//! `global` keywords that set the process up (identity, chroot, limits, names, paths), with
//! HAProxy 2.6's checks and words. Their effect is applied by `crate::process` at start.

use super::Id;
use super::kw_global::GlobalKw;
use super::model::Global;
use super::parser::Ctx;
use super::values::atol;

macro_rules! kws {
    ($($kw:literal => $f:ident),* $(,)?) => {
        pub(crate) static PROCESS_KWS: &[GlobalKw] = &[
            $(GlobalKw { kw: $kw, parse: $f, pending: false },)*
        ];
    };
}

kws! {
    "ca-base" => kw_base,
    "chroot" => kw_chroot,
    "cpu-map" => kw_cpu_map,
    "crt-base" => kw_base,
    "default-path" => kw_default_path,
    "description" => kw_description,
    "gid" => kw_gid,
    "group" => kw_group,
    "localpeer" => kw_localpeer,
    "log-tag" => kw_log_tag,
    "lua-load" => kw_lua_load,
    "lua-load-per-thread" => kw_lua_load,
    "lua-prepend-path" => kw_lua_prepend_path,
    "master-worker" => kw_master_worker,
    "max-spread-checks" => kw_max_spread_checks,
    "mworker-max-reloads" => kw_mworker_max_reloads,
    "node" => kw_node,
    "server-state-base" => kw_server_state,
    "server-state-file" => kw_server_state,
    "set-dumpable" => kw_set_dumpable,
    "spread-checks" => kw_spread_checks,
    "strict-limits" => kw_strict_limits,
    "uid" => kw_uid,
    "ulimit-n" => kw_ulimit_n,
    "unix-bind" => kw_unix_bind,
    "user" => kw_user,
    "zero-warning" => kw_zero_warning,
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

fn kw_chroot(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if g.process.chroot.is_some() {
        c.alert("'chroot' already specified. Continuing.");
        return;
    }
    match arg(args, 1) {
        "" => c.alert("'chroot' expects a directory as an argument."),
        d => g.process.chroot = Some(d.to_string()),
    }
}

fn kw_user(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if g.process.uid.is_some_and(|u| u != 0) {
        c.alert("user/uid already specified. Continuing.");
        return;
    }
    match (c.sys.ids)(Id::User, arg(args, 1)) {
        Some(u) => g.process.uid = Some(u),
        None => c.alert(format!(
            "cannot find user id for '{}' (0:Success)",
            arg(args, 1)
        )),
    }
}

fn kw_group(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if g.process.gid.is_some_and(|u| u != 0) {
        c.alert("gid/group was already specified. Continuing.");
        return;
    }
    match (c.sys.ids)(Id::Group, arg(args, 1)) {
        Some(u) => g.process.gid = Some(u),
        None => c.alert(format!(
            "cannot find group id for '{}' (0:Success)",
            arg(args, 1)
        )),
    }
}

fn kw_uid(g: &mut Global, c: &mut Ctx, args: &[String]) {
    numeric_id(g, c, args, false);
}

fn kw_gid(g: &mut Global, c: &mut Ctx, args: &[String]) {
    numeric_id(g, c, args, true);
}

fn numeric_id(g: &mut Global, c: &mut Ctx, args: &[String], group: bool) {
    if c.too_many(args, 1, 1) {
        return;
    }
    let slot = if group {
        &mut g.process.gid
    } else {
        &mut g.process.uid
    };
    if slot.is_some_and(|u| u != 0) {
        c.alert(if group {
            "group/gid already specified. Continuing."
        } else {
            "user/uid already specified. Continuing."
        });
        return;
    }
    let v = arg(args, 1);
    if v.is_empty() {
        c.alert(format!("'{}' expects an integer argument.", arg(args, 0)));
        return;
    }
    match v.parse::<u32>() {
        Ok(n) => *slot = Some(n),
        Err(_) => {
            let (kw, alt) = if group {
                ("gid", "group")
            } else {
                ("uid", "user")
            };
            c.warn(format!(
                " {kw}: string '{v}' is not a number.\n   | You might want to use the '{alt}' parameter to use a system {alt} name."
            ));
        }
    }
}

fn kw_ulimit_n(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if g.process.ulimit_n.is_some_and(|n| n != 0) {
        c.alert("'ulimit-n' already specified. Continuing.");
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert("'ulimit-n' expects an integer argument.");
        return;
    }
    g.process.ulimit_n = u64::try_from(atol(arg(args, 1))).ok();
}

/// `lua-prepend-path <path> [path|cpath]`: prepended to `package.path` (or `package.cpath`) of
/// the checking state now and of every worker's state (HAProxy's order: before later loads).
fn kw_lua_prepend_path(_g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 2) {
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert("'lua-prepend-path' expects to receive a <path> as argument");
    } else if !matches!(arg(args, 2), "" | "path" | "cpath") {
        c.alert("'lua-prepend-path' expects <type> to either be 'path' or 'cpath'");
    } else if let Some(h) = crate::ana::script::host() {
        h.prepend_path(arg(args, 1), arg(args, 2) == "cpath");
    }
}

/// `lua-load <file> [args…]` / `lua-load-per-thread <file> [args…]`: the file runs now, as
/// HAProxy runs it while parsing (its registrations become keywords for the lines after it),
/// and again in each worker thread's own state.
fn kw_lua_load(_g: &mut Global, c: &mut Ctx, args: &[String]) {
    let kw = arg(args, 0);
    let per_thread = kw == "lua-load-per-thread";
    let file = arg(args, 1);
    if file.is_empty() {
        c.alert(if per_thread {
            "'lua-load-per-thread' expects a file as parameter."
        } else {
            "'lua-load' expects a file name as parameter."
        });
        return;
    }
    let Some(h) = crate::ana::script::host() else {
        c.alert(format!(
            "'{kw}' : no Lua interpreter in this process (only the portcullis binary has one)."
        ));
        return;
    };
    match h.load(file, args.get(2..).unwrap_or_default(), per_thread) {
        Ok(warnings) => {
            for w in warnings {
                c.diags
                    .push(super::Diag::global(super::Severity::Warning, w));
            }
        }
        Err(e) => c.alert(e),
    }
}

fn kw_set_dumpable(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if !c.too_many(args, 1, 0) {
        g.process.set_dumpable = true;
    }
}

/// `[no] strict-limits`: a failed `setrlimit` at start is fatal (HAProxy's default) or a
/// warning.
fn kw_strict_limits(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if !c.too_many(args, 1, 0) {
        g.process.no_strict_limits = false;
    }
}

/// `no strict-limits` (the `global` keywords that take `no` go through here).
pub(crate) fn kw_no(g: &mut Global, c: &mut Ctx, args: &[String]) -> bool {
    if arg(args, 1) != "strict-limits" {
        return false;
    }
    if !c.too_many(args, 2, 0) {
        g.process.no_strict_limits = true;
    }
    true
}

fn kw_zero_warning(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if !c.too_many(args, 1, 0) {
        g.process.zero_warning = true;
    }
}

fn kw_master_worker(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match arg(args, 1) {
        "" => g.process.master_worker = true,
        "no-exit-on-failure" => {
            g.process.master_worker = true;
            g.process.no_exit_on_failure = true;
        }
        _ => c.alert("'master-worker' only supports 'no-exit-on-failure' option."),
    }
}

fn kw_mworker_max_reloads(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert("'mworker-max-reloads' expects an integer argument.");
        return;
    }
    match u32::try_from(atol(arg(args, 1))) {
        Ok(n) => g.process.mworker_max_reloads = Some(n),
        Err(_) => c.alert(format!(
            "'mworker-max-reloads' : invalid value {}, must be >= 0",
            atol(arg(args, 1))
        )),
    }
}

fn kw_description(g: &mut Global, c: &mut Ctx, args: &[String]) {
    match super::values::joined_words(args) {
        Some(d) => g.process.description = Some(d),
        None => c.alert_tight("'description' expects a string argument."),
    }
}

fn kw_node(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    let n = arg(args, 1);
    if n.is_empty()
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        c.alert_tight(
            "'node' requires valid node name - non-empty string with digits(0-9), letters(A-Z, a-z), dot(.), hyphen(-) or underscode(_).",
        );
        return;
    }
    g.process.node = Some(n.to_string());
}

fn kw_log_tag(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match arg(args, 1) {
        "" => c.alert("'log-tag' expects a tag for use in syslog."),
        t => g.process.log_tag = Some(t.to_string()),
    }
}

/// `localpeer <name>`: the local peer's name in `peers` sections (the parser applies it; see
/// `Section::Global` there for when it is ignored).
fn kw_localpeer(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match arg(args, 1) {
        "" => c.alert("'localpeer' expects a name as an argument."),
        n => g.process.localpeer = Some(n.to_string()),
    }
}

/// `ca-base` / `crt-base <dir>`.
fn kw_base(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let kw = arg(args, 0);
    if c.too_many(args, 1, 1) {
        return;
    }
    let slot = if kw == "ca-base" {
        &mut g.process.ca_base
    } else {
        &mut g.process.crt_base
    };
    if slot.is_some() {
        c.alert(format!("'{kw}' already specified."));
        return;
    }
    match arg(args, 1) {
        "" => c.alert(format!(
            "global statement '{kw}' expects a directory path as an argument."
        )),
        d => *slot = Some(d.to_string()),
    }
}

fn kw_server_state(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let kw = arg(args, 0);
    let base = kw == "server-state-base";
    let slot = if base {
        &mut g.process.server_state_base
    } else {
        &mut g.process.server_state_file
    };
    if slot.is_some() {
        c.alert(format!("'{kw}' already specified. Continuing."));
        return;
    }
    match arg(args, 1) {
        "" if base => c.alert(format!("'{kw}' expects one argument: a directory path.")),
        "" => c.alert(format!("'{kw}' expect one argument: a file path.")),
        v => *slot = Some(v.to_string()),
    }
}

fn kw_unix_bind(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let mut i = 1;
    while let Some(w) = args.get(i).filter(|w| !w.is_empty()) {
        let v = arg(args, i + 1);
        let ub = &mut g.process.unix_bind;
        match w.as_str() {
            "prefix" => {
                if ub.prefix.is_some() {
                    c.alert("unix-bind 'prefix' already specified. Continuing.");
                } else if v.is_empty() {
                    c.alert("unix_bind 'prefix' expects a path as an argument.");
                    return;
                } else {
                    ub.prefix = Some(v.to_string());
                }
            }
            "mode" => ub.mode = u32::from_str_radix(v, 8).ok().or(Some(0)),
            "uid" => ub.uid = u32::try_from(atol(v)).ok(),
            "gid" => ub.gid = u32::try_from(atol(v)).ok(),
            "user" | "group" => {
                let kind = if w == "user" { Id::User } else { Id::Group };
                match (c.sys.ids)(kind, v) {
                    Some(id) if kind == Id::User => ub.uid = Some(id),
                    Some(id) => ub.gid = Some(id),
                    None => {
                        c.alert(format!("'unix-bind' : '{v}' unknown {w}."));
                        return;
                    }
                }
            }
            other => {
                c.alert(format!(
                    "'unix-bind' only supports the 'prefix', 'mode', 'uid', 'gid', 'user' and 'group' options (got '{other}')."
                ));
                return;
            }
        }
        i += 2;
    }
}

/// `cpu-map [auto:]<thread-set> <cpu-set>...`: recorded, with a warning: the worker threads are
/// not pinned.
fn kw_cpu_map(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if arg(args, 1).is_empty() || arg(args, 2).is_empty() {
        c.alert(
            "cpu-map expects a process number  ('all', 'odd', 'even', a number from 1 to 64 or a range),  followed by a list of CPU ranges with numbers from 0 to 63.",
        );
        return;
    }
    let cpus = args
        .get(2..)
        .unwrap_or_default()
        .iter()
        .take_while(|w| !w.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    g.process.cpu_map.push((arg(args, 1).to_string(), cpus));
    c.warn("'cpu-map' : portcullis does not pin its worker threads; the mapping has no effect.");
}

fn kw_spread_checks(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if g.process.spread_checks.is_some_and(|n| n != 0) {
        c.alert_tight("spread-checks already specified. Continuing.");
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert_tight("'spread-checks' expects an integer argument (0..50).");
        return;
    }
    match u32::try_from(atol(arg(args, 1))) {
        Ok(n) if n <= 50 => g.process.spread_checks = Some(n),
        _ => c.alert_tight("'spread-checks' needs a positive value in range 0..50."),
    }
}

/// `max-spread-checks <time>`: an upper bound on the delay `spread-checks` adds.
fn kw_max_spread_checks(_g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if let Err(e) = super::values::parse_time(arg(args, 1)) {
        c.alert_tight(super::values::time_error_msg(
            &e,
            arg(args, 1),
            "max-spread-checks",
        ));
    }
}

/// `default-path current|config|parent|origin <path>`: only `current` (HAProxy's default) is
/// what portcullis does; the others would change how relative paths resolve.
fn kw_default_path(g: &mut Global, c: &mut Ctx, args: &[String]) {
    match arg(args, 1) {
        "current" => {
            c.too_many(args, 1, 1);
        }
        "config" | "parent" | "origin" => {
            g.pending.push((format!("default-path {}", arg(args, 1)), c.loc.clone()));
        }
        m => c.alert(format!(
            "unsupported default-path mode '{m}' for 'default-path', supported modes include 'current', 'config', 'parent', and 'origin'."
        )),
    }
}
