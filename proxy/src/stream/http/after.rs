//! `http-after-response`: the last rules a response meets before it leaves, for the server's
//! responses and for the ones the proxy makes itself (deny, redirect, return, error pages), the
//! backend's rules first (once a backend was chosen), then the frontend's, as HAProxy 2.6.

use super::{Front, Session, Upstream};
use crate::ana::rules;
use crate::http::h1::{self, Limits};
use crate::http::head::ResponseHead;
use crate::log::SessionLog;
use crate::model::Proxy;

impl<F: Front, U: Upstream> Session<F, U> {
    /// Whether `be` (if any) or the frontend has `http-after-response` rules.
    pub(super) fn has_after_rules(&self, be: Option<&Proxy>) -> bool {
        !self.fe.rules.http_after_response.is_empty()
            || be.is_some_and(|b| !b.rules.http_after_response.is_empty())
    }

    /// Applies the rules to a response head; `allow` ends a section's rules only.
    pub(super) fn after_rules(
        &self,
        be: Option<&Proxy>,
        head: &mut ResponseHead,
        log: &SessionLog,
    ) {
        let mut base = self.sample_base();
        if let Some(be) = be {
            base.backend = Some(&be.name);
            base.counts = Some((&*self.shared.model, &be.name));
        }
        base.server = log.server.as_deref();
        base.captures = log.captures.as_deref();
        base.vars = log.vars.as_deref();
        base.unique_id = log.unique_id.as_deref();
        base.last_rule = Some(&log.last_rule);
        let fe: &Proxy = &self.fe;
        let sections = match be {
            Some(b) if !std::ptr::eq(b, fe) => [Some(b), Some(fe)],
            _ => [Some(fe), None],
        };
        for px in sections.into_iter().flatten() {
            // `deny` is not an after-response action: the verdict is always to go on.
            let _ = rules::apply_http_response(&px.rules.http_after_response, head, &base);
        }
    }

    /// A response the proxy made (`bytes`: head and body), rewritten by the rules when there
    /// are any; also its status, which `set-status` may have changed.
    pub(super) fn after_rules_bytes(
        &self,
        be: Option<&Proxy>,
        bytes: Vec<u8>,
        status: u16,
        log: &SessionLog,
    ) -> (Vec<u8>, u16) {
        if !self.has_after_rules(be) {
            return (bytes, status);
        }
        let Ok(Some((mut head, n))) = h1::parse_response_head(&bytes, &Limits::default()) else {
            return (bytes, status);
        };
        self.after_rules(be, &mut head, log);
        let mut out = Vec::with_capacity(bytes.len() + 128);
        h1::write_response_head(&head, &mut out);
        out.extend_from_slice(bytes.get(n..).unwrap_or_default());
        (out, head.status)
    }

    /// The backend a locally answered request was routed to, by its logged name.
    pub(super) fn logged_backend(&self, log: &SessionLog) -> Option<std::sync::Arc<Proxy>> {
        let name = log.backend.as_deref()?;
        self.shared.model.backend(name).cloned()
    }
}
