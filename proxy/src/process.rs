//! Process setup from the `global` section, in HAProxy's order: the file-descriptor limit at
//! start (`ulimit-n`), then — once listeners, log sockets, admin sockets, certificates and the
//! eBPF programs are open — `chroot`, the group, the user, and `set-dumpable`.
//!
//! What the workers still reach after the chroot: only descriptors opened before it (listeners,
//! `/dev/log` as opened at start, the admin sockets, certificates loaded in memory). A log
//! socket that must be re-opened later has to exist inside the chroot (Debian's rsyslog snippet
//! creates `/var/lib/haproxy/dev/log` for HAProxy for this reason).

use crate::config::model::Global;

/// `ulimit-n <n>`: RLIMIT_NOFILE set to `n` (soft and hard), as HAProxy does at start. Returns
/// a warning when the kernel refuses.
pub fn apply_limits(g: &Global) -> Option<String> {
    let n = g.process.ulimit_n.filter(|n| *n > 0)?;
    let want = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: setrlimit/getrlimit only read or write the struct they are given.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
            return None;
        }
        // Unprivileged: the soft limit can still go up to the hard one.
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur);
        let soft = libc::rlimit {
            rlim_cur: want.rlim_cur.min(cur.rlim_max),
            rlim_max: cur.rlim_max,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur);
        Some(format!(
            "[portcullis.main()] Cannot raise FD limit to {n}, limit is {}.",
            cur.rlim_cur
        ))
    }
}

/// `chroot`, `group`/`gid`, `user`/`uid` and `set-dumpable`, in that order. Errors carry
/// HAProxy's words; the process must not go on serving after one.
pub fn drop_privileges(g: &Global) -> Result<(), String> {
    let p = &g.process;
    if let Some(dir) = &p.chroot {
        // Load the time zone before /etc/localtime goes out of reach (log timestamps).
        let now: libc::time_t = 0;
        // SAFETY: localtime_r only writes into the `tm` we own; a zeroed `tm` is a valid value.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        unsafe { libc::localtime_r(&now, &mut tm) };
        nix::unistd::chroot(dir.as_str())
            .and_then(|()| nix::unistd::chdir("/"))
            .map_err(|_| format!("[portcullis.main()] Cannot chroot({dir})."))?;
    }
    if let Some(gid) = p.gid.filter(|g| *g != 0) {
        // Supplementary groups of the (root) parent must not survive the switch.
        if nix::unistd::getuid().is_root() {
            let _ = nix::unistd::setgroups(&[]);
        }
        nix::unistd::setgid(nix::unistd::Gid::from_raw(gid))
            .map_err(|_| format!("[portcullis.main()] Cannot set gid {gid}."))?;
    }
    if let Some(uid) = p.uid.filter(|u| *u != 0)
        && nix::unistd::getuid().as_raw() != uid
    {
        nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))
            .map_err(|_| format!("[portcullis.main()] Cannot set uid {uid}."))?;
    }
    // After setuid the kernel clears the dumpable flag; `set-dumpable` puts it back.
    if p.set_dumpable {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1) };
    }
    Ok(())
}

/// Keeps transparent huge pages out of the process, unless `MIMALLOC_ALLOW_THP` is set (then
/// mimalloc's own option decides). mimalloc marks its arena `MADV_HUGEPAGE`, and with the
/// kernel's default `max_ptes_none` (511) khugepaged folds any 2 MiB range holding one page in
/// use into a whole huge page, at a moment of its choosing: resident memory then grew by 2 MiB
/// steps minutes after the connections that caused it — the idle row moved between 0.70 and
/// 0.95 KiB per connection across runs of one binary — and a fresh process held 24 MiB instead
/// of 12.5. No CPU cost was measured (`ka-instr.sh MODE=cpu`, six alternating pairs on io_uring:
/// keep-alive user 4.87 µs per request without against 5.04 with, one request per connection
/// 10.4 against 12.4). HAProxy's and nginx's heaps (glibc malloc) do not ask for huge pages.
/// The setting is the process' and is inherited by the programs it starts.
pub fn keep_huge_pages_out() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: prctl with integer arguments only; 0 as the third argument disables THP for
    // every mapping, including those advised MADV_HUGEPAGE (mimalloc's arena).
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// Gives the pages freed during start-up back to the kernel. The eBPF loader parses the kernel's
/// BTF (tens of MiB, dropped at once), and the configuration and certificates leave their own
/// garbage; mimalloc keeps freed pages of a thread until that thread allocates again, which the
/// main thread hardly does once the workers run — 35–50 MiB of resident memory nobody uses.
pub fn release_startup_memory() {
    // SAFETY: mi_collect only walks and purges the calling thread's heap (and abandoned
    // segments); with another global allocator it finds nothing to free.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
