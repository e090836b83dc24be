//! One peers connection as a state machine without I/O: bytes received go in
//! ([`Session::receive`]), events come out, and what to send accumulates in the output
//! buffer ([`Session::take_output`]). It does the handshake (either side), the table
//! definitions before updates, update ids (absolute after a switch, incremental after), the
//! acks of received updates, and the confirm HAProxy expects after a resync finished/partial.

use std::collections::HashMap;

use super::wire::{self, EntryData, HelloCheck, Msg, Status, TableDef, WireError};

/// A table this side shares, as its definition describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalTable {
    /// The name on the wire (a `peers` section's table without its `<section>/` prefix).
    pub name: String,
    pub key_type: u64,
    pub key_len: u64,
    /// Bit n: data type n is stored.
    pub data: u64,
    /// The period of each stored rate (ms).
    pub periods: Vec<(u32, u64)>,
    /// Each stored array's parameters: its size, and for `gpc_rate` its period (ms).
    pub arrays: Vec<(u32, Vec<u64>)>,
    pub expire_ms: u64,
}

impl LocalTable {
    fn def(&self, id: u64) -> TableDef {
        TableDef {
            id,
            name: self.name.clone(),
            key_type: self.key_type,
            key_len: self.key_len,
            data: self.data,
            expire: Some(self.expire_ms),
            params: {
                let mut ps: Vec<(u32, Vec<u64>)> =
                    self.periods.iter().map(|(dt, p)| (*dt, vec![*p])).collect();
                ps.extend(self.arrays.iter().cloned());
                ps.sort_by_key(|(dt, _)| *dt);
                ps
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake succeeded (either side); the remote peer's name.
    Established(String),
    /// The remote side answered our hello with this status code (then the connection ends).
    Refused(u16),
    /// An entry of local table `table` as the remote peer has it; `expire` is its remaining
    /// lifetime when the sender gave it.
    Update {
        table: usize,
        expire: Option<u32>,
        entry: EntryData,
    },
    /// The remote peer asks for everything we know.
    ResyncRequest,
    /// The remote peer has taught us everything it knows (`Finished`) or all it has while
    /// not up to date itself (`Partial`); the confirm is already queued.
    ResyncFinished,
    ResyncPartial,
    /// Our own Finished/Partial was received.
    ResyncConfirm,
    Heartbeat,
    /// The session is over (a protocol error sent or received, or a refused handshake).
    Closed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Connecting side: hello sent, waiting for the status line.
    AwaitStatus,
    /// Accepting side: waiting for the three hello lines.
    AwaitHello,
    Established,
    Closed,
}

#[derive(Clone, Debug, Default)]
struct TxTable {
    /// The last update id pushed in this session.
    last_pushed: u32,
    /// The last update id the remote peer acknowledged.
    pub last_acked: u32,
}

#[derive(Clone, Debug)]
struct RxTable {
    def: TableDef,
    /// The local table it feeds, when name, key type and key length match.
    local: Option<usize>,
    last_get: u32,
    last_acked: u32,
}

pub struct Session {
    local_name: String,
    known: Vec<String>,
    tables: Vec<LocalTable>,
    state: State,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    peer: Option<String>,
    tx: Vec<TxTable>,
    /// The local table the last update sent belongs to (a definition precedes a change).
    tx_current: Option<usize>,
    rx: HashMap<u64, RxTable>,
    rx_current: Option<u64>,
    /// Counters for `show peers`.
    pub rx_heartbeats: u64,
    pub tx_heartbeats: u64,
}

/// HAProxy reads lines of at most its buffer size; a longer hello is a broken peer.
const MAX_LINE: usize = 1024;

impl Session {
    /// The connecting side: the hello to `remote` is queued.
    pub fn connect(local: &str, remote: &str, pid: u32, tables: Vec<LocalTable>) -> Session {
        let mut s = Session::new(local, Vec::new(), tables, State::AwaitStatus);
        s.out
            .extend_from_slice(wire::hello(remote, local, pid).as_bytes());
        s.peer = Some(remote.to_string());
        s
    }

    /// The accepting side: a hello from one of `known` is expected.
    pub fn accept(local: &str, known: Vec<String>, tables: Vec<LocalTable>) -> Session {
        Session::new(local, known, tables, State::AwaitHello)
    }

    fn new(local: &str, known: Vec<String>, tables: Vec<LocalTable>, state: State) -> Session {
        Session {
            local_name: local.to_string(),
            known,
            tx: vec![TxTable::default(); tables.len()],
            tables,
            state,
            inbuf: Vec::new(),
            out: Vec::new(),
            peer: None,
            tx_current: None,
            rx: HashMap::new(),
            rx_current: None,
            rx_heartbeats: 0,
            tx_heartbeats: 0,
        }
    }

    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    pub fn peer(&self) -> Option<&str> {
        self.peer.as_deref()
    }
    /// What to write to the socket now.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }
    /// The last update id pushed and acknowledged for local table `t` (`show peers`).
    pub fn tx_state(&self, t: usize) -> Option<(u32, u32)> {
        self.tx.get(t).map(|x| (x.last_pushed, x.last_acked))
    }

    /// What the remote peer told about the table feeding local table `t`: its id, its data
    /// bits and the last update id received.
    pub fn rx_state(&self, t: usize) -> Option<(u64, u64, u32)> {
        self.rx
            .iter()
            .find(|(_, r)| r.local == Some(t))
            .map(|(id, r)| (*id, r.def.data, r.last_get))
    }

    fn send(&mut self, m: &Msg) {
        m.encode(&mut self.out);
    }

    pub fn heartbeat(&mut self) {
        if self.is_established() {
            self.send(&Msg::Heartbeat);
            self.tx_heartbeats += 1;
        }
    }
    pub fn resync_request(&mut self) {
        if self.is_established() {
            self.send(&Msg::ResyncRequest);
        }
    }
    pub fn resync_finished(&mut self) {
        if self.is_established() {
            self.send(&Msg::ResyncFinished);
        }
    }

    /// Queues an update of local table `t`; `expire` (remaining ms) makes it a timed update.
    pub fn push_update(&mut self, t: usize, entry: &EntryData, expire: Option<u32>) {
        if !self.is_established() {
            return;
        }
        let Some(table) = self.tables.get(t) else {
            return;
        };
        let mut body = Vec::new();
        wire::encode_entry(table.key_type, entry, &mut body);
        // After a definition the first update carries its id, the next ones are implicit.
        let switched = self.tx_current != Some(t);
        if switched {
            let def = table.def(t as u64 + 1);
            self.send(&Msg::Define(def));
            self.tx_current = Some(t);
        }
        let Some(tx) = self.tx.get_mut(t) else {
            return;
        };
        tx.last_pushed = tx.last_pushed.wrapping_add(1);
        let id = switched.then_some(tx.last_pushed);
        self.send(&Msg::Update { id, expire, body });
    }

    /// Feeds received bytes; returns what happened. After a `Closed` event nothing more is
    /// read.
    pub fn receive(&mut self, data: &[u8]) -> Vec<Event> {
        let mut ev = Vec::new();
        if self.is_closed() {
            return ev;
        }
        self.inbuf.extend_from_slice(data);
        loop {
            match self.state {
                State::Closed => break,
                State::AwaitStatus => {
                    let Some(line) = self.line() else { break };
                    let code = line.trim().parse::<u16>().unwrap_or(0);
                    if code == Status::Success as u16 {
                        self.state = State::Established;
                        let p = self.peer.clone().unwrap_or_default();
                        ev.push(Event::Established(p));
                    } else {
                        self.state = State::Closed;
                        ev.push(Event::Refused(code));
                        ev.push(Event::Closed(format!("status {code}")));
                    }
                }
                State::AwaitHello => {
                    let Some(lines) = self.hello_lines() else {
                        break;
                    };
                    let known: Vec<&str> = self.known.iter().map(String::as_str).collect();
                    let [a, b, c] = [&lines[0], &lines[1], &lines[2]];
                    match wire::check_hello([a, b, c], &self.local_name, &known) {
                        HelloCheck::Ok { peer, .. } => {
                            self.out
                                .extend_from_slice(Status::Success.line().as_bytes());
                            self.state = State::Established;
                            self.peer = Some(peer.clone());
                            ev.push(Event::Established(peer));
                        }
                        HelloCheck::Refuse(st) => {
                            self.out.extend_from_slice(st.line().as_bytes());
                            self.state = State::Closed;
                            ev.push(Event::Closed(format!("hello refused ({})", st as u16)));
                        }
                    }
                }
                State::Established => match Msg::decode(&self.inbuf) {
                    Ok(None) => break,
                    Ok(Some((m, n))) => {
                        self.inbuf.drain(..n);
                        self.handle(m, &mut ev);
                    }
                    Err(e) => {
                        self.protocol_error(e, &mut ev);
                    }
                },
            }
        }
        if self.is_established() {
            self.queue_acks();
        }
        ev
    }

    fn protocol_error(&mut self, e: WireError, ev: &mut Vec<Event>) {
        let m = if e == WireError::TooLarge {
            Msg::ErrSizeLimit
        } else {
            Msg::ErrProtocol
        };
        self.send(&m);
        self.state = State::Closed;
        ev.push(Event::Closed(e.to_string()));
    }

    /// Acks every remote table whose last received update is not acknowledged yet (HAProxy
    /// sends them as soon as it has nothing else to read).
    fn queue_acks(&mut self) {
        let mut acks: Vec<(u64, u32)> = Vec::new();
        for (id, rt) in self.rx.iter_mut() {
            if rt.last_get != rt.last_acked {
                rt.last_acked = rt.last_get;
                acks.push((*id, rt.last_get));
            }
        }
        acks.sort_unstable();
        for (table, update) in acks {
            self.send(&Msg::Ack { table, update });
        }
    }

    fn handle(&mut self, m: Msg, ev: &mut Vec<Event>) {
        match m {
            Msg::ResyncRequest => ev.push(Event::ResyncRequest),
            Msg::ResyncFinished => {
                self.send(&Msg::ResyncConfirm);
                ev.push(Event::ResyncFinished);
            }
            Msg::ResyncPartial => {
                self.send(&Msg::ResyncConfirm);
                ev.push(Event::ResyncPartial);
            }
            Msg::ResyncConfirm => ev.push(Event::ResyncConfirm),
            Msg::Heartbeat => {
                self.rx_heartbeats += 1;
                ev.push(Event::Heartbeat);
            }
            Msg::ErrProtocol | Msg::ErrSizeLimit => {
                self.state = State::Closed;
                ev.push(Event::Closed("error message from the peer".into()));
            }
            Msg::Define(def) => {
                // A table id names one table at a time.
                let local = self.tables.iter().position(|t| {
                    t.name == def.name && t.key_type == def.key_type && t.key_len == def.key_len
                });
                let id = def.id;
                let last_get = self.rx.get(&id).map_or(0, |r| r.last_get);
                self.rx.insert(
                    id,
                    RxTable {
                        def,
                        local,
                        last_get,
                        last_acked: last_get,
                    },
                );
                self.rx_current = Some(id);
            }
            Msg::Switch { table } => {
                self.rx_current = self.rx.contains_key(&table).then_some(table);
            }
            Msg::Ack { table, update } => {
                // `table` is our id for it: local index + 1.
                if let Some(tx) = (table as usize)
                    .checked_sub(1)
                    .and_then(|i| self.tx.get_mut(i))
                {
                    tx.last_acked = update;
                }
            }
            Msg::Update { id, expire, body } => {
                let Some(rt) = self.rx_current.and_then(|c| self.rx.get_mut(&c)) else {
                    return;
                };
                rt.last_get = match id {
                    Some(i) => i,
                    None => rt.last_get.wrapping_add(1),
                };
                let Some(table) = rt.local else {
                    return;
                };
                match wire::decode_entry(&rt.def, &body) {
                    Ok(entry) => ev.push(Event::Update {
                        table,
                        expire,
                        entry,
                    }),
                    Err(e) => self.protocol_error(e, ev),
                }
            }
            Msg::Other { .. } => {}
        }
    }

    /// One `\n`-terminated line (a trailing `\r` dropped), or None when incomplete.
    fn line(&mut self) -> Option<String> {
        let Some(end) = self.inbuf.iter().position(|&b| b == b'\n') else {
            if self.inbuf.len() > MAX_LINE {
                self.state = State::Closed;
            }
            return None;
        };
        let raw: Vec<u8> = self.inbuf.drain(..=end).collect();
        let mut s = String::from_utf8_lossy(&raw[..end]).into_owned();
        if s.ends_with('\r') {
            s.pop();
        }
        Some(s)
    }

    /// The three hello lines once all arrived.
    fn hello_lines(&mut self) -> Option<Vec<String>> {
        let n = self.inbuf.iter().filter(|&&b| b == b'\n').count();
        if n < 3 {
            if self.inbuf.len() > 3 * MAX_LINE {
                self.state = State::Closed;
            }
            return None;
        }
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(self.line()?);
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::wire::{KEY_IPV4, Value};

    fn table() -> LocalTable {
        LocalTable {
            name: "be".into(),
            key_type: KEY_IPV4,
            key_len: 4,
            data: (1 << 4) | (1 << 10),
            periods: vec![(10, 10000)],
            arrays: Vec::new(),
            expire_ms: 60000,
        }
    }

    fn entry(n: u64) -> EntryData {
        EntryData {
            key: vec![10, 0, 0, n as u8],
            values: vec![
                (4, Value::Int(n)),
                (
                    10,
                    Value::Freq {
                        age_ms: 5,
                        curr: n as u32,
                        prev: 0,
                    },
                ),
            ],
        }
    }

    /// Two sessions talking to each other: handshake, updates both ways with acks, resync.
    #[test]
    fn two_sessions_sync() {
        let mut a = Session::connect("lb1", "lb2", 7, vec![table()]);
        let mut b = Session::accept("lb2", vec!["lb1".into(), "lb3".into()], vec![table()]);
        let hello = a.take_output();
        assert_eq!(hello, b"HAProxyS 2.1\nlb2\nlb1 7 1\n");
        // The hello may arrive in pieces.
        assert_eq!(b.receive(&hello[..5]), []);
        assert_eq!(b.receive(&hello[5..]), [Event::Established("lb1".into())]);
        let status = b.take_output();
        assert_eq!(status, b"200\n");
        assert_eq!(a.receive(&status), [Event::Established("lb2".into())]);

        a.push_update(0, &entry(1), None);
        a.push_update(0, &entry(2), None);
        let bytes = a.take_output();
        // Define, then an absolute update (0x80) and an incremental one (0x81).
        assert_eq!(&bytes[..2], &[10, 0x82]);
        let ev = b.receive(&bytes);
        assert_eq!(
            ev,
            [
                Event::Update {
                    table: 0,
                    expire: None,
                    entry: entry(1)
                },
                Event::Update {
                    table: 0,
                    expire: None,
                    entry: entry(2)
                }
            ]
        );
        // b acks update 2 of a's table 1.
        let ack = b.take_output();
        assert_eq!(ack, [10, 0x84, 5, 1, 0, 0, 0, 2]);
        assert_eq!(a.receive(&ack), []);
        assert_eq!(a.tx_state(0), Some((2, 2)));

        b.resync_request();
        assert_eq!(a.receive(&b.take_output()), [Event::ResyncRequest]);
        a.push_update(0, &entry(3), Some(1000));
        a.resync_finished();
        let ev = b.receive(&a.take_output());
        assert!(matches!(
            ev[0],
            Event::Update {
                expire: Some(1000),
                ..
            }
        ));
        assert_eq!(ev[1], Event::ResyncFinished);
        // The confirm goes back with the ack.
        let back = b.take_output();
        assert_eq!(a.receive(&back), [Event::ResyncConfirm]);
        b.heartbeat();
        assert_eq!(a.receive(&b.take_output()), [Event::Heartbeat]);
    }

    #[test]
    fn refusals_and_errors() {
        let mut b = Session::accept("lb2", vec!["lb1".into()], vec![table()]);
        let ev = b.receive(b"HAProxyS 2.1\nlbX\nlb1 7 1\n");
        assert_eq!(ev, [Event::Closed("hello refused (503)".into())]);
        assert_eq!(b.take_output(), b"503\n");

        let mut a = Session::connect("lb1", "lb2", 7, vec![table()]);
        a.take_output();
        assert_eq!(
            a.receive(b"504\n"),
            [Event::Refused(504), Event::Closed("status 504".into())]
        );

        let mut a = Session::connect("lb1", "lb2", 7, vec![table()]);
        a.receive(b"200\n");
        let ev = a.receive(&[255, 0]);
        assert_eq!(ev, [Event::Closed("reserved message class".into())]);
        assert_eq!(a.take_output().last_chunk::<2>(), Some(&[1, 0]));
    }

    /// Arbitrary bytes after the handshake end in events or a protocol error, never a panic.
    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000 {
            let mut a = Session::connect("lb1", "lb2", 7, vec![table()]);
            a.receive(b"200\n");
            // Half the rounds start with a valid definition so updates get decoded.
            if round % 2 == 0 {
                let mut def = Vec::new();
                Msg::Define(table().def(1)).encode(&mut def);
                a.receive(&def);
            }
            let n = (next() % 64) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|i| {
                    let r = next() as u8;
                    // Bias towards real classes and kinds.
                    match i % 4 {
                        0 => [0, 1, 10, 10, r][(r % 5) as usize],
                        1 => 0x80 | (r % 8),
                        _ => r,
                    }
                })
                .collect();
            a.receive(&bytes);
            let mut b = Session::accept("lb2", vec!["lb1".into()], vec![table()]);
            b.receive(&bytes);
        }
    }

    /// Updates of a table this side does not have are acked but not applied.
    #[test]
    fn unknown_tables_are_acked_not_applied() {
        let mut a = Session::connect("lb1", "lb2", 7, vec![table()]);
        a.take_output();
        a.receive(b"200\n");
        let mut other = table();
        other.name = "other".into();
        let mut b = Session::connect("x", "y", 1, vec![other]);
        b.receive(b"200\n");
        b.take_output();
        b.push_update(0, &entry(1), None);
        assert_eq!(a.receive(&b.take_output()), []);
        assert_eq!(a.take_output(), [10, 0x84, 5, 1, 0, 0, 0, 1]);
    }
}
