//! The churn drill's short form (issue 17): a rolling update 3 → 6 → 3 pods through the
//! Runtime API (`add server`, `enable health`, `state ready|drain|maint`, `del server`) and a
//! `set map` under steady keep-alive and new-connection load: no request may fail.
//! `cargo xtask drill --churn` runs the long form beside HAProxy 2.6.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/churn.rs"]
mod churn;
#[path = "support/proxy.rs"]
mod proxy;

use proxy::{Proc, TempDir};

#[test]
fn rolling_update_through_the_runtime_api_fails_no_request() {
    let dir = TempDir::new("churn");
    let s = churn::setup(&dir.0).expect("setup");
    let p = Proc::portcullis(&s.config, s.front);
    let mut steps = Vec::new();
    let r = churn::run(s, &churn::ChurnSpec::quick(), &mut |l| steps.push(l));
    drop(p);
    let report = format!(
        "{}\n{}\n{r:#?}",
        churn::header(),
        churn::row("portcullis", &r)
    );
    assert!(r.cli_errors.is_empty(), "{report}");
    assert_eq!(r.failed, 0, "{report}");
    assert!(r.requests > 200, "{report}");
    assert_eq!(r.add_to_first.len(), 3, "{report}");
    assert!(r.map_to_first.is_some(), "{report}");
    assert_eq!(r.del_wait.len(), 3, "{report}");
    // Every pod that lived through the run served some of it.
    assert!(r.per_pod.iter().all(|(_, n)| *n > 0), "{report}");
}
