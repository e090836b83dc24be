//! Read readiness for the io_uring engine's idle sockets, from one epoll instance per worker
//! thread. tokio's own registration (`AsyncFd`) costs each socket a 256-byte allocation (its
//! `ScheduledIo` is padded to 128 bytes against false sharing between threads), and a keep-alive
//! connection waiting for its next request holds it for as long as it waits; here a socket holds
//! a 24-byte slot in its worker's table. The epoll instance itself is registered with tokio once
//! per worker, and a task of the worker reads its events into the slots: one `epoll_wait` per
//! batch of sockets that became readable.
//!
//! Everything runs on the worker thread that owns the sockets (the engine is thread-per-core):
//! no slot is touched concurrently, and nothing can happen between a socket's read and the clearing
//! of its readiness that follows (events that come meanwhile wait in the epoll instance until
//! the worker's task reads them, and mark the slot again).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Events read per `epoll_wait`.
const BATCH: usize = 256;

/// A socket's readiness registration in its worker's epoll instance; it leaves the instance when
/// dropped (before its socket closes: see `io::Stream`).
pub struct Registration {
    poller: Rc<Poller>,
    fd: RawFd,
    key: u32,
    generation: u32,
}

struct Poller {
    epoll: OwnedFd,
    slots: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    table: Vec<Slot>,
    free: Vec<u32>,
}

#[derive(Default)]
struct Slot {
    /// Bumped when the slot is freed: an event read for its former socket is then ignored.
    generation: u32,
    ready: bool,
    waker: Option<Waker>,
}

thread_local! {
    /// This worker's poller; made at its first registration.
    static POLLER: RefCell<Option<Rc<Poller>>> = const { RefCell::new(None) };
}

impl Registration {
    /// Registers `fd` (a socket that stays open for the registration's whole life) with this
    /// worker's epoll instance, edge-triggered. Must run inside the worker's runtime.
    pub fn new(fd: RawFd) -> io::Result<Registration> {
        let poller = POLLER.with(|p| -> io::Result<Rc<Poller>> {
            let mut p = p.borrow_mut();
            if let Some(p) = p.as_ref() {
                return Ok(Rc::clone(p));
            }
            let new = Poller::start()?;
            *p = Some(Rc::clone(&new));
            Ok(new)
        })?;
        let (key, generation) = poller.slots.borrow_mut().take();
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: (u64::from(generation) << 32) | u64::from(key),
        };
        // SAFETY: an epoll_ctl on the poller's own instance with an event it reads.
        if unsafe { libc::epoll_ctl(poller.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }
            < 0
        {
            let e = io::Error::last_os_error();
            poller.slots.borrow_mut().give(key);
            return Err(e);
        }
        Ok(Registration {
            poller,
            fd,
            key,
            generation,
        })
    }

