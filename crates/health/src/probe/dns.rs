//! DNS probe: one UDP query, judged by its rcode and (optionally) an answer.

// The one line naming the DNS library: in gtm it is `use hickory_server::proto;`.
use hickory_server::proto;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use proto::op::{Message, MessageType, Query};
use proto::rr::{Name, RecordType};
use tokio::net::UdpSocket;

use super::{ProbeResult, Target, connect_error, resolve};

/// The conventional name of an rcode (`NOERROR`, `SERVFAIL`, ...).
pub(crate) fn rcode_name(rcode: u16) -> String {
    match rcode {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        6 => "YXDOMAIN".into(),
        7 => "YXRRSET".into(),
        8 => "NXRRSET".into(),
        9 => "NOTAUTH".into(),
        10 => "NOTZONE".into(),
        n => format!("RCODE{n}"),
    }
}

/// Compares presentation forms, ignoring case and a final dot.
fn same_rdata(a: &str, b: &str) -> bool {
    a.trim()
        .trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim().trim_end_matches('.'))
}

pub(crate) async fn probe(
    target: &Target,
    query_name: &str,
    query_type: u16,
    expect_rcode: u8,
    expect_answer: Option<&str>,
) -> ProbeResult {
    let mut name = Name::from_ascii(query_name)
        .map_err(|e| format!("invalid query name {query_name:?}: {e}"))?;
    name.set_fqdn(true);
    let mut msg = Message::query();
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(name, RecordType::from(query_type)));
    let id = msg.metadata.id;
    let wire = msg
        .to_vec()
        .map_err(|e| format!("cannot encode query: {e}"))?;

    let addr = resolve(target).await?[0];
    let bind: SocketAddr = match addr.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind)
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    socket.connect(addr).await.map_err(|e| connect_error(&e))?;
    socket.send(&wire).await.map_err(|e| connect_error(&e))?;

    let mut buf = vec![0u8; 4096];
    let response = loop {
        // An ICMP port unreachable shows here as ConnectionRefused.
        let n = socket.recv(&mut buf).await.map_err(|e| connect_error(&e))?;
        match Message::from_vec(&buf[..n]) {
            Ok(m) if m.metadata.id == id && m.metadata.message_type == MessageType::Response => {
                break m;
            }
            // Stray or garbled datagram: keep waiting (bounded by the timeout).
            _ => continue,
        }
    };

    let rcode = u16::from(response.metadata.response_code);
    if rcode != u16::from(expect_rcode) {
        return Err(format!(
            "rcode {}, expected {}",
            rcode_name(rcode),
            rcode_name(u16::from(expect_rcode))
        ));
    }
    if let Some(want) = expect_answer.filter(|w| !w.trim().is_empty()) {
        let found = response
            .answers
            .iter()
            .any(|r| same_rdata(&r.data.to_string(), want));
        if !found {
            return Err(format!("answer did not contain {}", want.trim()));
        }
    }
    Ok(format!("rcode {}", rcode_name(rcode)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_compare() {
        assert_eq!(rcode_name(0), "NOERROR");
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert!(same_rdata("target.example.com.", "Target.example.com"));
        assert!(!same_rdata("192.0.2.1", "192.0.2.10"));
    }
}
