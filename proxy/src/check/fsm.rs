//! HAProxy 2.6's health-check arithmetic, status table and state-change log texts. Pure: the
//! caller feeds results (`on_result`) and admin events (`enter_maint`/`leave_maint`) and gets
//! back what changed; it owns the clock, the sockets and the logging.
//!
//! Health `H` moves within `0..=rise+fall-1`; the server is up when `H >= rise`. A checked
//! server starts at `H = rise` (`UP 1/F`): one failure marks it DOWN, one success fully UP.
//! Texts were captured from HAProxy 2.6.12 (`log stdout format raw`), see the tests.

use std::time::Duration;

use crate::config::model::ServerOpts;

/// What a status means for the health arithmetic (`check_statuses[].result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckResult {
    Neutral,
    Failed,
    Passed,
    /// Passed, but the server must stop taking new traffic (404 with `disable-on-404`).
    CondPass,
}

/// `check_status` values, in HAProxy's numeric order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Unk,
    Ini,
    Checked,
    Hana,
    SockErr,
    L4Ok,
    L4Tout,
    L4Con,
    L6Ok,
    L6Tout,
    L6Rsp,
    L7Tout,
    L7Rsp,
    L7Ok,
    L7OkC,
    L7Sts,
    ProcErr,
    ProcTout,
    ProcOk,
}

/// One row of the status table.
#[derive(Debug)]
pub struct StatusInfo {
    pub status: Status,
    /// `srv_check_status` in `show servers state`.
    pub num: u8,
    /// `check_status` in `show stat`.
    pub name: &'static str,
    /// `check_desc` in `show stat`, and the `reason:` in logs.
    pub desc: &'static str,
    pub result: CheckResult,
}

const fn row(
    status: Status,
    num: u8,
    name: &'static str,
    desc: &'static str,
    result: CheckResult,
) -> StatusInfo {
    StatusInfo {
        status,
        num,
        name,
        desc,
        result,
    }
}

use CheckResult::{CondPass, Failed, Neutral, Passed};

/// Indexed by `Status as usize` (checked by a test). Numbers 2 (START) and 14 (L57DATA) are
/// internal markers in HAProxy and never shown.
pub static STATUSES: [StatusInfo; 19] = [
    row(Status::Unk, 0, "UNK", "Unknown", Neutral),
    row(Status::Ini, 1, "INI", "Initializing", Neutral),
    row(Status::Checked, 3, "CHECKED", "No status change", Neutral),
    row(Status::Hana, 4, "HANA", "Health analyze", Failed),
    row(Status::SockErr, 5, "SOCKERR", "Socket error", Failed),
    row(Status::L4Ok, 6, "L4OK", "Layer4 check passed", Passed),
    row(Status::L4Tout, 7, "L4TOUT", "Layer4 timeout", Failed),
    row(
        Status::L4Con,
        8,
        "L4CON",
        "Layer4 connection problem",
        Failed,
    ),
    row(Status::L6Ok, 9, "L6OK", "Layer6 check passed", Passed),
    row(Status::L6Tout, 10, "L6TOUT", "Layer6 timeout", Failed),
    row(
        Status::L6Rsp,
        11,
        "L6RSP",
        "Layer6 invalid response",
        Failed,
    ),
    row(Status::L7Tout, 12, "L7TOUT", "Layer7 timeout", Failed),
    row(
        Status::L7Rsp,
        13,
        "L7RSP",
        "Layer7 invalid response",
        Failed,
    ),
    row(Status::L7Ok, 15, "L7OK", "Layer7 check passed", Passed),
    row(
        Status::L7OkC,
        16,
        "L7OKC",
        "Layer7 check conditionally passed",
        CondPass,
    ),
    row(Status::L7Sts, 17, "L7STS", "Layer7 wrong status", Failed),
    row(
        Status::ProcErr,
        18,
        "PROCERR",
        "External check error",
        Failed,
    ),
    row(
        Status::ProcTout,
        19,
        "PROCTOUT",
        "External check timeout",
        Failed,
    ),
    row(
        Status::ProcOk,
        20,
        "PROCOK",
        "External check passed",
        Passed,
    ),
];

impl Status {
    pub fn info(self) -> &'static StatusInfo {
        STATUSES.get(self as usize).unwrap_or(&STATUSES[0])
    }
    pub fn num(self) -> u8 {
        self.info().num
    }
    pub fn name(self) -> &'static str {
        self.info().name
    }
    pub fn desc(self) -> &'static str {
        self.info().desc
    }
    pub fn result(self) -> CheckResult {
        self.info().result
    }
    /// Statuses past HAProxy's L57DATA carry a code (`check_code`, `code:` in logs); a
    /// successful tcp-check shows code 0.
    pub fn has_code(self) -> bool {
        matches!(
            self,
            Status::L7Ok
                | Status::L7OkC
                | Status::L7Sts
                | Status::ProcErr
                | Status::ProcTout
                | Status::ProcOk
        )
    }
}

