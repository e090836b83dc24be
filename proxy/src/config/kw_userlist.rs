//! `userlist` sections: `user` and `group` lines, in HAProxy 2.6's words (`cfg_parse_users`,
//! `userlist_postinit`).

use super::diag::{Diag, Severity};
use super::model::{UserGroup, Userlist, UserlistUser};
use super::parser::Ctx;
use super::values::invalid_name_char;

/// `userlist <name>`: the name of the new list, or None (reported) when there is none to open.
pub(crate) fn open(ctx: &mut Ctx<'_>, words: &[String], lists: &[Userlist]) -> Option<String> {
    let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
        ctx.alert_tight("'userlist' expects <name> as arguments.");
        return None;
    };
    if ctx.too_many(words, 1, 1) {
        return None;
    }
    if let Some(c) = invalid_name_char(name) {
        ctx.alert_tight(format!(
            "character '{c}' is not permitted in 'userlist' name '{name}'."
        ));
        return None;
    }
    if lists.iter().any(|l| l.name == *name) {
        warn_tight(ctx, format!("ignoring duplicated userlist '{name}'."));
        return None;
    }
    Some(name.clone())
}

fn warn_tight(ctx: &mut Ctx<'_>, msg: String) {
    ctx.diags.push(Diag::reader(
        &ctx.loc.file,
        ctx.loc.line,
        Severity::Warning,
        msg,
    ));
}

fn list(v: Option<&String>) -> Vec<String> {
    v.map(|s| {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// One line inside a `userlist` section.
pub(crate) fn dispatch(ul: &mut Userlist, ctx: &mut Ctx<'_>, words: &[String]) {
    let kw = words[0].as_str();
    match kw {
        "group" | "user" => {}
        _ => {
            ctx.alert_tight(format!("unknown keyword '{kw}' in 'users' section"));
            return;
        }
    }
    let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
        ctx.alert_tight(format!("'{kw}' expects <name> as arguments."));
        return;
    };
    if kw == "group" {
        if let Some(c) = invalid_name_char(name) {
            ctx.alert_tight(format!(
                "character '{c}' is not permitted in 'group' name '{name}'."
            ));
            return;
        }
        if ul.groups.iter().any(|g| g.name == *name) {
            warn_tight(
                ctx,
                format!(
                    "ignoring duplicated group '{name}' in userlist '{}'.",
                    ul.name
                ),
            );
            return;
        }
        let mut users = Vec::new();
        let mut i = 2;
        while let Some(w) = words.get(i).filter(|w| !w.is_empty()) {
            if w != "users" {
                ctx.alert_tight("'group' only supports 'users' option.");
                return;
            }
            users = list(words.get(i + 1));
            i += 2;
        }
        ul.groups.push(UserGroup {
            name: name.clone(),
            users,
        });
        return;
    }
    if ul.users.iter().any(|u| u.name == *name) {
        warn_tight(
            ctx,
            format!(
                "ignoring duplicated user '{name}' in userlist '{}'.",
                ul.name
            ),
        );
        return;
    }
    let mut user = UserlistUser {
        name: name.clone(),
        password: None,
        insecure: false,
        groups: Vec::new(),
    };
    let mut i = 2;
    while let Some(w) = words.get(i).filter(|w| !w.is_empty()) {
        let v = words.get(i + 1).cloned().unwrap_or_default();
        match w.as_str() {
            "password" => {
                if !crate::ana::auth::crypt_supported(&v) {
                    ctx.alert_tight(format!(
                        "the encrypted password used for user '{name}' is not supported by crypt(3)."
                    ));
                    return;
                }
                user.password = Some(v);
                user.insecure = false;
            }
            "insecure-password" => {
                user.password = Some(v);
                user.insecure = true;
            }
            "groups" => user.groups = list(words.get(i + 1)),
            _ => {
                ctx.alert_tight(
                    "'user' only supports 'password', 'insecure-password' and 'groups' options.",
                );
                return;
            }
        }
        i += 2;
    }
    ul.users.push(user);
}

/// After parsing: every group a user names and every user a group names exists.
pub(crate) fn check(lists: &[Userlist], diags: &mut Vec<Diag>) {
    for ul in lists {
        for u in &ul.users {
            for g in &u.groups {
                if !ul.groups.iter().any(|x| x.name == *g) {
                    diags.push(Diag::global(
                        Severity::Alert,
                        format!(
                            "userlist '{}': no such group '{g}' specified in user '{}'",
                            ul.name, u.name
                        ),
                    ));
                }
            }
        }
        for g in &ul.groups {
            for m in &g.users {
                if !ul.users.iter().any(|x| x.name == *m) {
                    diags.push(Diag::global(
                        Severity::Alert,
                        format!(
                            "userlist '{}': no such user '{m}' specified in group '{}'",
                            ul.name, g.name
                        ),
                    ));
                }
            }
        }
    }
}
