//! DNS messages as HAProxy 2.6's resolvers send and judge them (`resolv_build_query`,
//! `resolv_validate_dns_response`): one question, recursion desired, an EDNS OPT record
//! carrying `accepted_payload_size`; a response is valid only when it answers that question.
//! The wire format itself is hickory-proto's. Pure: bytes in, verdicts out.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

/// The record types a resolution asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qtype {
    A,
    Aaaa,
    Srv,
}

impl Qtype {
    fn record_type(self) -> RecordType {
        match self {
            Qtype::A => RecordType::A,
            Qtype::Aaaa => RecordType::AAAA,
            Qtype::Srv => RecordType::SRV,
        }
    }

    /// The DNS type number (the seed of the answer items' keys).
    pub fn code(self) -> u16 {
        u16::from(self.record_type())
    }
}

/// One SRV answer, with the address its additional records gave for the target, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvRec {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// Lower case, without the final dot.
    pub target: String,
    pub addr: Option<IpAddr>,
}

/// What a valid response answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// A/AAAA records of the asked name (or of its CNAME chain), in message order.
    pub addrs: Vec<IpAddr>,
    pub srv: Vec<SrvRec>,
}

/// HAProxy's `RSLV_RESP_*` outcomes; each one bumps its own nameserver counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid(Answer),
    Invalid,
    QueryCountError,
    WrongName,
    NxDomain,
    Refused,
    /// No answer record at all (NOERROR, empty).
    AncountZero,
    CnameError,
    Truncated,
    /// Answers, none of the asked type; also a non-NOERROR code other than NX/REFUSED.
    NoExpectedRecord,
    Error,
}

/// `name` as HAProxy compares it: lower case, no final dot.
pub fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The query for `name`, or `None` when it is no valid DNS name.
pub fn query(id: u16, name: &str, qtype: Qtype, payload: u16) -> Option<Vec<u8>> {
    let mut fqdn = Name::from_ascii(name).ok()?;
    fqdn.set_fqdn(true);
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(fqdn, qtype.record_type()));
    let mut edns = Edns::new();
    edns.set_max_payload(payload);
    m.set_edns(edns);
    m.to_vec().ok()
}

/// The query id of a datagram, if it holds one.
pub fn response_id(buf: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*buf.first()?, *buf.get(1)?]))
}