/// What one check produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOutcome {
    pub status: Status,
    /// HTTP status (or 0 for a passed tcp-check); shown only when `status.has_code()`.
    pub code: Option<u16>,
    /// `last_chk`: the reason phrase, "Connection refused", tcp-check texts; empty on success.
    pub info: String,
    pub duration: Duration,
}

impl CheckOutcome {
    pub fn new(
        status: Status,
        code: Option<u16>,
        info: impl Into<String>,
        duration: Duration,
    ) -> Self {
        CheckOutcome {
            status,
            code,
            info: info.into(),
            duration,
        }
    }
}

/// The operational state the checks drive (`next_state` in HAProxy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpState {
    Running,
    /// NOLB: up but takes no new traffic (404 with `disable-on-404`).
    Stopping,
    Stopped,
}

/// A state change to apply to the model and to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Went UP (from DOWN or NOLB).
    Up,
    /// Went DOWN (from UP or NOLB).
    Down,
    /// Went NOLB ("is stopping").
    Nolb,
    /// Entered maintenance; `was_down` picks HAProxy's "was DOWN and now enters
    /// maintenance" line, `cause` its parenthesis.
    Maint { was_down: bool, cause: MaintCause },
    /// Left forced maintenance ("UP/READY"), with `H = rise`.
    Ready,
    /// Left the resolution maintenance: an address was found ("resolves again").
    Resolved,
}

/// Why a server entered maintenance (HAProxy's `adm_st_chg_cause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaintCause {
    /// `disable server`, `set server … state maint`: no parenthesis.
    Forced,
    NoIp,
    DnsNx,
    DnsTimeout,
    DnsRefused,
    DnsOther,
    SrvRemoved,
}

impl MaintCause {
    fn text(self) -> &'static str {
        match self {
            MaintCause::Forced => "",
            MaintCause::NoIp => " (No IP for server )",
            MaintCause::DnsNx => " (DNS NX status)",
            MaintCause::DnsTimeout => " (DNS timeout status)",
            MaintCause::DnsRefused => " (DNS refused status)",
            MaintCause::DnsOther => " (unspecified DNS error)",
            MaintCause::SrvRemoved => " (entry removed from SRV record)",
        }
    }
}

/// `on_result`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    pub transition: Option<Transition>,
    /// Health or status changed: with `option log-health-checks`, log `fmt_health_check`.
    pub report: bool,
}

/// `inter`, `fastinter` and `downinter` of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intervals {
    pub inter: Duration,
    pub fastinter: Option<Duration>,
    pub downinter: Option<Duration>,
}

impl Intervals {
    pub fn from_opts(o: &ServerOpts) -> Intervals {
        Intervals {
            inter: o.inter,
            fastinter: o.fastinter,
            downinter: o.downinter,
        }
    }
}

/// One server's check state.
#[derive(Clone, Debug)]
pub struct CheckState {
    rise: u32,
    fall: u32,
    health: u32,
    op: OpState,
    maint: bool,
    in_progress: bool,
    last: CheckOutcome,
    intervals: Intervals,
    /// `chkfail`: failed checks counted while `H > 0`.
    pub chkfail: u64,
    /// `chkdown`: transitions from usable to DOWN or MAINT.
    pub chkdown: u64,
    /// Added at run time: HAProxy starts such a server at H = 0 and leaving maintenance does
    /// not raise it (only check results do).
    dynamic: bool,
    /// In the maintenance `add server` starts in, never entered through an admin action: its
    /// check is not marked paused (`srv_check_state`).
    fresh: bool,
}

impl CheckState {
    /// A checked server as HAProxy starts it: `H = rise` (`UP 1/F`), or MAINT when `disabled`.
    pub fn new(opts: &ServerOpts) -> CheckState {
        let mut st = CheckState::with(opts.rise, opts.fall, Intervals::from_opts(opts));
        if opts.disabled {
            st.maint = true;
            st.op = OpState::Stopped;
        }
        st
    }

    pub fn with(rise: u32, fall: u32, intervals: Intervals) -> CheckState {
        let rise = rise.max(1);
        CheckState {
            rise,
            fall: fall.max(1),
            health: rise,
            op: OpState::Running,
            maint: false,
            in_progress: false,
            last: CheckOutcome::new(Status::Ini, None, "", Duration::ZERO),
            intervals,
            chkfail: 0,
            chkdown: 0,
            dynamic: false,
            fresh: false,
        }
    }

    /// A server from `add server`: in maintenance, H = 0 (`show servers state` of HAProxy 2.6).
    pub fn dynamic(opts: &ServerOpts) -> CheckState {
        let mut st = CheckState::with(opts.rise, opts.fall, Intervals::from_opts(opts));
        st.maint = true;
        st.op = OpState::Stopped;
        st.health = 0;
        st.dynamic = true;
        st.fresh = true;
        st
    }

