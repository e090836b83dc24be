//! HAProxy's peers protocol on the wire (`doc/peers-v2.0.txt`, version 2.1 as HAProxy 2.6
//! speaks it): the varint, the three-line hello and its status line, and the binary messages
//! (control, error, stick-table classes). Pure: bytes in, values out.

use std::fmt;

/// `HAProxyS 2.1`: the protocol name and the version HAProxy 2.6 announces.
pub const PROTO_NAME: &str = "HAProxyS";
pub const MAJOR: u32 = 2;
pub const MINOR: u32 = 1;

/// The largest message body accepted (HAProxy's trash buffer, `tune.bufsize`).
pub const MAX_BODY: u64 = 16384;

/// Appends `v` in HAProxy's variable-length encoding (`intencode`): one byte below 240, else a
/// first byte `0xF0 | low 4 bits` and 7-bit groups, the last one without its top bit.
pub fn encode_varint(v: u64, out: &mut Vec<u8>) {
    if v < 0xF0 {
        out.push(v as u8);
        return;
    }
    out.push((v as u8) | 0xF0);
    let mut i = (v - 0xF0) >> 4;
    while i >= 0x80 {
        out.push((i as u8) | 0x80);
        i = (i - 0x80) >> 7;
    }
    out.push(i as u8);
}

/// Reads one varint (`intdecode`): the value and the bytes it took, or None when `buf` ends
/// first.
pub fn decode_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let (&first, mut rest) = buf.split_first()?;
    let mut v = u64::from(first);
    let mut used = 1;
    if v >= 0xF0 {
        let mut shift = 4u32;
        loop {
            let (&b, r) = rest.split_first()?;
            rest = r;
            used += 1;
            v = v.wrapping_add(u64::from(b).checked_shl(shift).unwrap_or(0));
            shift += 7;
            if b < 0x80 {
                break;
            }
            // Longer than any u64 encoding (10 bytes): not a number HAProxy would send.
            if used >= 10 {
                return None;
            }
        }
    }
    Some((v, used))
}

/// The status line that answers a hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Success = 200,
    TryAgain = 300,
    ErrProto = 501,
    ErrVersion = 502,
    ErrHost = 503,
    ErrPeer = 504,
}

impl Status {
    pub fn line(self) -> String {
        format!("{}\n", self as u16)
    }
}

/// The hello a connecting peer sends: `HAProxyS 2.1\n<remote>\n<local> <pid> <relative pid>\n`.
pub fn hello(remote: &str, local: &str, pid: u32) -> String {
    format!("{PROTO_NAME} {MAJOR}.{MINOR}\n{remote}\n{local} {pid} 1\n")
}

/// Where an incoming hello stands after some lines (`peer_getline_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelloCheck {
    /// Every line checked: the connecting peer's name and the minor version it speaks.
    Ok { peer: String, minor: u32 },
    /// Refused with this status (sent, then the connection closes).
    Refuse(Status),
}

/// Checks the three hello lines (without their `\n`/`\r\n`) against this process' name and
/// its known peers, as HAProxy's accepting side does.
pub fn check_hello(lines: [&str; 3], local: &str, known: &[&str]) -> HelloCheck {
    let [l1, l2, l3] = lines;
    let Some(ver) = l1
        .strip_prefix(PROTO_NAME)
        .and_then(|r| r.strip_prefix(' '))
    else {
        return HelloCheck::Refuse(Status::ErrProto);
    };
    let minor = match ver.split_once('.') {
        Some((maj, min))
            if !maj.is_empty()
                && !min.is_empty()
                && maj.bytes().all(|b| b.is_ascii_digit())
                && min.bytes().all(|b| b.is_ascii_digit()) =>
        {
            match (maj.parse::<u32>(), min.parse::<u32>()) {
                (Ok(MAJOR), Ok(m)) if m <= MINOR => m,
                _ => return HelloCheck::Refuse(Status::ErrVersion),
            }
        }
        _ => return HelloCheck::Refuse(Status::ErrVersion),
    };
    if l2 != local {
        return HelloCheck::Refuse(Status::ErrHost);
    }
    let Some((name, _)) = l3.split_once(' ') else {
        return HelloCheck::Refuse(Status::ErrProto);
    };
    if !known.contains(&name) {
        return HelloCheck::Refuse(Status::ErrPeer);
    }
    HelloCheck::Ok {
        peer: name.to_string(),
        minor,
    }
}

