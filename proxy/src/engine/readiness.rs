//! Read readiness for the io_uring engine's idle sockets (and the epoll engine's while their
//! sessions park, taken out of tokio's reactor meanwhile: `Stream::detach`), from one epoll
//! instance per worker thread. tokio's own registration (`AsyncFd`) costs each socket a 256-byte
//! allocation (its `ScheduledIo` is padded to 128 bytes against false sharing between threads),
//! and a keep-alive connection waiting for its next request holds it for as long as it waits;
//! here a socket holds a 24-byte slot in its worker's table. The epoll instance itself is registered with tokio once
//! per worker, and a task of the worker reads its events into the slots: one `epoll_wait` per
//! batch of sockets that became readable.
//!
//! Everything runs on the worker thread that owns the sockets (the engine is thread-per-core):
//! no slot is touched concurrently, and nothing can happen between a socket's read and the clearing
//! of its readiness that follows (events that come meanwhile wait in the epoll instance until
//! the worker's task reads them, and mark the slot again).
//!
//! A session idle between requests may also *park* in its socket's slot ([`Ticket::park`]): its
//! task ends, and its state waits in the slot, boxed, until the socket becomes readable, its
//! deadline passes (a per-worker heap of deadlines), or the process stops; the worker's task
//! then resumes it in a new task ([`Parked::resume`]). As HAProxy frees an idle connection's
//! stream, a parked session holds no task (tokio's header, the future's room for every await of
//! a transaction) and no timer.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

/// Events read per `epoll_wait`.
const BATCH: usize = 256;

/// A session parked between requests ([`Ticket::park`]): no task runs it until something
/// happens to it.
pub trait Parked: 'static {
    /// Runs it again in a task of its own: its socket became readable, its deadline passed, or
    /// the process stops. It finds out which itself (its read, its timer, the stop flag), as
    /// the task it was would have.
    fn resume(self: Box<Self>);
}

/// A socket's readiness registration in its worker's epoll instance; it leaves the instance when
/// dropped (before its socket closes: see `io::Stream`).
pub struct Registration {
    poller: Rc<Poller>,
    fd: RawFd,
    key: u32,
    generation: u32,
}

/// A registration's right to park a session in its slot (see [`Registration::ticket`]).
pub struct Ticket {
    poller: Rc<Poller>,
    key: u32,
    generation: u32,
}

struct Poller {
    epoll: OwnedFd,
    slots: RefCell<Slots>,
    /// The parked sessions' deadlines.
    deadlines: RefCell<Deadlines>,
    /// When the deadlines are counted from (milliseconds in the heap).
    epoch: Instant,
    /// A deadline earlier than the driver's timer was parked.
    rearm: tokio::sync::Notify,
    /// The process stops: nothing parks any more.
    stopped: Cell<bool>,
}

#[derive(Default)]
struct Slots {
    table: Vec<Slot>,
    free: Vec<u32>,
    /// Sessions parked in the table.
    parked: usize,
}

#[derive(Default)]
struct Slot {
    /// Bumped when the slot is freed: an event read for its former socket is then ignored.
    generation: u32,
    /// Bumped at each park: a deadline of an earlier one is then ignored.
    seq: u32,
    ready: bool,
    waiter: Waiter,
}

/// Who waits on a slot: a task polling the socket's readiness, or a parked session.
#[derive(Default)]
enum Waiter {
    #[default]
    None,
    Task(Waker),
    Parked(Box<dyn Parked>),
}

/// Parked sessions' deadlines, in milliseconds from the poller's epoch, with their slot and
/// park: a min-heap whose stale entries (sessions resumed before it) are dropped when they come
/// up, or all at once when they outnumber the parked sessions.
#[derive(Default)]
struct Deadlines(BinaryHeap<Reverse<(u64, u32, u32)>>);

thread_local! {
    /// This worker's poller; made at its first registration.
    static POLLER: RefCell<Option<Rc<Poller>>> = const { RefCell::new(None) };
    /// The process' stop signal, for the poller this thread makes (see [`watch_stop`]).
    static STOP: RefCell<Option<tokio::sync::watch::Receiver<bool>>> = const { RefCell::new(None) };
}