    pub fn rise(&self) -> u32 {
        self.rise
    }
    pub fn fall(&self) -> u32 {
        self.fall
    }
    /// `check_health`.
    pub fn health(&self) -> u32 {
        self.health
    }
    pub fn op(&self) -> OpState {
        self.op
    }
    /// In maintenance entered by an admin action or `disabled` (the check is paused).
    pub fn is_paused(&self) -> bool {
        self.maint && !self.fresh
    }
    pub fn is_maint(&self) -> bool {
        self.maint
    }
    /// Takes new traffic: running, not in maintenance (drain is the caller's weight business).
    pub fn is_usable(&self) -> bool {
        !self.maint && self.op == OpState::Running
    }
    /// What a probe needs: a 404 only means NOLB on a server that is not stopped.
    pub fn is_stopped(&self) -> bool {
        self.op == OpState::Stopped
    }
    pub fn in_progress(&self) -> bool {
        self.in_progress
    }
    /// The last completed check (status `Ini` before the first one).
    pub fn last(&self) -> &CheckOutcome {
        &self.last
    }

    fn full(&self) -> u32 {
        self.rise + self.fall - 1
    }

    /// The first field of `http-check send-state`'s `X-Haproxy-Server-State` header (HAProxy's
    /// httpchk_build_status_header): `UP`, `UP n/f` going down, `NOLB`…, `DOWN n/r` going up.
    pub fn state_word(&self, checks_enabled: bool) -> String {
        if !checks_enabled {
            return "no check".to_string();
        }
        if self.op == OpState::Stopped {
            return match self.health {
                0 => "DOWN".to_string(),
                h => format!("DOWN {h}/{}", self.rise),
            };
        }
        let word = if self.op == OpState::Stopping {
            "NOLB"
        } else {
            "UP"
        };
        if self.health == self.full() {
            word.to_string()
        } else {
            let n = (self.health + 1).saturating_sub(self.rise);
            format!("{word} {n}/{}", self.fall)
        }
    }

    /// A probe was launched (`show stat` prefixes the status with `* `).
    pub fn start(&mut self) {
        self.in_progress = true;
    }

    /// Applies a probe's result (`set_server_check_status` + `check_notify_*`). Ignored while in
    /// maintenance (checks are paused there).
    pub fn on_result(&mut self, out: CheckOutcome) -> Update {
        self.in_progress = false;
        if self.maint {
            return Update {
                transition: None,
                report: false,
            };
        }
        let prev = self.last.status;
        let result = out.status.result();
        self.last = out;
        let mut report = false;
        match result {
            CheckResult::Neutral => {
                return Update {
                    transition: None,
                    report: false,
                };
            }
            CheckResult::Failed => {
                if self.health > 0 {
                    self.chkfail += 1;
                    report = true;
                    self.health -= 1;
                    if self.health < self.rise {
                        self.health = 0;
                    }
                }
            }
            CheckResult::Passed | CheckResult::CondPass => {
                if self.health < self.full() {
                    report = true;
                    self.health += 1;
                    if self.health >= self.rise {
                        self.health = self.full();
                    }
                }
            }
        }
        let transition = match result {
            CheckResult::Failed if self.health == 0 && self.op != OpState::Stopped => {
                self.op = OpState::Stopped;
                self.chkdown += 1;
                Some(Transition::Down)
            }
            CheckResult::CondPass if self.health >= self.rise && self.op != OpState::Stopping => {
                self.op = OpState::Stopping;
                Some(Transition::Nolb)
            }
            CheckResult::Passed if self.health >= self.rise && self.op != OpState::Running => {
                self.op = OpState::Running;
                Some(Transition::Up)
            }
            _ => None,
        };
        Update {
            transition,
            report: report || self.last.status != prev,
        }
    }

    /// `disable server` / `set server … state maint`. `None` when already in maintenance.
    pub fn enter_maint(&mut self) -> Option<Transition> {
        self.enter_maint_for(MaintCause::Forced)
    }

    /// Maintenance for `cause`. `None` when already in maintenance.
    pub fn enter_maint_for(&mut self, cause: MaintCause) -> Option<Transition> {
        if self.maint {
            return None;
        }
        let was_down = self.op == OpState::Stopped;
        if !was_down {
            self.chkdown += 1;
        }
        self.maint = true;
        self.in_progress = false;
        self.op = OpState::Stopped;
        // HAProxy 2.6 zeroes the health of a server forced into maintenance (`show servers
        // state` srv_check_health 0); leaving it restarts from `rise`.
        self.health = 0;
        Some(Transition::Maint { was_down, cause })
    }