/// Judges a response to the query for `name` (normalized) of type `qtype`.
pub fn validate(buf: &[u8], name: &str, qtype: Qtype) -> Verdict {
    let Ok(m) = Message::from_vec(buf) else {
        return Verdict::Invalid;
    };
    if m.message_type() != MessageType::Response {
        return Verdict::Invalid;
    }
    match m.response_code() {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => return Verdict::NxDomain,
        ResponseCode::Refused => return Verdict::Refused,
        _ => return Verdict::Error,
    }
    if m.queries().len() != 1 {
        return Verdict::QueryCountError;
    }
    if m.answers().is_empty() {
        return Verdict::AncountZero;
    }
    let Some(q) = m.queries().first() else {
        return Verdict::QueryCountError;
    };
    if normalize(&q.name().to_ascii()) != name {
        return Verdict::WrongName;
    }
    // A truncated SRV answer can still be used (HAProxy checks this after the question).
    if qtype != Qtype::Srv && m.truncated() {
        return Verdict::Truncated;
    }
    // The names an answer may be for: the asked one and each CNAME target in turn.
    let mut owner = name.to_string();
    let mut out = Answer::default();
    for r in m.answers() {
        let rname = normalize(&r.name().to_ascii());
        if rname != owner {
            return Verdict::CnameError;
        }
        match r.data() {
            RData::CNAME(c) => owner = normalize(&c.0.to_ascii()),
            RData::A(a) if qtype == Qtype::A => out.addrs.push(IpAddr::V4(a.0)),
            RData::AAAA(a) if qtype == Qtype::Aaaa => out.addrs.push(IpAddr::V6(a.0)),
            RData::SRV(s) if qtype == Qtype::Srv => out.srv.push(SrvRec {
                priority: s.priority(),
                weight: s.weight(),
                port: s.port(),
                target: normalize(&s.target().to_ascii()),
                addr: None,
            }),
            _ => {}
        }
    }
    if out.addrs.is_empty() && out.srv.is_empty() {
        return Verdict::NoExpectedRecord;
    }
    // Additional A/AAAA records give the SRV targets' addresses (the first one wins).
    for r in m.additionals() {
        let ip = match r.data() {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(a) => IpAddr::V6(a.0),
            _ => continue,
        };
        let rname = normalize(&r.name().to_ascii());
        for s in out
            .srv
            .iter_mut()
            .filter(|s| s.target == rname && s.addr.is_none())
        {
            s.addr = Some(ip);
        }
    }
    Verdict::Valid(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME, SRV};

    fn reply(q: &[u8], f: impl FnOnce(&mut Message)) -> Vec<u8> {
        let qm = Message::from_vec(q).expect("query parses");
        let mut m = Message::new();
        m.set_id(qm.id())
            .set_message_type(MessageType::Response)
            .set_op_code(OpCode::Query);
        for q in qm.queries() {
            m.add_query(q.clone());
        }
        f(&mut m);
        m.to_vec().expect("encodes")
    }

    fn name(s: &str) -> Name {
        Name::from_ascii(s).expect("name")
    }

    #[test]
    fn query_asks_one_question_with_edns_payload() {
        let q = query(0x1234, "Web.Example.", Qtype::Aaaa, 1232).expect("query");
        let m = Message::from_vec(&q).expect("parses");
        assert_eq!(m.id(), 0x1234);
        assert!(m.recursion_desired());
        assert_eq!(m.queries().len(), 1);
        assert_eq!(m.queries()[0].query_type(), RecordType::AAAA);
        assert_eq!(normalize(&m.queries()[0].name().to_ascii()), "web.example");
        assert_eq!(m.extensions().as_ref().map(|e| e.max_payload()), Some(1232));
        assert_eq!(response_id(&q), Some(0x1234));
        assert!(query(1, "bad..name", Qtype::A, 512).is_none());
    }

    #[test]
    fn addresses_follow_the_cname_chain() {
        let q = query(7, "web.example", Qtype::A, 512).expect("query");
        let r = reply(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("web.example."),
                5,
                RData::CNAME(CNAME(name("real.example."))),
            ));
            m.add_answer(Record::from_rdata(
                name("real.example."),
                5,
                RData::A(A::new(10, 0, 0, 2)),
            ));
            m.add_answer(Record::from_rdata(
                name("real.example."),
                5,
                RData::A(A::new(10, 0, 0, 1)),
            ));
        });
        let Verdict::Valid(a) = validate(&r, "web.example", Qtype::A) else {
            panic!("valid");
        };
        assert_eq!(
            a.addrs,
            vec![
                "10.0.0.2".parse::<IpAddr>().unwrap(),
                "10.0.0.1".parse().unwrap()
            ]
        );
        // A record for a name outside the chain is HAProxy's CNAME error.
        let r = reply(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("other.example."),
                5,
                RData::A(A::new(10, 0, 0, 1)),
            ));
        });
        assert_eq!(validate(&r, "web.example", Qtype::A), Verdict::CnameError);
    }

    #[test]
    fn error_verdicts() {
        let q = query(7, "web.example", Qtype::Aaaa, 512).expect("query");
        let nx = reply(&q, |m| {
            m.set_response_code(ResponseCode::NXDomain);
        });
        assert_eq!(validate(&nx, "web.example", Qtype::Aaaa), Verdict::NxDomain);
        let refused = reply(&q, |m| {
            m.set_response_code(ResponseCode::Refused);
        });
        assert_eq!(
            validate(&refused, "web.example", Qtype::Aaaa),
            Verdict::Refused
        );
        let servfail = reply(&q, |m| {
            m.set_response_code(ResponseCode::ServFail);
        });
        assert_eq!(
            validate(&servfail, "web.example", Qtype::Aaaa),
            Verdict::Error
        );
        let empty = reply(&q, |_| {});
        assert_eq!(
            validate(&empty, "web.example", Qtype::Aaaa),
            Verdict::AncountZero
        );
        let only_a = reply(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("web.example."),
                5,
                RData::A(A::new(10, 0, 0, 1)),
            ));
        });
        assert_eq!(
            validate(&only_a, "web.example", Qtype::Aaaa),
            Verdict::NoExpectedRecord
        );
        assert_eq!(
            validate(&only_a, "other.example", Qtype::Aaaa),
            Verdict::WrongName
        );
        let trunc = reply(&q, |m| {
            m.set_truncated(true);
            m.add_answer(Record::from_rdata(
                name("web.example."),
                5,
                RData::AAAA(AAAA::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            ));
        });
        assert_eq!(
            validate(&trunc, "web.example", Qtype::Aaaa),
            Verdict::Truncated
        );
        assert_eq!(validate(&q, "web.example", Qtype::Aaaa), Verdict::Invalid);
        assert_eq!(validate(b"\x00", "web.example", Qtype::A), Verdict::Invalid);
    }

    #[test]
    fn srv_targets_take_additional_addresses() {
        let q = query(9, "_http._tcp.svc.example", Qtype::Srv, 512).expect("query");
        let r = reply(&q, |m| {
            for (t, port) in [("a.svc.example.", 8080), ("b.svc.example.", 8081)] {
                m.add_answer(Record::from_rdata(
                    name("_http._tcp.svc.example."),
                    5,
                    RData::SRV(SRV::new(0, 10, port, name(t))),
                ));
            }
            m.add_additional(Record::from_rdata(
                name("a.svc.example."),
                5,
                RData::A(A::new(127, 0, 0, 9)),
            ));
        });
        let Verdict::Valid(a) = validate(&r, "_http._tcp.svc.example", Qtype::Srv) else {
            panic!("valid");
        };
        assert_eq!(a.srv.len(), 2);
        assert_eq!(a.srv[0].target, "a.svc.example");
        assert_eq!(a.srv[0].port, 8080);
        assert_eq!(a.srv[0].addr, Some("127.0.0.9".parse().unwrap()));
        assert_eq!(a.srv[1].addr, None);
    }
}