/// Tells this worker thread's poller (made later, at its first registration) when the process
/// stops: its parked sessions then resume, to end as idle connections do at a stop.
pub fn watch_stop(rx: tokio::sync::watch::Receiver<bool>) {
    STOP.with(|s| *s.borrow_mut() = Some(rx));
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
        match &mut slot.waiter {
            Waiter::Task(w) if w.will_wake(cx.waker()) => {}
            w => *w = Waiter::Task(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// What parks a session in this registration's slot (taken before the session, which holds
    /// the registration, moves into its box).
    pub fn ticket(&self) -> Ticket {
        Ticket {
            poller: Rc::clone(&self.poller),
            key: self.key,
            generation: self.generation,
        }
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

impl Ticket {
    /// Parks `p` in the slot until the socket is readable, `deadline` passes, the process
    /// stops; then [`Parked::resume`] runs from the worker's task.
    /// Gives it back when it cannot park: the socket may already hold bytes (its readiness is
    /// set: the session reads in its task), or the process stops.
    pub fn park(
        self,
        deadline: Option<Instant>,
        p: Box<dyn Parked>,
    ) -> Result<(), Box<dyn Parked>> {
        if !self.may_park() {
            return Err(p);
        }
        let poller = &self.poller;
        let mut slots = poller.slots.borrow_mut();
        let Some(slot) = slots.table.get_mut(self.key as usize) else {
            return Err(p);
        };
        slot.seq = slot.seq.wrapping_add(1);
        slot.waiter = Waiter::Parked(p);
        let seq = slot.seq;
        slots.parked += 1;
        let Some(d) = deadline else {
            return Ok(());
        };
        let ms = poller.ms(d);
        let mut dl = poller.deadlines.borrow_mut();
        let earliest = dl.next().is_none_or(|(first, ..)| ms < first);
        dl.0.push(Reverse((ms, self.key, seq)));
        // Resumed sessions leave their deadlines behind: drop them once they outnumber the
        // parked ones (each push then costs O(1) amortised, the heap at most twice its need).
        if dl.0.len() > 64 && dl.0.len() > 2 * slots.parked {
            dl.0.retain(|Reverse((_, key, seq))| slots.parked_at(*key, *seq));
        }
        drop((dl, slots));
        if earliest {
            poller.rearm.notify_one();
        }
        Ok(())
    }

    /// Whether [`Ticket::park`] would take a session now.
    pub fn may_park(&self) -> bool {
        !self.poller.stopped.get()
            && self
                .poller
                .slots
                .borrow()
                .table
                .get(self.key as usize)
                .is_some_and(|s| !s.ready && s.generation == self.generation)
    }
}

impl Deadlines {
    fn next(&self) -> Option<(u64, u32, u32)> {
        self.0.peek().map(|Reverse(e)| *e)
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
            // A parked session holds the registration that frees its slot: none is here.
            s.waiter = Waiter::None;
            self.free.push(key);
        }
    }

    /// Marks the slots of `events` ready and gives the wakers to wake and the parked sessions
    /// to resume.
    fn mark(
        &mut self,
        events: &[libc::epoll_event],
        wake: &mut Vec<Waker>,
        resume: &mut Vec<Box<dyn Parked>>,
    ) {
        for ev in events {
            let data = ev.u64;
            let (key, generation) = ((data & 0xffff_ffff) as usize, (data >> 32) as u32);
            if let Some(s) = self.table.get_mut(key)
                && s.generation == generation
            {
                s.ready = true;
                match std::mem::take(&mut s.waiter) {
                    Waiter::None => {}
                    Waiter::Task(w) => wake.push(w),
                    Waiter::Parked(p) => {
                        self.parked -= 1;
                        resume.push(p);
                    }
                }
            }
        }
    }

    /// Whether the session parked at `key` is still the one of park `seq`.
    fn parked_at(&self, key: u32, seq: u32) -> bool {
        self.table
            .get(key as usize)
            .is_some_and(|s| s.seq == seq && matches!(s.waiter, Waiter::Parked(_)))
    }

    /// Takes every parked session, to resume.
    fn unpark_all(&mut self, resume: &mut Vec<Box<dyn Parked>>) {
        for s in &mut self.table {
            if matches!(s.waiter, Waiter::Parked(_))
                && let Waiter::Parked(p) = std::mem::take(&mut s.waiter)
            {
                self.parked -= 1;
                resume.push(p);
            }
        }
    }

    /// Takes the session of park `seq` at `key`, if it is still parked there.
    fn unpark_at(&mut self, key: u32, seq: u32) -> Option<Box<dyn Parked>> {
        let s = self.table.get_mut(key as usize)?;
        if s.seq != seq || !matches!(s.waiter, Waiter::Parked(_)) {
            return None;
        }
        let Waiter::Parked(p) = std::mem::take(&mut s.waiter) else {
            return None;
        };
        self.parked -= 1;
        Some(p)
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
            deadlines: RefCell::default(),
            epoch: Instant::now(),
            rearm: tokio::sync::Notify::new(),
            stopped: Cell::new(false),
        });
        let stop = STOP.with(|s| s.borrow().clone());
        tokio::task::spawn_local(drive(Rc::clone(&poller), watch, stop));
        Ok(poller)
    }

    /// `d` in milliseconds from the epoch, rounded up (a session resumed at its deadline finds
    /// it passed).
    fn ms(&self, d: Instant) -> u64 {
        let since = d.saturating_duration_since(self.epoch);
        u64::try_from(since.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }

    /// The instant of `ms`.
    fn instant(&self, ms: u64) -> Instant {
        self.epoch + std::time::Duration::from_millis(ms)
    }

    /// Takes the sessions whose deadline passed by `now`, to resume.
    fn expire(&self, now: Instant, resume: &mut Vec<Box<dyn Parked>>) {
        let now = self.ms(now);
        let mut dl = self.deadlines.borrow_mut();
        let mut slots = self.slots.borrow_mut();
        while let Some((ms, key, seq)) = dl.next() {
            if ms > now {
                break;
            }
            dl.0.pop();
            resume.extend(slots.unpark_at(key, seq));
        }
    }
}

/// The poller's descriptor as tokio watches it (owned by the poller, which outlives the watch).
struct EpollFd(RawFd);

impl AsRawFd for EpollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Reads the instance's events whenever tokio sees it readable, wakes the tasks waiting on the
/// sockets they name and resumes the sessions parked there; resumes parked sessions whose
/// deadline passed, and all of them when the process stops.
/// Runs as long as the worker.
async fn drive(
    poller: Rc<Poller>,
    watch: tokio::io::unix::AsyncFd<EpollFd>,
    mut stop: Option<tokio::sync::watch::Receiver<bool>>,
) {
    // SAFETY: epoll_event is plain data; zeroed is a valid value.
    let mut events = vec![unsafe { std::mem::zeroed::<libc::epoll_event>() }; BATCH];
    let mut wake = Vec::new();
    let mut resume: Vec<Box<dyn Parked>> = Vec::new();
    let timer = tokio::time::sleep_until(poller.epoch);
    tokio::pin!(timer);
    let mut armed = None;
    loop {
        let next = poller.deadlines.borrow().next().map(|(ms, ..)| ms);
        if next != armed {
            if let Some(ms) = next {
                timer.as_mut().reset(poller.instant(ms));
            }
            armed = next;
        }
        tokio::select! {
            ready = watch.readable() => {
                let mut guard = match ready {
                    Ok(g) => g,
                    Err(e) => {
                        tracing::warn!("idle sockets' epoll instance: {e}");
                        return;
                    }
                };
                // SAFETY: epoll_wait writes at most BATCH events into `events`; no wait.
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
                poller.slots.borrow_mut().mark(
                    events.get(..n).unwrap_or_default(),
                    &mut wake,
                    &mut resume,
                );
                if n < BATCH {
                    guard.clear_ready();
                }
            }
            () = &mut timer, if armed.is_some() => {
                armed = None;
                poller.expire(Instant::now(), &mut resume);
            }
            () = poller.rearm.notified() => {}
            stopping = stopped(&mut stop) => {
                if stopping {
                    poller.stopped.set(true);
                    poller.slots.borrow_mut().unpark_all(&mut resume);
                }
            }
        }
        for w in wake.drain(..) {
            w.wake();
        }
        for p in resume.drain(..) {
            p.resume();
        }
    }
}

/// The stop signal's next value; never, without one.
async fn stopped(stop: &mut Option<tokio::sync::watch::Receiver<bool>>) -> bool {
    let Some(rx) = stop.as_mut() else {
        return std::future::pending().await;
    };
    if *rx.borrow_and_update() {
        *stop = None;
        return true;
    }
    // No sender: no stop will come (None: never asked again).
    let now = rx.changed().await.ok().map(|()| *rx.borrow_and_update());
    if now != Some(false) {
        *stop = None;
    }
    now == Some(true)
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
        slots.mark(
            &[ev(a, ga), ev(b, gb), ev(99, 0)],
            &mut wake,
            &mut Vec::new(),
        );
        assert!(
            !slots.table[a as usize].ready,
            "a stale event marks nothing"
        );
        assert!(slots.table[b as usize].ready);
        slots.mark(&[ev(a2, ga2)], &mut wake, &mut Vec::new());
        assert!(slots.table[a2 as usize].ready);
    }

    /// Real sockets on a current-thread runtime: a registered socket is not ready until its
    /// peer writes, then wakes its waiter, and a cleared one waits for the next bytes.
    #[test]
    fn a_socket_becomes_ready_when_its_peer_writes() {
        use std::io::Write;
        on_worker(|mut client, server| async move {
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

    /// Runs `test` as a worker would (a current-thread runtime with IO and time: the poller's
    /// task keeps the parked sessions' deadlines) on a connected pair of loopback sockets, the
    /// server side non-blocking.
    fn on_worker<F: std::future::Future<Output = ()>>(
        test: impl FnOnce(std::net::TcpStream, std::net::TcpStream) -> F,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let client =
                std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            let (server, _) = l.accept().expect("accept");
            server.set_nonblocking(true).expect("nonblocking");
            test(client, server).await;
        });
    }

    /// A registered socket's slot stays small: every idle socket of the worker has one.
    #[test]
    fn a_slot_is_40_bytes() {
        assert!(std::mem::size_of::<Slot>() <= 40);
    }

    /// A parked session that counts its resumptions.
    struct Probe(Rc<Cell<u32>>);

    impl Parked for Probe {
        fn resume(self: Box<Self>) {
            self.0.set(self.0.get() + 1);
        }
    }

    /// Waits (up to 10 s) until `cond` holds.
    async fn eventually(cond: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if cond() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        cond()
    }

    /// Real sockets: a parked session resumes when its peer writes, at its deadline (and not
    /// at the deadline of an earlier park of the same slot), and at the process' stop, after
    /// which nothing parks.
    #[test]
    fn parked_sessions_resume_on_bytes_deadline_and_stop() {
        use std::io::Write;
        use std::time::Duration;
        on_worker(|mut client, server| async move {
            let (stop, rx) = tokio::sync::watch::channel(false);
            watch_stop(rx);
            let reg = Registration::new(server.as_raw_fd()).expect("register");
            let n = Rc::new(Cell::new(0));
            let probe = || Box::new(Probe(Rc::clone(&n)));
            let soon = || Some(Instant::now() + Duration::from_millis(50));
            let later = Some(Instant::now() + Duration::from_secs(60));
            // Bytes, well before its deadline.
            assert!(reg.ticket().park(soon(), probe()).is_ok());
            client.write_all(b"x").expect("write");
            assert!(eventually(|| n.get() == 1).await, "resumed by the bytes");
            // Ready: the bytes are not read yet, so it does not park.
            assert!(!reg.ticket().may_park());
            assert!(reg.ticket().park(later, probe()).is_err());
            let mut b = [0u8; 8];
            assert_eq!((&server).read_nb(&mut b), 1);
            reg.clear_ready();
            // Parked again, for long: the first park's deadline passes without resuming it.
            assert!(reg.ticket().park(later, probe()).is_ok());
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(n.get(), 1, "an earlier park's deadline is stale");
            client.write_all(b"y").expect("write");
            assert!(eventually(|| n.get() == 2).await);
            assert_eq!((&server).read_nb(&mut b), 1);
            reg.clear_ready();
            // Its own deadline.
            assert!(reg.ticket().park(soon(), probe()).is_ok());
            assert!(eventually(|| n.get() == 3).await, "resumed at its deadline");
            // Resumed entries do not pile up: the heap stays within twice what is parked.
            for _ in 0..200 {
                assert!(reg.ticket().park(later, probe()).is_ok());
                let seq = reg.poller.slots.borrow().table[reg.key as usize].seq;
                let p = reg.poller.slots.borrow_mut().unpark_at(reg.key, seq);
                assert!(p.is_some());
            }
            assert!(reg.poller.deadlines.borrow().0.len() <= 64 + 2);
            // The stop resumes it, and nothing parks after.
            assert!(reg.ticket().park(None, probe()).is_ok());
            stop.send(true).expect("stop");
            assert!(eventually(|| n.get() == 4).await, "resumed at the stop");
            assert!(!reg.ticket().may_park());
            assert!(reg.ticket().park(None, probe()).is_err());
            drop(reg);
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