    /// `enable server` / `set server … state ready`: `H = rise`, running until a check says
    /// otherwise. `None` when not in maintenance.
    pub fn leave_maint(&mut self) -> Option<Transition> {
        if !self.maint {
            return None;
        }
        self.maint = false;
        self.fresh = false;
        if !self.dynamic {
            self.health = self.rise;
        }
        self.op = OpState::Running;
        Some(Transition::Ready)
    }

    /// `set server … health up|stopping|down` (a simulated result): H = rise+fall-1 for up and
    /// stopping, 0 for down. Returns the transition when the operational state changes.
    pub fn force_health(&mut self, op: OpState) -> Option<Transition> {
        if self.maint {
            return None;
        }
        self.health = if op == OpState::Stopped {
            0
        } else {
            self.full()
        };
        if self.op == op {
            return None;
        }
        let was_usable = self.is_usable();
        self.op = op;
        match op {
            OpState::Running => Some(Transition::Up),
            OpState::Stopping => Some(Transition::Nolb),
            OpState::Stopped => {
                if was_usable {
                    self.chkdown += 1;
                }
                Some(Transition::Down)
            }
        }
    }

    /// Delay before the next check, counted from the end of the last one: `inter` when fully
    /// UP, `downinter` (else `inter`) when fully DOWN, `fastinter` (else `inter`) in between
    /// and before the first result.
    pub fn next_interval(&self) -> Duration {
        let iv = &self.intervals;
        if self.health == self.full() {
            iv.inter
        } else if self.op == OpState::Stopped && self.health == 0 {
            iv.downinter.unwrap_or(iv.inter)
        } else {
            iv.fastinter.unwrap_or(iv.inter)
        }
    }

    /// `status` column of `show stat` for a checked server; `drain` = weight set to 0.
    pub fn stat_status(&self, drain: bool) -> String {
        if self.maint {
            return "MAINT".into();
        }
        let full = self.health == self.full();
        let up_frac = format!(
            "{}/{}",
            (self.health + 1).saturating_sub(self.rise),
            self.fall
        );
        let word = match self.op {
            OpState::Stopped => {
                return if self.health == 0 {
                    "DOWN".into()
                } else {
                    format!("DOWN {}/{}", self.health, self.rise)
                };
            }
            OpState::Stopping => "NOLB",
            OpState::Running if drain => "DRAIN",
            OpState::Running => "UP",
        };
        if full {
            word.into()
        } else {
            format!("{word} {up_frac}")
        }
    }

    /// `check_status` column: empty in MAINT, `* ` while a check runs.
    pub fn stat_check_status(&self) -> String {
        if self.maint {
            return String::new();
        }
        let name = self.last.status.name();
        if self.in_progress {
            format!("* {name}")
        } else {
            name.into()
        }
    }

    /// `check_code` column.
    pub fn stat_check_code(&self) -> Option<u16> {
        if self.maint || !self.last.status.has_code() {
            return None;
        }
        self.last.code
    }

    /// `check_duration` column, in ms: empty before the first result and in MAINT.
    pub fn stat_check_duration(&self) -> Option<u128> {
        if self.maint || self.last.status == Status::Ini {
            return None;
        }
        Some(self.last.duration.as_millis())
    }
}

/// When server `index` (0-based, over every checked server of every proxy) of `count` runs its
/// first check: spread evenly over `interval` (HAProxy uses the smallest interval of all).
pub fn first_check_offset(index: usize, count: usize, interval: Duration) -> Duration {
    if count == 0 {
        return Duration::ZERO;
    }
    let ms = interval.as_millis() * (index.min(count) as u128) / count as u128;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// Syslog severities of the lines below.
pub const LOG_EMERG: u8 = 0;
pub const LOG_ALERT: u8 = 1;
pub const LOG_NOTICE: u8 = 5;

/// Who a line is about and the counts HAProxy prints after a change (computed by the caller
/// once the change is applied).
#[derive(Clone, Debug)]
pub struct LogCtx<'a> {
    pub proxy: &'a str,
    pub server: &'a str,
    pub backup: bool,
    /// Usable active / backup servers left in the backend.
    pub active: u32,
    pub backups: u32,
    /// Sessions on the server, sessions requeued, and queue length.
    pub sessions: u32,
    pub requeued: u32,
    pub queued: u32,
    /// The server's host name (`server … <fqdn>`), for the resolution lines.
    pub hostname: String,
}

/// `, reason: <desc>[, code: <n>][, info: "<info>"], check duration: <ms>ms`.
pub fn fmt_reason(out: &CheckOutcome) -> String {
    let mut s = format!(", reason: {}", out.status.desc());
    if out.status.has_code() {
        s.push_str(&format!(", code: {}", out.code.unwrap_or(0)));
    }
    if !out.info.is_empty() {
        s.push_str(&format!(", info: \"{}\"", out.info));
    }
    s.push_str(&format!(", check duration: {}ms", out.duration.as_millis()));
    s
}

