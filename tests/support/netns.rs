//! Processes in a fresh network namespace that has nothing but `lo` (for configurations that
//! name real addresses, and for fixed ports that cannot collide), and threads that join it.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Starts `cmd` in a new network namespace whose only interface, `lo`, is up, and where
/// non-local addresses may be bound (nothing can reach them).
pub fn spawn_isolated(mut cmd: Command) -> Child {
    // SAFETY: between fork and exec only async-signal-safe calls (unshare, socket, ioctl).
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
            if s < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut ifr: libc::ifreq = std::mem::zeroed();
            for (d, b) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
                *d = *b as libc::c_char;
            }
            if libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(s);
            // The files bind their real addresses: let them bind although only `lo` exists
            // (these sysctls belong to the new namespace).
            for path in [
                c"/proc/sys/net/ipv4/ip_nonlocal_bind",
                c"/proc/sys/net/ipv6/ip_nonlocal_bind",
            ] {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"1".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
    cmd.spawn().expect("spawn")
}

/// Runs `f` on a thread that joined `pid`'s network namespace (setns is per thread).
pub fn in_netns<T: Send>(pid: u32, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).expect("netns");
            // SAFETY: setns on a descriptor we own; it only changes this thread's namespace.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("netns thread")
    })
}