    /// Ready once the socket was seen readable (or closed, or in error) since the readiness was
    /// last cleared; otherwise the task is woken when it is.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut slots = self.poller.slots.borrow_mut();
        let Some(slot) = slots.table.get_mut(self.key as usize) else {
            return Poll::Ready(());
        };
        if slot.ready {
            return Poll::Ready(());
        }
        match &mut slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The socket was read dry (EAGAIN, or a short read): wait for its next edge.
    pub fn clear_ready(&self) {
        if let Some(slot) = self
            .poller
            .slots
            .borrow_mut()
            .table
            .get_mut(self.key as usize)
        {
            slot.ready = false;
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the socket is still open (see `new`); removing it from the poller's instance.
        unsafe {
            libc::epoll_ctl(
                self.poller.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                self.fd,
                std::ptr::null_mut(),
            );
        }
        let mut slots = self.poller.slots.borrow_mut();
        if slots
            .table
            .get(self.key as usize)
            .is_some_and(|s| s.generation == self.generation)
        {
            slots.give(self.key);
        }
    }
}

impl Slots {
    /// A free slot, not ready (the socket's first edge, or the one its registration reports at
    /// once if it is already readable, marks it).
    fn take(&mut self) -> (u32, u32) {
        let key = match self.free.pop() {
            Some(k) => k,
            None => {
                self.table.push(Slot::default());
                u32::try_from(self.table.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let generation = self.table.get(key as usize).map_or(0, |s| s.generation);
        (key, generation)
    }

    fn give(&mut self, key: u32) {
        if let Some(s) = self.table.get_mut(key as usize) {
            s.generation = s.generation.wrapping_add(1);
            s.ready = false;
            s.waker = None;
            self.free.push(key);
        }
    }

    /// Marks the slots of `events` ready and gives the wakers to wake.
    fn mark(&mut self, events: &[libc::epoll_event], wake: &mut Vec<Waker>) {
        for ev in events {
            let data = ev.u64;
            let (key, generation) = ((data & 0xffff_ffff) as usize, (data >> 32) as u32);
            if let Some(s) = self.table.get_mut(key)
                && s.generation == generation
            {
                s.ready = true;
                wake.extend(s.waker.take());
            }
        }
    }
}

impl Poller {
    /// A new epoll instance, and the worker task that reads its events.
    fn start() -> io::Result<Rc<Poller>> {
        // SAFETY: epoll_create1 returns a new descriptor (or -1).
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created, owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the descriptor is the poller's, which the watch's task keeps (with the watch)
        // for as long as the watch lives.
        let watch = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                EpollFd(epoll.as_raw_fd()),
                tokio::io::Interest::READABLE,
            )
        }
        .map_err(io::Error::from)?;
        let poller = Rc::new(Poller {
            epoll,
            slots: RefCell::default(),
        });
        tokio::task::spawn_local(drive(Rc::clone(&poller), watch));
        Ok(poller)
    }
}

/// The poller's descriptor as tokio watches it (owned by the poller, which outlives the watch).
struct EpollFd(RawFd);

impl AsRawFd for EpollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Reads the instance's events whenever tokio sees it readable, and wakes the tasks waiting on
/// the sockets they name. Runs as long as the worker.
async fn drive(poller: Rc<Poller>, watch: tokio::io::unix::AsyncFd<EpollFd>) {
    // SAFETY: epoll_event is plain data; zeroed is a valid value.
    let mut events = vec![unsafe { std::mem::zeroed::<libc::epoll_event>() }; BATCH];
    let mut wake = Vec::new();
    loop {
        let mut guard = match watch.readable().await {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!("idle sockets' epoll instance: {e}");
                return;
            }
        };
        // SAFETY: epoll_wait writes at most BATCH events into `events`; no wait (timeout 0).
        let n = unsafe {
            libc::epoll_wait(
                poller.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                BATCH as libc::c_int,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::warn!("idle sockets' epoll_wait: {e}");
            return;
        }
        let n = n as usize;
        poller
            .slots
            .borrow_mut()
            .mark(events.get(..n).unwrap_or_default(), &mut wake);
        if n < BATCH {
            guard.clear_ready();
        }
        for w in wake.drain(..) {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_events_and_freed_slots_wake_no_one() {
        let mut slots = Slots::default();
        let (a, ga) = slots.take();
        let (b, gb) = slots.take();
        assert_ne!(a, b);
        let ev = |k: u32, g: u32| libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: (u64::from(g) << 32) | u64::from(k),
        };
        // `a` freed, then taken again by another socket: the old generation's event is stale.
        slots.give(a);
        let (a2, ga2) = slots.take();
        assert_eq!(a2, a);
        assert_ne!(ga2, ga);
        let mut wake = Vec::new();
        slots.mark(&[ev(a, ga), ev(b, gb), ev(99, 0)], &mut wake);
        assert!(
            !slots.table[a as usize].ready,
            "a stale event marks nothing"
        );
        assert!(slots.table[b as usize].ready);
        slots.mark(&[ev(a2, ga2)], &mut wake);
        assert!(slots.table[a2 as usize].ready);
    }

    /// Real sockets on a current-thread runtime: a registered socket is not ready until its
    /// peer writes, then wakes its waiter, and a cleared one waits for the next bytes.
    #[test]
    fn a_socket_becomes_ready_when_its_peer_writes() {
        use std::io::Write;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let mut client =
                std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            let (server, _) = l.accept().expect("accept");
            server.set_nonblocking(true).expect("nonblocking");
            let reg = Registration::new(server.as_raw_fd()).expect("register");
            let pending = std::future::poll_fn(|cx| Poll::Ready(reg.poll_read_ready(cx))).await;
            assert!(pending.is_pending(), "nothing written yet");
            client.write_all(b"x").expect("write");
            std::future::poll_fn(|cx| reg.poll_read_ready(cx)).await;
            let mut b = [0u8; 8];
            let n = (&server).read_nb(&mut b);
            assert_eq!(n, 1);
            assert_eq!((&server).read_nb(&mut b), -1, "drained");
            reg.clear_ready();
            let pending = std::future::poll_fn(|cx| Poll::Ready(reg.poll_read_ready(cx))).await;
            assert!(pending.is_pending(), "cleared after the drain");
            client.write_all(b"yz").expect("write");
            std::future::poll_fn(|cx| reg.poll_read_ready(cx)).await;
            assert_eq!((&server).read_nb(&mut b), 2);
            drop(reg);
            drop(client);
        });
    }

    trait ReadNb {
        fn read_nb(self, b: &mut [u8]) -> isize;
    }

    impl ReadNb for &std::net::TcpStream {
        fn read_nb(self, b: &mut [u8]) -> isize {
            // SAFETY: a recv into a buffer of its length, on an open socket.
            unsafe { libc::recv(self.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), 0) }
        }
    }
}
