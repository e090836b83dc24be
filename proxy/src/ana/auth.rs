//! `userlist` sections and HTTP Basic authentication (`http-request auth`, `http_auth(<ul>)`,
//! `http_auth_group(<ul>)`): users, their groups, and password checks as HAProxy does them —
//! `insecure-password` compared as is, `password` through the system's crypt(3), so every hash
//! `mkpasswd` makes (yescrypt, SHA-512, SHA-256, MD5, bcrypt, DES) works as with HAProxy.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use crate::config::model::Userlist;
use crate::http::head::Headers;

#[link(name = "crypt")]
unsafe extern "C" {
    /// libxcrypt's reentrant crypt: NULL (not a `*` string) on failure.
    fn crypt_rn(
        phrase: *const c_char,
        setting: *const c_char,
        data: *mut c_void,
        size: c_int,
    ) -> *mut c_char;
}

/// libxcrypt's `sizeof(struct crypt_data)`.
const CRYPT_DATA: usize = 32768;

/// crypt(3) of `phrase` with the setting (salt, method) taken from `hash`; None when the method
/// is unknown or the input holds a NUL.
pub fn crypt(phrase: &str, hash: &str) -> Option<String> {
    let p = CString::new(phrase).ok()?;
    let s = CString::new(hash).ok()?;
    let mut data = vec![0u8; CRYPT_DATA];
    // SAFETY: both strings are NUL-terminated and outlive the call; `data` is a zeroed buffer
    // of the size libxcrypt expects; the result points into `data` and is copied before `data`
    // is dropped.
    unsafe {
        let r = crypt_rn(
            p.as_ptr(),
            s.as_ptr(),
            data.as_mut_ptr().cast(),
            CRYPT_DATA as c_int,
        );
        if r.is_null() {
            return None;
        }
        Some(CStr::from_ptr(r).to_string_lossy().into_owned())
    }
}

/// Whether crypt(3) knows the method of an encrypted password (HAProxy's parse-time check).
pub fn crypt_supported(hash: &str) -> bool {
    crypt("", hash).is_some()
}

/// The credentials of an `Authorization: Basic …` header (the last one, as HAProxy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The scheme as sent (`Basic`, any case).
    pub kind: String,
    pub user: String,
    pub pass: String,
}

/// HAProxy reads only Basic credentials; another scheme yields its name and no user.
pub fn credentials(headers: &Headers) -> Option<Credentials> {
    let v = headers.get_last("authorization")?;
    let v = std::str::from_utf8(v).ok()?.trim();
    let (kind, rest) = v.split_once(' ').unwrap_or((v, ""));
    if !kind.eq_ignore_ascii_case("basic") {
        return Some(Credentials {
            kind: kind.to_string(),
            user: String::new(),
            pass: String::new(),
        });
    }
    use base64::Engine;
    let plain = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let plain = String::from_utf8(plain).ok()?;
    let (user, pass) = plain.split_once(':')?;
    Some(Credentials {
        kind: kind.to_string(),
        user: user.to_string(),
        pass: pass.to_string(),
    })
}

/// Every `userlist` of the configuration.
#[derive(Debug, Default)]
pub struct Userlists(pub Vec<Userlist>);

impl Userlists {
    pub fn find(&self, name: &str) -> Option<&Userlist> {
        self.0.iter().find(|u| u.name == name)
    }

    /// The user, when `c` names one of `list` with the right password.
    pub fn check<'u>(&'u self, list: &str, c: &Credentials) -> Option<&'u str> {
        let ul = self.find(list)?;
        let u = ul.users.iter().find(|u| u.name == c.user)?;
        let stored = u.password.as_deref()?;
        let ok = if u.insecure {
            stored == c.pass
        } else {
            crypt(&c.pass, stored).is_some_and(|h| h == stored)
        };
        ok.then_some(u.name.as_str())
    }

    /// The groups `user` belongs to in `list`: its own `groups` and every group listing it.
    pub fn groups_of<'u>(&'u self, list: &str, user: &str) -> Vec<&'u str> {
        let Some(ul) = self.find(list) else {
            return Vec::new();
        };
        let mut out: Vec<&str> = Vec::new();
        if let Some(u) = ul.users.iter().find(|u| u.name == user) {
            out.extend(u.groups.iter().map(String::as_str));
        }
        for g in &ul.groups {
            if g.users.iter().any(|m| m == user) && !out.contains(&g.name.as_str()) {
                out.push(&g.name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{UserGroup, UserlistUser};

    fn lists() -> Userlists {
        Userlists(vec![Userlist {
            name: "L".into(),
            users: vec![
                UserlistUser {
                    name: "a".into(),
                    // `mkpasswd -m sha-512 -S saltsalt secret`
                    password: Some(crypt("secret", "$6$saltsalt$").unwrap()),
                    insecure: false,
                    groups: vec!["G1".into()],
                },
                UserlistUser {
                    name: "b".into(),
                    password: Some("plain".into()),
                    insecure: true,
                    groups: vec![],
                },
                UserlistUser {
                    name: "c".into(),
                    password: None,
                    insecure: false,
                    groups: vec![],
                },
            ],
            groups: vec![UserGroup {
                name: "G2".into(),
                users: vec!["a".into(), "b".into()],
            }],
        }])
    }

    fn cred(user: &str, pass: &str) -> Credentials {
        Credentials {
            kind: "Basic".into(),
            user: user.into(),
            pass: pass.into(),
        }
    }

    #[test]
    fn passwords_and_groups() {
        let l = lists();
        assert_eq!(l.check("L", &cred("a", "secret")), Some("a"));
        assert_eq!(l.check("L", &cred("a", "Secret")), None);
        assert_eq!(l.check("L", &cred("b", "plain")), Some("b"));
        assert_eq!(l.check("L", &cred("b", "plai")), None);
        assert_eq!(l.check("L", &cred("c", "")), None);
        assert_eq!(l.check("L", &cred("zz", "x")), None);
        assert_eq!(l.check("M", &cred("b", "plain")), None);
        assert_eq!(l.groups_of("L", "a"), vec!["G1", "G2"]);
        assert_eq!(l.groups_of("L", "b"), vec!["G2"]);
        // Known methods: DES (2-char salt), MD5, SHA-256/512, yescrypt; unknown: refused.
        for h in ["ab", "$1$salt$", "$5$salt$", "$6$salt$", "$y$j9T$salt$"] {
            assert!(crypt_supported(h), "{h}");
        }
        assert!(!crypt_supported("$9$x$"));
        assert!(!crypt_supported("!"));
    }

    #[test]
    fn basic_credentials() {
        let mut h = Headers::default();
        h.append("Authorization", b"Basic YTpiOmM=".to_vec());
        assert_eq!(credentials(&h), Some(cred("a", "b:c")));
        let mut h = Headers::default();
        h.append("authorization", b"Bearer xyz".to_vec());
        assert_eq!(
            credentials(&h).map(|c| (c.kind, c.user)),
            Some(("Bearer".into(), String::new()))
        );
        let mut h = Headers::default();
        h.append("authorization", b"Basic !!".to_vec());
        assert_eq!(credentials(&h), None);
        assert_eq!(credentials(&Headers::default()), None);
    }
}
