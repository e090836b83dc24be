//! Per-nameserver counters of the `resolvers` sections and `show resolvers [<id>]` in HAProxy
//! 2.6's layout. `cname` and `timeout` exist in that layout but 2.6 never counts them, so
//! neither does portcullis.

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters, in `show resolvers` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum C {
    Sent,
    SndError,
    Valid,
    Update,
    Cname,
    CnameError,
    AnyErr,
    Nx,
    Timeout,
    Refused,
    Other,
    Invalid,
    TooBig,
    Truncated,
    Outdated,
}

const NAMES: [&str; 15] = [
    "sent:       ",
    "snd_error:  ",
    "valid:      ",
    "update:     ",
    "cname:      ",
    "cname_error:",
    "any_err:    ",
    "nx:         ",
    "timeout:    ",
    "refused:    ",
    "other:      ",
    "invalid:    ",
    "too_big:    ",
    "truncated:  ",
    "outdated:   ",
];

#[derive(Debug, Default)]
pub struct Nameserver {
    pub name: String,
    c: [AtomicU64; 15],
}

impl Nameserver {
    pub fn new(name: &str) -> Self {
        Nameserver {
            name: name.to_string(),
            c: Default::default(),
        }
    }

    pub fn bump(&self, c: C) {
        if let Some(x) = self.c.get(c as usize) {
            x.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn get(&self, c: C) -> u64 {
        self.c
            .get(c as usize)
            .map_or(0, |x| x.load(Ordering::Relaxed))
    }
}

#[derive(Debug, Default)]
pub struct Section {
    pub name: String,
    pub nameservers: Vec<Nameserver>,
}

/// Every section's counters (built from the configuration, kept for the process's life).
#[derive(Debug, Default)]
pub struct Counters {
    pub sections: Vec<Section>,
}

impl Counters {
    pub fn from_config(rs: &[crate::config::model::Resolvers]) -> Self {
        Counters {
            sections: rs
                .iter()
                .map(|r| Section {
                    name: r.name.clone(),
                    nameservers: r
                        .nameservers
                        .iter()
                        .map(|(n, _)| Nameserver::new(n))
                        .collect(),
                })
                .collect(),
        }
    }

    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// `show resolvers [<id>]`: the dump, or HAProxy's error for an unknown section.
    pub fn show(&self, only: Option<&str>) -> Result<String, &'static str> {
        if let Some(n) = only
            && self.section(n).is_none()
        {
            return Err("Can't find that resolvers section\n");
        }
        if self.sections.is_empty() {
            return Ok("No resolvers found\n".into());
        }
        let mut out = String::new();
        for s in self
            .sections
            .iter()
            .filter(|s| only.is_none_or(|n| n == s.name))
        {
            out.push_str(&format!("Resolvers section {}\n", s.name));
            for ns in &s.nameservers {
                out.push_str(&format!(" nameserver {}:\n", ns.name));
                for (i, label) in NAMES.iter().enumerate() {
                    let v = ns.c.get(i).map_or(0, |x| x.load(Ordering::Relaxed));
                    out.push_str(&format!("  {label} {v}\n"));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_haproxys() {
        let c = Counters {
            sections: vec![Section {
                name: "dns".into(),
                nameservers: vec![Nameserver::new("ns1")],
            }],
        };
        c.sections[0].nameservers[0].bump(C::Sent);
        c.sections[0].nameservers[0].bump(C::Outdated);
        let out = c.show(Some("dns")).expect("known");
        assert!(out.starts_with("Resolvers section dns\n nameserver ns1:\n  sent:        1\n"));
        assert!(out.contains("\n  cname_error: 0\n"));
        assert!(out.ends_with("  outdated:    1\n"));
        assert_eq!(out.lines().count(), 17);
        assert_eq!(
            c.show(Some("x")),
            Err("Can't find that resolvers section\n")
        );
        assert_eq!(
            Counters::default().show(None).as_deref(),
            Ok("No resolvers found\n")
        );
    }
}
