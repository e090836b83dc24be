//! Zero-copy for the userspace relay's bulk directions: splice(2) socket → pipe → socket, so the
//! bytes stay in the kernel (HAProxy's `option splice-auto`).
//!
//! **The switch rule** ([`BulkRule`]): a direction starts on the copy path (read into a
//! [`RELAY_BUF`](super::relay::RELAY_BUF) buffer, write it out) and moves to splice once
//! [`BULK_READS`] reads in a row filled the whole buffer: the sender keeps at least 64 KiB
//! queued, a bulk transfer. Chatty traffic (requests and answers smaller than the buffer) never
//! fills it and stays on the copy path, where one read and one write per message is what splice
//! would cost too, without the pipe. The move is for the rest of the session.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Full-buffer reads in a row that make a direction bulk.
pub const BULK_READS: u32 = 2;

/// The pipe's capacity (F_SETPIPE_SZ; the kernel's default of 64 KiB is kept if refused).
pub const PIPE_SIZE: usize = 256 * 1024;

/// Bytes the userspace relay moved with splice(2) since start (`show splice`: `PipeSplicedBytes`).
pub static SPLICED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Directions moved to splice(2) since start (`show splice`: `PipeSplicedDirections`).
pub static SPLICED_DIRECTIONS: AtomicU64 = AtomicU64::new(0);

/// The per-direction switch rule (pure): fed each copy-path read's size.
#[derive(Debug, Default)]
pub struct BulkRule {
    full_in_row: u32,
}

impl BulkRule {
    /// Records a read of `n` bytes into a buffer of `room`; true once the direction is bulk.
    pub fn on_read(&mut self, n: usize, room: usize) -> bool {
        if n >= room {
            self.full_in_row += 1;
        } else {
            self.full_in_row = 0;
        }
        self.full_in_row >= BULK_READS
    }
}

/// One spliced direction's pipe, closed when dropped.
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    size: usize,
}

const FLAGS: libc::c_uint = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills the two descriptors, which we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own. Over the per-user pipe budget the kernel
        // refuses: the default size then does.
        let got =
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE as libc::c_int) };
        let size = if got > 0 { got as usize } else { 64 * 1024 };
        Ok(Pipe { r, w, size })
    }

    /// Moves what `from` has (at most the pipe's capacity) into the (empty) pipe; Ok(0) is end
    /// of stream.
    pub fn fill(&self, from: RawFd) -> io::Result<usize> {
        splice(from, self.w.as_raw_fd(), self.size)
    }

    /// Moves up to `len` bytes from the pipe to `to`.
    pub fn drain(&self, to: RawFd, len: usize) -> io::Result<usize> {
        match splice(self.r.as_raw_fd(), to, len)? {
            0 => Err(io::ErrorKind::WriteZero.into()),
            n => Ok(n),
        }
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain syscall on descriptors that stay open for its duration.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            FLAGS,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

pub(super) fn count(n: usize) {
    SPLICED_BYTES.fetch_add(n as u64, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_after_full_reads_in_a_row() {
        let mut r = BulkRule::default();
        assert!(!r.on_read(65536, 65536));
        assert!(!r.on_read(100, 65536), "a short read restarts the count");
        assert!(!r.on_read(65536, 65536));
        assert!(r.on_read(65536, 65536));
    }

    #[test]
    fn chatty_never_bulk() {
        let mut r = BulkRule::default();
        for n in [1, 512, 16384, 65535, 0, 4096]
            .into_iter()
            .cycle()
            .take(600)
        {
            assert!(!r.on_read(n, 65536));
        }
    }

    #[test]
    fn pipe_carries_socket_bytes_in_order() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        let (c, mut d) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::{Read, Write};
        a.write_all(b"hello splice").unwrap();
        let p = Pipe::new().unwrap();
        assert!(p.size >= 64 * 1024);
        let mut n = 0;
        while n == 0 {
            n = match p.fill(b.as_raw_fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                r => r.unwrap(),
            };
        }
        assert_eq!(n, 12);
        assert_eq!(p.drain(c.as_raw_fd(), n).unwrap(), 12);
        let mut got = [0u8; 12];
        d.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello splice");
        drop(a);
        let mut eof = None;
        while eof.is_none() {
            match p.fill(b.as_raw_fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => eof = Some(r.unwrap()),
            }
        }
        assert_eq!(eof, Some(0));
    }
}