/// Message classes.
const CLASS_CONTROL: u8 = 0;
const CLASS_ERROR: u8 = 1;
const CLASS_STKT: u8 = 10;
const CLASS_RESERVED: u8 = 255;

/// Stick-table message types (all have a body: the high bit says so).
const STKT_UPDATE: u8 = 0x80;
const STKT_INCUPDATE: u8 = 0x81;
const STKT_DEFINE: u8 = 0x82;
const STKT_SWITCH: u8 = 0x83;
const STKT_ACK: u8 = 0x84;
const STKT_UPDATE_TIMED: u8 = 0x85;
const STKT_INCUPDATE_TIMED: u8 = 0x86;

/// A table definition (`PEER_MSG_STKT_DEFINE`): what the updates that follow carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// The sender's id for the table (acks and switches name it).
    pub id: u64,
    /// The table's name without its `peers` section prefix.
    pub name: String,
    /// Key type: 2 integer, 4 IPv4, 5 IPv6, 6 string, 7 binary.
    pub key_type: u64,
    pub key_len: u64,
    /// Bit n: data type n is stored (HAProxy's `STKTABLE_DT_*` numbering).
    pub data: u64,
    /// Entry lifetime in ms (HAProxy 1.9+ send it; then `params` follow).
    pub expire: Option<u64>,
    /// Per data type with parameters: the array size (arrays) and the period (rates).
    pub params: Vec<(u32, Vec<u64>)>,
}

pub const KEY_SINT: u64 = 2;
pub const KEY_IPV4: u64 = 4;
pub const KEY_IPV6: u64 = 5;
pub const KEY_STR: u64 = 6;
pub const KEY_BIN: u64 = 7;

/// One decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    ResyncRequest,
    ResyncFinished,
    ResyncPartial,
    ResyncConfirm,
    Heartbeat,
    ErrProtocol,
    ErrSizeLimit,
    Define(TableDef),
    Switch {
        table: u64,
    },
    /// An entry update; its key and values are decoded against the table definition
    /// ([`decode_entry`]).
    Update {
        /// Absolute update id, or None for "previous + 1".
        id: Option<u32>,
        /// Remaining lifetime in ms (the `_TIMED` kinds).
        expire: Option<u32>,
        body: Vec<u8>,
    },
    Ack {
        table: u64,
        update: u32,
    },
    /// A message of a kind this side does not know (skipped, as HAProxy does).
    Other {
        class: u8,
        kind: u8,
    },
}

/// A protocol violation: the session answers with a protocol error and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    Malformed,
    /// A body larger than [`MAX_BODY`] (HAProxy sends "size limit" then).
    TooLarge,
    /// Class 255.
    Reserved,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireError::Malformed => "malformed message",
            WireError::TooLarge => "message too large",
            WireError::Reserved => "reserved message class",
        })
    }
}

fn header(out: &mut Vec<u8>, class: u8, kind: u8, body: &[u8]) {
    out.push(class);
    out.push(kind);
    if kind & 0x80 != 0 {
        encode_varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }
}

