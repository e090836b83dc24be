//! Variables (`set-var(txn.x)`, `var(txn.x)`): typed samples in HAProxy's scopes. `sess` lives
//! with the client connection, `txn`/`req`/`res` with one transaction, `proc` with the process
//! (shared by every worker thread).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock};

use super::sample::SampleValue;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Proc,
    Sess,
    Txn,
    Req,
    Res,
}

/// A variable's scope and name (`txn.user` → `Txn`, `user`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarName {
    pub scope: Scope,
    pub name: String,
}

impl VarName {
    /// Parses `<scope>.<name>`, in HAProxy's words when it is not one.
    pub fn parse(s: &str) -> Result<VarName, String> {
        let bad = || {
            format!(
                "invalid variable name '{s}'. A variable name must be start by its scope. The scope can be 'proc', 'sess', 'txn', 'req', 'res' or 'check'"
            )
        };
        let (scope, name) = s.split_once('.').ok_or_else(bad)?;
        let scope = match scope {
            "proc" => Scope::Proc,
            "sess" => Scope::Sess,
            "txn" => Scope::Txn,
            "req" => Scope::Req,
            "res" => Scope::Res,
            _ => return Err(bad()),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(bad());
        }
        Ok(VarName {
            scope,
            name: name.to_string(),
        })
    }
}

/// `set-var(<name>,<cond>…)` conditions (HAProxy 2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetCond {
    IfExists,
    IfNotExists,
    IfEmpty,
    IfNotEmpty,
    IfSet,
    IfNotSet,
    IfGt,
    IfLt,
}

impl SetCond {
    pub fn parse(s: &str) -> Result<SetCond, String> {
        Ok(match s {
            "ifexists" => SetCond::IfExists,
            "ifnotexists" => SetCond::IfNotExists,
            "ifempty" => SetCond::IfEmpty,
            "ifnotempty" => SetCond::IfNotEmpty,
            "ifset" => SetCond::IfSet,
            "ifnotset" => SetCond::IfNotSet,
            "ifgt" => SetCond::IfGt,
            "iflt" => SetCond::IfLt,
            _ => return Err(format!("unknown condition '{s}'")),
        })
    }

    fn holds(self, old: Option<&Stored>, new: &Stored) -> bool {
        let empty = |v: &Stored| match v {
            SampleValue::Str(s) => s.is_empty(),
            SampleValue::Bin(b) => b.is_empty(),
            SampleValue::Int(i) => *i == 0,
            SampleValue::Bool(b) => !b,
            SampleValue::Ip(_) => false,
        };
        match self {
            SetCond::IfExists | SetCond::IfSet => old.is_some(),
            SetCond::IfNotExists | SetCond::IfNotSet => old.is_none(),
            SetCond::IfEmpty => old.is_some_and(empty),
            SetCond::IfNotEmpty => old.is_some_and(|v| !empty(v)),
            SetCond::IfGt | SetCond::IfLt => {
                let (Some(o), Some(n)) = (old.and_then(SampleValue::to_int), new.to_int()) else {
                    return false;
                };
                // HAProxy: `ifgt` sets when the variable is greater than the new value.
                if self == SetCond::IfGt { o > n } else { o < n }
            }
        }
    }
}

type Stored = SampleValue<'static>;
type Map = HashMap<String, Stored>;

fn proc_vars() -> &'static Mutex<Map> {
    static PROC: OnceLock<Mutex<Map>> = OnceLock::new();
    PROC.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The `sess` scope of one client connection, shared by its transactions.
pub type SessVars = Rc<RefCell<Map>>;

/// The variables one transaction sees.
#[derive(Debug, Default)]
pub struct Vars {
    sess: SessVars,
    txn: RefCell<Map>,
    req: RefCell<Map>,
    res: RefCell<Map>,
}

impl Vars {
    pub fn new(sess: SessVars) -> Rc<Vars> {
        // Field by field: `..Default::default()` would allocate a `sess` map only to drop it.
        Rc::new(Vars {
            sess,
            txn: RefCell::default(),
            req: RefCell::default(),
            res: RefCell::default(),
        })
    }

    fn with<R>(&self, scope: Scope, f: impl FnOnce(&mut Map) -> R) -> R {
        match scope {
            Scope::Proc => {
                let mut g = proc_vars().lock().unwrap_or_else(|p| p.into_inner());
                f(&mut g)
            }
            Scope::Sess => f(&mut self.sess.borrow_mut()),
            Scope::Txn => f(&mut self.txn.borrow_mut()),
            Scope::Req => f(&mut self.req.borrow_mut()),
            Scope::Res => f(&mut self.res.borrow_mut()),
        }
    }

    pub fn get(&self, n: &VarName) -> Option<Stored> {
        self.with(n.scope, |m| m.get(&n.name).cloned())
    }

    /// Stores `v` unless a condition fails.
    pub fn set(&self, n: &VarName, v: SampleValue<'_>, conds: &[SetCond]) {
        let v = v.into_owned();
        self.with(n.scope, |m| {
            if conds.iter().all(|c| c.holds(m.get(&n.name), &v)) {
                m.insert(n.name.clone(), v);
            }
        });
    }

    pub fn unset(&self, n: &VarName) {
        self.with(n.scope, |m| m.remove(&n.name));
    }

    /// The request's analysis is over (HAProxy prunes the `req` scope as the connection to a
    /// server is requested, and swaps to the response's): `req` variables are gone.
    pub fn end_request(&self) {
        self.req.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn scopes_and_conditions() {
        let sess = SessVars::default();
        let a = Vars::new(Rc::clone(&sess));
        let n = |s: &str| VarName::parse(s).unwrap();
        a.set(&n("txn.x"), SampleValue::Int(3), &[]);
        a.set(&n("sess.s"), SampleValue::Str(Cow::Borrowed("v")), &[]);
        a.set(&n("txn.x"), SampleValue::Int(9), &[SetCond::IfGt]);
        assert_eq!(a.get(&n("txn.x")), Some(SampleValue::Int(3)));
        a.set(&n("txn.x"), SampleValue::Int(1), &[SetCond::IfGt]);
        assert_eq!(a.get(&n("txn.x")), Some(SampleValue::Int(1)));
        a.set(&n("txn.x"), SampleValue::Int(0), &[SetCond::IfLt]);
        assert_eq!(a.get(&n("txn.x")), Some(SampleValue::Int(1)));
        a.set(&n("txn.y"), SampleValue::Int(1), &[SetCond::IfExists]);
        assert_eq!(a.get(&n("txn.y")), None);
        // The next transaction on the connection keeps `sess`, not `txn`.
        let b = Vars::new(sess);
        assert_eq!(b.get(&n("txn.x")), None);
        assert_eq!(
            b.get(&n("sess.s")),
            Some(SampleValue::Str(Cow::Borrowed("v")))
        );
        b.unset(&n("sess.s"));
        assert_eq!(a.get(&n("sess.s")), None);
        assert!(
            VarName::parse("foo.a")
                .unwrap_err()
                .contains("'proc', 'sess', 'txn'")
        );
        assert!(VarName::parse("txn.").is_err());
    }
}
