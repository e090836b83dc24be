//! Listening sockets from `bind` lines, created with socket2: one SO_REUSEPORT socket per worker
//! for inet addresses (the kernel spreads connections, no shared accept queue), one shared socket
//! duplicated per worker for `unix@` and inherited `fd@` listeners.

use std::io;
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::config::model::BindAddr;

pub const DEFAULT_BACKLOG: i32 = 1024;

/// A new inet listening socket bound with SO_REUSEADDR + SO_REUSEPORT.
pub fn inet(addr: std::net::SocketAddr, backlog: i32) -> io::Result<Socket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nodelay(true)?;
    sock.bind(&SockAddr::from(addr))?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// A unix stream listener; a stale socket file from a previous run is replaced, as HAProxy does.
pub fn unix(path: &str, backlog: i32, mode: Option<u32>) -> io::Result<Socket> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_socket() {
            std::fs::remove_file(path)?;
        }
    }
    let sock = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)?;
    sock.bind(&SockAddr::unix(path)?)?;
    if let Some(m) = mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m))?;
    }
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// A listening socket in the abstract namespace (`abns@<name>`, padded as HAProxy's).
pub fn abns(name: &str, backlog: i32) -> io::Result<Socket> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)?;
    sock.bind(&super::io::abns_addr(name)?)?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// An inherited listening descriptor (`fd@N`): checked to be a listening stream socket.
pub fn inherited(fd: i32) -> io::Result<Socket> {
    let dup = super::io::dup_socket(fd)?;
    let ty = dup.r#type()?;
    if ty != Type::STREAM {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a stream socket",
        ));
    }
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a correctly sized int.
    let rc = unsafe {
        libc::getsockopt(
            dup.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || val == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a listening socket",
        ));
    }
    dup.set_nonblocking(true)?;
    Ok(dup)
}

/// Text for `[addr]` in alerts, as HAProxy prints it.
pub fn describe(addr: &BindAddr) -> String {
    match addr {
        BindAddr::Inet(a) => a.to_string(),
        BindAddr::Unix(p) => format!("unix@{p}"),
        BindAddr::Abns(n) => format!("abns@{n}"),
        BindAddr::Fd(n) => format!("fd@{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_reuseport_sockets_share_a_port() {
        let a = inet("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let port = a.local_addr().unwrap().as_socket().unwrap().port();
        let b = inet(format!("127.0.0.1:{port}").parse().unwrap(), 16).unwrap();
        assert_eq!(b.local_addr().unwrap().as_socket().unwrap().port(), port);
    }

    #[test]
    fn inherited_rejects_non_listening() {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        assert!(inherited(s.as_raw_fd()).is_err());
        let l = inet("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        assert!(inherited(l.as_raw_fd()).is_ok());
    }
}