impl Msg {
    /// Appends the message's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut b = Vec::new();
        match self {
            Msg::ResyncRequest => header(out, CLASS_CONTROL, 0, &[]),
            Msg::ResyncFinished => header(out, CLASS_CONTROL, 1, &[]),
            Msg::ResyncPartial => header(out, CLASS_CONTROL, 2, &[]),
            Msg::ResyncConfirm => header(out, CLASS_CONTROL, 3, &[]),
            Msg::Heartbeat => header(out, CLASS_CONTROL, 4, &[]),
            Msg::ErrProtocol => header(out, CLASS_ERROR, 0, &[]),
            Msg::ErrSizeLimit => header(out, CLASS_ERROR, 1, &[]),
            Msg::Define(d) => {
                encode_varint(d.id, &mut b);
                encode_varint(d.name.len() as u64, &mut b);
                b.extend_from_slice(d.name.as_bytes());
                encode_varint(d.key_type, &mut b);
                encode_varint(d.key_len, &mut b);
                encode_varint(d.data, &mut b);
                if let Some(e) = d.expire {
                    encode_varint(e, &mut b);
                    for (dt, ps) in &d.params {
                        encode_varint(u64::from(*dt), &mut b);
                        for p in ps {
                            encode_varint(*p, &mut b);
                        }
                    }
                }
                header(out, CLASS_STKT, STKT_DEFINE, &b);
            }
            Msg::Switch { table } => {
                encode_varint(*table, &mut b);
                header(out, CLASS_STKT, STKT_SWITCH, &b);
            }
            Msg::Update { id, expire, body } => {
                if let Some(i) = id {
                    b.extend_from_slice(&i.to_be_bytes());
                }
                if let Some(e) = expire {
                    b.extend_from_slice(&e.to_be_bytes());
                }
                b.extend_from_slice(body);
                let kind = match (id.is_some(), expire.is_some()) {
                    (true, false) => STKT_UPDATE,
                    (false, false) => STKT_INCUPDATE,
                    (true, true) => STKT_UPDATE_TIMED,
                    (false, true) => STKT_INCUPDATE_TIMED,
                };
                header(out, CLASS_STKT, kind, &b);
            }
            Msg::Ack { table, update } => {
                encode_varint(*table, &mut b);
                b.extend_from_slice(&update.to_be_bytes());
                header(out, CLASS_STKT, STKT_ACK, &b);
            }
            Msg::Other { class, kind } => header(out, *class, *kind, &[]),
        }
    }

    /// Decodes the first message of `buf`: the message and the bytes it took, None when more
    /// bytes are needed.
    pub fn decode(buf: &[u8]) -> Result<Option<(Msg, usize)>, WireError> {
        let (Some(&class), Some(&kind)) = (buf.first(), buf.get(1)) else {
            return Ok(None);
        };
        if class == CLASS_RESERVED {
            return Err(WireError::Reserved);
        }
        let (body, used) = if kind & 0x80 != 0 {
            let rest = &buf[2..];
            let Some((len, n)) = decode_varint(rest) else {
                // A varint is at most 10 bytes: past that it is garbage, not a short read.
                return if rest.len() >= 10 {
                    Err(WireError::Malformed)
                } else {
                    Ok(None)
                };
            };
            if len > MAX_BODY {
                return Err(WireError::TooLarge);
            }
            let len = len as usize;
            let Some(body) = rest.get(n..n + len) else {
                return Ok(None);
            };
            (body, 2 + n + len)
        } else {
            (&[][..], 2)
        };
        let msg = match (class, kind) {
            (CLASS_CONTROL, 0) => Msg::ResyncRequest,
            (CLASS_CONTROL, 1) => Msg::ResyncFinished,
            (CLASS_CONTROL, 2) => Msg::ResyncPartial,
            (CLASS_CONTROL, 3) => Msg::ResyncConfirm,
            (CLASS_CONTROL, 4) => Msg::Heartbeat,
            (CLASS_ERROR, 0) => Msg::ErrProtocol,
            (CLASS_ERROR, 1) => Msg::ErrSizeLimit,
            (CLASS_STKT, STKT_DEFINE) => Msg::Define(decode_define(body)?),
            (CLASS_STKT, STKT_SWITCH) => Msg::Switch {
                table: decode_varint(body).ok_or(WireError::Malformed)?.0,
            },
            (CLASS_STKT, STKT_ACK) => {
                let (table, n) = decode_varint(body).ok_or(WireError::Malformed)?;
                let id = body.get(n..n + 4).ok_or(WireError::Malformed)?;
                Msg::Ack {
                    table,
                    update: u32::from_be_bytes([id[0], id[1], id[2], id[3]]),
                }
            }
            (
                CLASS_STKT,
                STKT_UPDATE | STKT_INCUPDATE | STKT_UPDATE_TIMED | STKT_INCUPDATE_TIMED,
            ) => {
                let mut at = 0;
                let mut word = || -> Result<u32, WireError> {
                    let w = body.get(at..at + 4).ok_or(WireError::Malformed)?;
                    at += 4;
                    Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
                };
                let id = match kind {
                    STKT_UPDATE | STKT_UPDATE_TIMED => Some(word()?),
                    _ => None,
                };
                let expire = match kind {
                    STKT_UPDATE_TIMED | STKT_INCUPDATE_TIMED => Some(word()?),
                    _ => None,
                };
                Msg::Update {
                    id,
                    expire,
                    body: body[at..].to_vec(),
                }
            }
            (class, kind) => Msg::Other { class, kind },
        };
        Ok(Some((msg, used)))
    }
}

