//! How far a socket's sending has got, from the kernel: the redirect of a spliced session writes
//! into the peer socket from a kernel workqueue, so userspace learns what was sent from TCP itself.

use std::io;
use std::os::fd::RawFd;

/// `SO_COOKIE` (include/uapi/asm-generic/socket.h), not exported by libc for every target.
const SO_COOKIE: libc::c_int = 57;

/// The socket's cookie: the key of its entries in the splice maps.
pub fn cookie(fd: RawFd) -> io::Result<u64> {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_COOKIE,
            (&raw mut v).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `tcpi_bytes_acked`: bytes of this socket the peer has acknowledged (a FIN counts one).
pub fn bytes_acked(fd: RawFd) -> io::Result<u64> {
    tcp_info(fd).map(|i| i.tcpi_bytes_acked)
}

/// Whether the connection is gone (reset, or closed both ways): what it still queues never goes.
pub fn is_closed(fd: RawFd) -> bool {
    // TCP_CLOSE in include/net/tcp_states.h.
    tcp_info(fd).is_ok_and(|i| i.tcpi_state == 7)
}

fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// `SIOCOUTQ`: bytes in the socket's send queue not yet acknowledged.
pub fn outq(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: the ioctl writes one int.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Bytes this socket has handed to TCP (acknowledged or queued): once it covers what the kernel
/// redirected into the socket, nothing is left in the splice's own queue.
pub fn handed_to_tcp(fd: RawFd) -> io::Result<u64> {
    Ok(bytes_acked(fd)? + outq(fd)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn counts_what_was_sent_and_acked() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        assert_ne!(
            cookie(a.as_raw_fd()).unwrap(),
            cookie(b.as_raw_fd()).unwrap()
        );
        // The connecting side counts its SYN as one acknowledged byte: hence the splice's bases.
        let base = handed_to_tcp(a.as_raw_fd()).unwrap();
        assert!(base <= 1, "{base}");
        a.write_all(&[7u8; 1000]).unwrap();
        let mut buf = [0u8; 1000];
        b.read_exact(&mut buf).unwrap();
        let mut acked = 0;
        for _ in 0..200 {
            acked = bytes_acked(a.as_raw_fd()).unwrap() - base;
            if acked == 1000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(acked, 1000);
        assert_eq!(handed_to_tcp(a.as_raw_fd()).unwrap() - base, 1000);
        assert_eq!(outq(a.as_raw_fd()).unwrap(), 0);
        assert!(!is_closed(a.as_raw_fd()));
    }
}