/// The state-change line (no trailing newline). `check` is the result that caused it; pass
/// `None` with `option log-health-checks` (the reason was already on the health-check line).
pub fn fmt_transition(ctx: &LogCtx, tr: Transition, check: Option<&CheckOutcome>) -> String {
    let who = format!(
        "{}Server {}/{}",
        if ctx.backup { "Backup " } else { "" },
        ctx.proxy,
        ctx.server
    );
    let reason = check.map(fmt_reason).unwrap_or_default();
    // Observed in 2.6: "… servers online. Running on backup. 0 sessions requeued, …".
    let on_backup = if ctx.active == 0 && ctx.backups > 0 {
        " Running on backup."
    } else {
        ""
    };
    let left = format!(
        "{} active and {} backup servers left.{on_backup} {} sessions active, {} requeued, {} remaining in queue.",
        ctx.active, ctx.backups, ctx.sessions, ctx.requeued, ctx.queued
    );
    let online = format!(
        "{} active and {} backup servers online.{on_backup} {} sessions requeued, {} total in queue.",
        ctx.active, ctx.backups, ctx.requeued, ctx.queued
    );
    match tr {
        Transition::Down => format!("{who} is DOWN{reason}. {left}"),
        Transition::Up => format!("{who} is UP{reason}. {online}"),
        Transition::Nolb => format!("{who} is stopping{reason}. {online}"),
        Transition::Maint {
            was_down: false,
            cause,
        } => {
            format!(
                "{who} is going DOWN for maintenance{}. {left}",
                cause.text()
            )
        }
        Transition::Maint {
            was_down: true,
            cause,
        } => {
            format!("{who} was DOWN and now enters maintenance{}.", cause.text())
        }
        Transition::Ready => format!("{who} is UP/READY (leaving forced maintenance)."),
        Transition::Resolved => format!(
            "{}Server {}/{} ('{}') is UP/READY (resolves again).",
            if ctx.backup { "Backup " } else { "" },
            ctx.proxy,
            ctx.server,
            ctx.hostname
        ),
    }
}

/// Severity of a state-change line; `was_usable` = the server took traffic before (a drained
/// server going DOWN is only a notice).
pub fn transition_level(tr: Transition, was_usable: bool) -> u8 {
    match tr {
        Transition::Down
        | Transition::Maint {
            was_down: false, ..
        } if was_usable => LOG_ALERT,
        _ => LOG_NOTICE,
    }
}

/// `option log-health-checks` line for the last result (log at notice). `drain` = weight 0.
pub fn fmt_health_check(ctx: &LogCtx, st: &CheckState, drain: bool) -> String {
    let out = st.last();
    let result = out.status.result();
    let verdict = match result {
        CheckResult::CondPass => "conditionally succeeded",
        CheckResult::Passed => "succeeded",
        _ => "failed",
    };
    let (n, d, word) = if st.health >= st.rise {
        (
            st.health - st.rise + 1,
            st.fall,
            if drain { "DRAIN" } else { "UP" },
        )
    } else {
        (st.health, st.rise, "DOWN")
    };
    format!(
        "Health check for {}server {}/{} {verdict}{}, status: {n}/{d} {word}.",
        if ctx.backup { "backup " } else { "" },
        ctx.proxy,
        ctx.server,
        fmt_reason(out)
    )
}

/// Logged (at emerg) when a backend's last usable server goes away.
pub fn fmt_no_server(backend: &str) -> String {
    format!("backend {backend} has no server available!")
}