/// A cursor over a message body.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, WireError> {
        let (v, n) = decode_varint(self.0).ok_or(WireError::Malformed)?;
        self.0 = &self.0[n..];
        Ok(v)
    }
    fn bytes(&mut self, n: usize) -> Result<&[u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Malformed);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
}

fn decode_define(body: &[u8]) -> Result<TableDef, WireError> {
    let mut r = Reader(body);
    let id = r.varint()?;
    let len = r.varint()?;
    if len == 0 || len > MAX_BODY {
        return Err(WireError::Malformed);
    }
    let name = String::from_utf8_lossy(r.bytes(len as usize)?).into_owned();
    let key_type = r.varint()?;
    let key_len = r.varint()?;
    let data = r.varint()?;
    let mut def = TableDef {
        id,
        name,
        key_type,
        key_len,
        data,
        expire: None,
        params: Vec::new(),
    };
    let Ok(expire) = r.varint() else {
        return Ok(def);
    };
    def.expire = Some(expire);
    for dt in 0..64u32 {
        if data & (1u64 << dt) == 0 {
            continue;
        }
        let Some(info) = DATA_TYPES.get(dt as usize) else {
            continue;
        };
        let count = usize::from(info.array) + usize::from(info.std == Std::Frqp);
        if count == 0 {
            continue;
        }
        let tag = r.varint()?;
        if tag != u64::from(dt) {
            return Err(WireError::Malformed);
        }
        let mut ps = Vec::new();
        for _ in 0..count {
            ps.push(r.varint()?);
        }
        def.params.push((dt, ps));
    }
    Ok(def)
}

/// How a data type is stored (HAProxy's `std_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Std {
    Sint,
    Uint,
    Ull,
    /// A frequency counter: sent as (ms since its period started, current, previous).
    Frqp,
    /// A dictionary entry (`server_key`).
    Dict,
}

pub struct DataType {
    pub name: &'static str,
    pub std: Std,
    pub array: bool,
    /// Never taken from a peer (`conn_cur`: the connections open on this process).
    pub local: bool,
}

const fn dt(name: &'static str, std: Std) -> DataType {
    DataType {
        name,
        std,
        array: false,
        local: false,
    }
}

/// HAProxy 2.6's data types by number (`stktable_data_types[]`).
pub const DATA_TYPES: [DataType; 25] = [
    dt("server_id", Std::Sint),
    dt("gpt0", Std::Uint),
    dt("gpc0", Std::Uint),
    dt("gpc0_rate", Std::Frqp),
    dt("conn_cnt", Std::Uint),
    dt("conn_rate", Std::Frqp),
    DataType {
        local: true,
        ..dt("conn_cur", Std::Uint)
    },
    dt("sess_cnt", Std::Uint),
    dt("sess_rate", Std::Frqp),
    dt("http_req_cnt", Std::Uint),
    dt("http_req_rate", Std::Frqp),
    dt("http_err_cnt", Std::Uint),
    dt("http_err_rate", Std::Frqp),
    dt("bytes_in_cnt", Std::Ull),
    dt("bytes_in_rate", Std::Frqp),
    dt("bytes_out_cnt", Std::Ull),
    dt("bytes_out_rate", Std::Frqp),
    dt("gpc1", Std::Uint),
    dt("gpc1_rate", Std::Frqp),
    dt("server_key", Std::Dict),
    dt("http_fail_cnt", Std::Uint),
    dt("http_fail_rate", Std::Frqp),
    DataType {
        array: true,
        ..dt("gpt", Std::Uint)
    },
    DataType {
        array: true,
        ..dt("gpc", Std::Uint)
    },
    DataType {
        array: true,
        ..dt("gpc_rate", Std::Frqp)
    },
];

