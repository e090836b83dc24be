//! `http-after-response`: the last rules a response meets before it leaves, for the server's
//! responses and for the ones the proxy makes itself (deny, redirect, return, error pages), the
//! backend's rules first (once a backend was chosen), then the frontend's, as HAProxy 2.6.

use super::{Front, Session, Upstream};
use crate::ana::rules;
use crate::http::errors::Page;
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
        base.res_comp = log.comp;
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

    /// A response the proxy made, its head edited by the rules when there are any; returns its
    /// status, which `set-status` may have changed.
    pub(super) fn after_rules_page(
        &self,
        be: Option<&Proxy>,
        page: &mut Page,
        status: u16,
        log: &SessionLog,
    ) -> u16 {
        if !self.has_after_rules(be) {
            return status;
        }
        self.after_rules(be, &mut page.head, log);
        // An edited head goes out as the H1 mux writes any head: names lowercase.
        for h in &mut page.head.headers.0 {
            h.name.make_ascii_lowercase();
        }
        page.head.status
    }

    /// An error page of `be`'s (502, 503, 504…) after the rules, without its body for a HEAD
    /// request (`head_only`); and its status, which the rules may have changed.
    pub(super) fn error_page(
        &self,
        be: &Proxy,
        page: Option<Page>,
        status: u16,
        head_only: bool,
        log: &SessionLog,
    ) -> (Option<Page>, u16) {
        let Some(mut p) = page else {
            return (None, status);
        };
        let status = self.after_rules_page(Some(be), &mut p, status, log);
        if head_only {
            p.head_only();
        }
        (Some(p), status)
    }

    /// The backend a locally answered request was routed to, by its logged name.
    pub(super) fn logged_backend(&self, log: &SessionLog) -> Option<std::sync::Arc<Proxy>> {
        let name = log.backend.as_deref()?;
        self.shared.model.backend(name).cloned()
    }
}