/// The same event as HAProxy prints it on stderr (after `[ALERT]    (<pid>) : `).
pub fn fmt_no_server_stderr(backend: &str) -> String {
    format!("backend '{backend}' has no server available!")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn st(rise: u32, fall: u32) -> CheckState {
        CheckState::with(
            rise,
            fall,
            Intervals {
                inter: ms(2000),
                fastinter: Some(ms(500)),
                downinter: Some(ms(5000)),
            },
        )
    }
    fn ok() -> CheckOutcome {
        CheckOutcome::new(Status::L7Ok, Some(200), "", ms(1))
    }
    fn bad() -> CheckOutcome {
        CheckOutcome::new(Status::L7Sts, Some(503), "Service Unavailable", ms(1))
    }
    fn c404() -> CheckOutcome {
        CheckOutcome::new(Status::L7OkC, Some(404), "", ms(0))
    }
    const CTX: LogCtx = LogCtx {
        proxy: "be",
        server: "srv",
        backup: false,
        active: 2,
        backups: 0,
        sessions: 0,
        requeued: 0,
        queued: 0,
        hostname: String::new(),
    };

    #[test]
    fn forced_health_moves_between_states() {
        let mut st = CheckState::with(
            2,
            3,
            Intervals {
                inter: Duration::from_secs(2),
                fastinter: None,
                downinter: None,
            },
        );
        assert_eq!(st.force_health(OpState::Stopped), Some(Transition::Down));
        assert_eq!((st.health(), st.chkdown), (0, 1));
        assert_eq!(st.force_health(OpState::Stopped), None);
        assert_eq!(st.force_health(OpState::Stopping), Some(Transition::Nolb));
        assert_eq!(st.health(), 4);
        assert_eq!(st.force_health(OpState::Running), Some(Transition::Up));
        assert!(st.is_usable());
    }

    #[test]
    fn table_is_indexed_by_status() {
        for (i, r) in STATUSES.iter().enumerate() {
            assert_eq!(r.status as usize, i);
            assert_eq!(r.status.info().name, r.name);
        }
        assert_eq!(Status::L7Sts.num(), 17);
        assert_eq!(Status::L4Con.desc(), "Layer4 connection problem");
        assert_eq!(Status::L7OkC.name(), "L7OKC");
        assert!(Status::L7Ok.has_code() && !Status::L7Rsp.has_code() && !Status::L4Ok.has_code());
    }

    #[test]
    fn starts_up_one_failure_marks_down() {
        let mut s = st(2, 3);
        assert_eq!(s.stat_status(false), "UP 1/3");
        assert_eq!(s.stat_check_status(), "INI");
        assert_eq!(s.stat_check_duration(), None);
        assert_eq!(s.next_interval(), ms(500));
        let u = s.on_result(bad());
        assert_eq!(u.transition, Some(Transition::Down));
        assert!(u.report);
        assert_eq!((s.health(), s.chkfail, s.chkdown), (0, 1, 1));
        assert_eq!(s.stat_status(false), "DOWN");
        assert_eq!(s.next_interval(), ms(5000));
        // Further failures at H = 0 count nothing.
        let u = s.on_result(bad());
        assert_eq!(
            u,
            Update {
                transition: None,
                report: false
            }
        );
        assert_eq!((s.chkfail, s.chkdown), (1, 1));
    }

    #[test]
    fn starts_up_one_success_fully_up() {
        let mut s = st(2, 3);
        let u = s.on_result(ok());
        assert_eq!(
            u,
            Update {
                transition: None,
                report: true
            }
        );
        assert_eq!(s.health(), 4);
        assert_eq!(s.stat_status(false), "UP");
        assert_eq!(s.next_interval(), ms(2000));
        assert_eq!(s.stat_check_status(), "L7OK");
        assert_eq!(s.stat_check_code(), Some(200));
        assert_eq!(s.stat_check_duration(), Some(1));
        // Same status, health at the top: nothing to report.
        assert_eq!(
            s.on_result(ok()),
            Update {
                transition: None,
                report: false
            }
        );
    }

    #[test]
    fn going_down_and_up_again() {
        let mut s = st(2, 3);
        s.on_result(ok());
        assert_eq!(s.on_result(bad()).transition, None);
        assert_eq!(s.stat_status(false), "UP 2/3");
        assert_eq!(s.next_interval(), ms(500));
        assert_eq!(s.on_result(bad()).transition, None);
        assert_eq!(s.stat_status(false), "UP 1/3");
        assert_eq!(s.on_result(bad()).transition, Some(Transition::Down));
        assert_eq!((s.chkfail, s.chkdown), (3, 1));
        assert_eq!(s.on_result(ok()).transition, None);
        assert_eq!(s.stat_status(false), "DOWN 1/2");
        assert_eq!(s.on_result(ok()).transition, Some(Transition::Up));
        assert_eq!(s.stat_status(false), "UP");
        // A success in the middle of a fall restores full health.
        s.on_result(bad());
        assert_eq!(s.health(), 3);
        s.on_result(ok());
        assert_eq!(s.health(), 4);
    }

    #[test]
    fn rise_one_fall_one() {
        let mut s = st(1, 1);
        assert_eq!(s.stat_status(false), "UP");
        assert_eq!(s.next_interval(), ms(2000));
        assert_eq!(s.on_result(bad()).transition, Some(Transition::Down));
        assert_eq!(s.on_result(ok()).transition, Some(Transition::Up));
    }

    #[test]
    fn nolb_on_conditional_pass() {
        let mut s = st(2, 3);
        assert_eq!(s.on_result(c404()).transition, Some(Transition::Nolb));
        assert_eq!(s.stat_status(false), "NOLB");
        assert_eq!((s.chkfail, s.chkdown), (0, 0));
        assert!(!s.is_usable() && !s.is_stopped());
        assert_eq!(
            s.on_result(c404()),
            Update {
                transition: None,
                report: false
            }
        );
        s.on_result(bad());
        assert_eq!(s.stat_status(false), "NOLB 2/3");
        assert_eq!(s.on_result(ok()).transition, Some(Transition::Up));
        // L7OKC -> L7OK with full health: a report (status changed) but no health change.
        s.on_result(c404());
        let u = s.on_result(ok());
        assert_eq!(
            u,
            Update {
                transition: Some(Transition::Up),
                report: true
            }
        );
        s.on_result(c404());
        for _ in 0..2 {
            assert_eq!(s.on_result(bad()).transition, None);
        }
        assert_eq!(s.on_result(bad()).transition, Some(Transition::Down));
        assert_eq!(s.chkdown, 1);
    }

    #[test]
    fn maintenance() {
        let mut s = st(2, 2);
        s.on_result(ok());
        assert_eq!(
            s.enter_maint(),
            Some(Transition::Maint {
                was_down: false,
                cause: MaintCause::Forced
            })
        );
        assert_eq!(s.enter_maint(), None);
        assert_eq!(s.chkdown, 1);
        assert_eq!(s.stat_status(false), "MAINT");
        assert_eq!(s.stat_check_status(), "");
        assert_eq!(s.stat_check_code(), None);
        assert_eq!(s.stat_check_duration(), None);
        assert_eq!(s.on_result(bad()).transition, None);
        assert_eq!(s.chkfail, 0);
        assert_eq!(s.leave_maint(), Some(Transition::Ready));
        assert_eq!(s.leave_maint(), None);
        // Observed in 2.6: `UP 1/2` and the last status kept.
        assert_eq!(s.stat_status(false), "UP 1/2");
        assert_eq!(s.stat_check_status(), "L7OK");
        // Down servers entering maintenance are not counted again.
        s.on_result(bad());
        assert_eq!(s.chkdown, 2);
        assert_eq!(
            s.enter_maint(),
            Some(Transition::Maint {
                was_down: true,
                cause: MaintCause::Forced
            })
        );
        assert_eq!(s.chkdown, 2);
        let opts = ServerOpts {
            disabled: true,
            ..ServerOpts::default()
        };
        assert!(CheckState::new(&opts).is_maint());
    }

    #[test]
    fn drain_and_in_progress() {
        let mut s = st(2, 3);
        s.on_result(ok());
        assert_eq!(s.stat_status(true), "DRAIN");
        s.on_result(bad());
        assert_eq!(s.stat_status(true), "DRAIN 2/3");
        s.start();
        assert_eq!(s.stat_check_status(), "* L7STS");
        s.on_result(bad());
        assert_eq!(s.stat_check_status(), "L7STS");
    }

    #[test]
    fn intervals_default_to_inter() {
        let mut s = CheckState::new(&ServerOpts::default());
        assert_eq!(s.next_interval(), ms(2000));
        s.on_result(bad());
        assert_eq!(s.next_interval(), ms(2000));
        assert_eq!(first_check_offset(0, 4, ms(2000)), ms(0));
        assert_eq!(first_check_offset(3, 4, ms(2000)), ms(1500));
        assert_eq!(first_check_offset(1, 3, ms(1000)), ms(333));
        assert_eq!(first_check_offset(0, 0, ms(1000)), ms(0));
    }

    // Texts captured from HAProxy 2.6.12 (`log stdout format raw local0`).
    #[test]
    fn state_change_lines() {
        let down = bad();
        assert_eq!(
            fmt_transition(&CTX, Transition::Down, Some(&down)),
            "Server be/srv is DOWN, reason: Layer7 wrong status, code: 503, info: \"Service Unavailable\", check duration: 1ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        assert_eq!(
            fmt_transition(&CTX, Transition::Up, Some(&ok())),
            "Server be/srv is UP, reason: Layer7 check passed, code: 200, check duration: 1ms. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."
        );
        let refused = CheckOutcome::new(Status::L4Con, None, "Connection refused", ms(0));
        let ctx = LogCtx { active: 1, ..CTX };
        assert_eq!(
            fmt_transition(&ctx, Transition::Down, Some(&refused)),
            "Server be/srv is DOWN, reason: Layer4 connection problem, info: \"Connection refused\", check duration: 0ms. 1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        let tout = CheckOutcome::new(Status::L4Tout, None, "", ms(501));
        assert_eq!(
            fmt_transition(&CTX, Transition::Down, Some(&tout)),
            "Server be/srv is DOWN, reason: Layer4 timeout, check duration: 501ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        let garbage = CheckOutcome::new(Status::L7Rsp, None, "", ms(0));
        assert_eq!(
            fmt_transition(&CTX, Transition::Down, Some(&garbage)),
            "Server be/srv is DOWN, reason: Layer7 invalid response, check duration: 0ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        let ctx0 = LogCtx { active: 0, ..CTX };
        assert_eq!(
            fmt_transition(&ctx0, Transition::Nolb, Some(&c404())),
            "Server be/srv is stopping, reason: Layer7 check conditionally passed, code: 404, check duration: 0ms. 0 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."
        );
        let tcp = CheckOutcome::new(
            Status::L7Rsp,
            None,
            "TCPCHK did not match content '+PONG' at step 2",
            ms(0),
        );
        assert_eq!(
            fmt_transition(&ctx, Transition::Down, Some(&tcp)),
            "Server be/srv is DOWN, reason: Layer7 invalid response, info: \"TCPCHK did not match content '+PONG' at step 2\", check duration: 0ms. 1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        assert_eq!(
            fmt_transition(&ctx0, Transition::Down, None),
            "Server be/srv is DOWN. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        let ctx11 = LogCtx {
            active: 1,
            backups: 1,
            ..CTX
        };
        assert_eq!(
            fmt_transition(
                &ctx11,
                Transition::Maint {
                    was_down: false,
                    cause: MaintCause::Forced
                },
                None
            ),
            "Server be/srv is going DOWN for maintenance. 1 active and 1 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        assert_eq!(
            fmt_transition(
                &CTX,
                Transition::Maint {
                    was_down: true,
                    cause: MaintCause::Forced
                },
                None
            ),
            "Server be/srv was DOWN and now enters maintenance."
        );
        assert_eq!(
            fmt_transition(&CTX, Transition::Ready, None),
            "Server be/srv is UP/READY (leaving forced maintenance)."
        );
        let bk = LogCtx {
            backup: true,
            ..CTX
        };
        assert_eq!(
            fmt_transition(&bk, Transition::Ready, None),
            "Backup Server be/srv is UP/READY (leaving forced maintenance)."
        );
        let bko = LogCtx {
            active: 0,
            backups: 1,
            ..CTX
        };
        assert_eq!(
            fmt_transition(&bko, Transition::Nolb, None),
            "Server be/srv is stopping. 0 active and 1 backup servers online. Running on backup. 0 sessions requeued, 0 total in queue."
        );
        assert_eq!(transition_level(Transition::Nolb, true), LOG_NOTICE);
        assert_eq!(
            fmt_no_server("be_503"),
            "backend be_503 has no server available!"
        );
        assert_eq!(
            fmt_no_server_stderr("be_503"),
            "backend 'be_503' has no server available!"
        );
        assert_eq!(transition_level(Transition::Down, true), LOG_ALERT);
        assert_eq!(transition_level(Transition::Down, false), LOG_NOTICE);
        assert_eq!(
            transition_level(
                Transition::Maint {
                    was_down: true,
                    cause: MaintCause::Forced
                },
                false
            ),
            LOG_NOTICE
        );
        assert_eq!(transition_level(Transition::Up, false), LOG_NOTICE);
    }

    #[test]
    fn health_check_lines() {
        // rise 2 fall 3, as captured with `option log-health-checks`.
        let mut s = st(2, 3);
        s.on_result(ok());
        assert_eq!(
            fmt_health_check(&CTX, &s, false),
            "Health check for server be/srv succeeded, reason: Layer7 check passed, code: 200, check duration: 1ms, status: 3/3 UP."
        );
        s.on_result(bad());
        assert_eq!(
            fmt_health_check(&CTX, &s, false),
            "Health check for server be/srv failed, reason: Layer7 wrong status, code: 503, info: \"Service Unavailable\", check duration: 1ms, status: 2/3 UP."
        );
        s.on_result(bad());
        s.on_result(bad());
        assert!(
            fmt_health_check(&CTX, &s, false).ends_with("check duration: 1ms, status: 0/2 DOWN.")
        );
        s.on_result(ok());
        assert!(fmt_health_check(&CTX, &s, false).ends_with(", status: 1/2 DOWN."));
        s.on_result(ok());
        s.on_result(c404());
        assert_eq!(
            fmt_health_check(&CTX, &s, false),
            "Health check for server be/srv conditionally succeeded, reason: Layer7 check conditionally passed, code: 404, check duration: 0ms, status: 3/3 UP."
        );
        let mut t = st(2, 3);
        t.on_result(CheckOutcome::new(
            Status::L7Ok,
            Some(0),
            "(tcp-check)",
            ms(0),
        ));
        assert_eq!(
            fmt_health_check(&CTX, &t, false),
            "Health check for server be/srv succeeded, reason: Layer7 check passed, code: 0, info: \"(tcp-check)\", check duration: 0ms, status: 3/3 UP."
        );
        let bk = LogCtx {
            backup: true,
            ..CTX
        };
        assert!(
            fmt_health_check(&bk, &t, false)
                .starts_with("Health check for backup server be/srv succeeded")
        );
        let mut l4 = st(2, 3);
        l4.on_result(CheckOutcome::new(Status::L4Ok, None, "", ms(0)));
        assert_eq!(
            fmt_health_check(&CTX, &l4, true),
            "Health check for server be/srv succeeded, reason: Layer4 check passed, check duration: 0ms, status: 3/3 DRAIN."
        );
    }
}
