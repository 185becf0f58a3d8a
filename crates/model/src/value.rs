//! Record data held compactly.
//!
//! hickory's `RData` is 184 bytes and its `Record` 280, whatever the record
//! holds; a configuration of a million A records keeps one per address in
//! its compiled form and one per candidate in its answers. [`Value`] keeps
//! an address inline (24 bytes) and anything else boxed, and gives back
//! the `RData` (or a `Record` of an owner) when a message needs one.

use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_server::proto::{
    ProtoError,
    rr::{
        Name, RData, Record, RecordType,
        rdata::{A, AAAA},
    },
    serialize::binary::BinEncodable,
};

/// The data of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Other(Box<RData>),
}

impl From<RData> for Value {
    fn from(data: RData) -> Self {
        match data {
            RData::A(A(ip)) => Value::A(ip),
            RData::AAAA(AAAA(ip)) => Value::Aaaa(ip),
            other => Value::Other(Box::new(other)),
        }
    }
}

impl Value {
    pub fn rdata(&self) -> RData {
        match self {
            Value::A(ip) => RData::A(A(*ip)),
            Value::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
            Value::Other(data) => (**data).clone(),
        }
    }

    /// A record of `owner` with this data.
    pub fn record(&self, owner: &Name, ttl: u32) -> Record {
        Record::from_rdata(owner.clone(), ttl, self.rdata())
    }

    pub fn record_type(&self) -> RecordType {
        match self {
            Value::A(_) => RecordType::A,
            Value::Aaaa(_) => RecordType::AAAA,
            Value::Other(data) => data.record_type(),
        }
    }

    /// The RDATA's wire form, as `RData::to_bytes` gives it.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ProtoError> {
        match self {
            Value::A(ip) => Ok(ip.octets().to_vec()),
            Value::Aaaa(ip) => Ok(ip.octets().to_vec()),
            Value::Other(data) => data.to_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use hickory_server::proto::rr::rdata::{CNAME, TXT};

    use super::*;

    #[test]
    fn a_value_gives_back_the_data_it_was_made_of_and_its_wire_form() {
        let cases = [
            RData::A(A(Ipv4Addr::new(192, 0, 2, 7))),
            RData::AAAA(AAAA(Ipv6Addr::from_str("2001:db8::7").unwrap())),
            RData::CNAME(CNAME(Name::from_str("web.example.test.").unwrap())),
            RData::TXT(TXT::new(vec!["v=spf1 -all".to_string()])),
        ];
        for data in cases {
            let value = Value::from(data.clone());
            assert_eq!(value.rdata(), data);
            assert_eq!(value.record_type(), data.record_type());
            assert_eq!(
                value.to_bytes().unwrap(),
                data.to_bytes().unwrap(),
                "{data}"
            );
        }
        assert!(matches!(
            Value::from(RData::A(A(Ipv4Addr::LOCALHOST))),
            Value::A(_)
        ));
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }
}