/// The number of a data type by name.
pub fn data_type_id(name: &str) -> Option<u32> {
    DATA_TYPES
        .iter()
        .position(|d| d.name == name)
        .map(|i| i as u32)
}

/// One stored value as it travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Int(u64),
    Freq { age_ms: u32, curr: u32, prev: u32 },
}

/// An entry's key and values (the data types the definition announced, in order; an array's
/// elements one after the other under its type, as they travel; dictionary entries are read
/// and left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryData {
    pub key: Vec<u8>,
    pub values: Vec<(u32, Value)>,
}

/// Encodes an update body: the key (`key_len` bytes, a 4-byte integer, or a string's length
/// and bytes), then each value in data-type order (an array's elements in a row). `values`
/// must list exactly the types of the definition, with as many elements as it announced.
pub fn encode_entry(key_type: u64, e: &EntryData, out: &mut Vec<u8>) {
    if key_type == KEY_SINT {
        let mut k = [0u8; 4];
        for (d, s) in k.iter_mut().zip(e.key.iter()) {
            *d = *s;
        }
        out.extend_from_slice(&k);
    } else if key_type == KEY_STR {
        // A string travels with its length, without its final NUL.
        encode_varint(e.key.len() as u64, out);
        out.extend_from_slice(&e.key);
    } else {
        out.extend_from_slice(&e.key);
    }
    for (_, v) in &e.values {
        match *v {
            Value::Int(i) => encode_varint(i, out),
            Value::Freq { age_ms, curr, prev } => {
                encode_varint(u64::from(age_ms), out);
                encode_varint(u64::from(curr), out);
                encode_varint(u64::from(prev), out);
            }
        }
    }
}

/// Decodes an update body against the sender's table definition.
pub fn decode_entry(def: &TableDef, body: &[u8]) -> Result<EntryData, WireError> {
    let mut r = Reader(body);
    let key = match def.key_type {
        KEY_STR => {
            let n = r.varint()?;
            r.bytes(usize::try_from(n).map_err(|_| WireError::Malformed)?)?
                .to_vec()
        }
        KEY_SINT => r.bytes(4)?.to_vec(),
        _ => r
            .bytes(usize::try_from(def.key_len).map_err(|_| WireError::Malformed)?)?
            .to_vec(),
    };
    let mut values = Vec::new();
    for (i, info) in DATA_TYPES.iter().enumerate() {
        if def.data & (1u64 << i) == 0 {
            continue;
        }
        let n = if info.array {
            def.params
                .iter()
                .find(|(d, _)| *d as usize == i)
                .and_then(|(_, p)| p.first().copied())
                .ok_or(WireError::Malformed)?
        } else {
            1
        };
        for _ in 0..n {
            let v = r.varint()?;
            match info.std {
                Std::Frqp => {
                    let curr = r.varint()?;
                    let prev = r.varint()?;
                    values.push((
                        i as u32,
                        Value::Freq {
                            age_ms: v as u32,
                            curr: curr as u32,
                            prev: prev as u32,
                        },
                    ));
                }
                Std::Dict => {
                    // v is the length of what follows (0: no entry).
                    r.bytes(usize::try_from(v).map_err(|_| WireError::Malformed)?)?;
                }
                _ => values.push((i as u32, Value::Int(v))),
            }
        }
    }
    Ok(EntryData { key, values })
}

/// `values` with each one's element number within its type (0 but for an array's elements).
pub fn indexed(values: &[(u32, Value)]) -> impl Iterator<Item = (u32, u32, &Value)> {
    let mut last = (u32::MAX, 0u32);
    values.iter().map(move |(dt, v)| {
        let idx = if last.0 == *dt { last.1 + 1 } else { 0 };
        last = (*dt, idx);
        (*dt, idx, v)
    })
}
