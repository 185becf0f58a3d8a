//! The DNS transports under abuse (docs/operations.md, "Abuse
//! resistance"): over UDP a response that cannot be sent costs only
//! itself. Real sockets on loopback.

use std::{
    collections::BTreeSet,
    net::{SocketAddr, SocketAddrV4},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;

use crate::support::*;

/// The value of one sample (`name{labels}`) in `/metrics`, 0 if absent.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A raw IPv4 socket (`IPPROTO_RAW`: the packet's own IP header), to send
/// UDP from sources no normal socket can have.
struct Raw(OwnedFd);

impl Raw {
    fn open() -> Self {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        assert!(
            fd >= 0,
            "a raw socket needs CAP_NET_RAW (run the tests as root): {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a descriptor just opened and owned by nobody else.
        Self(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Sends `payload` as UDP from `src` to `dst` (both IPv4).
    fn send(&self, src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) {
        let udp_len = 8 + payload.len();
        let mut p = Vec::with_capacity(20 + udp_len);
        // IPv4 header: the kernel fills the checksum, id and length.
        p.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
        p.extend_from_slice(&src.ip().octets());
        p.extend_from_slice(&dst.ip().octets());
        // UDP header, checksum 0: none (IPv4 allows it).
        p.extend_from_slice(&src.port().to_be_bytes());
        p.extend_from_slice(&dst.port().to_be_bytes());
        p.extend_from_slice(&(udp_len as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(payload);
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(*dst.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a buffer of p.len() bytes and a sockaddr_in of its size.
        let r = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
                p.as_ptr().cast(),
                p.len(),
                0,
                (&to as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        assert_eq!(r, p.len() as isize, "{}", std::io::Error::last_os_error());
    }
}

/// Queries arrive in one burst from three kinds of source: port 0 (no
/// answer can go there: skipped and counted), 198.51.100.7 (an answer from
/// the loopback address cannot go there: the kernel refuses that one send)
/// and a real client. Every one of the real client's queries is answered,
/// whatever else its batch held.
#[tokio::test]
async fn a_response_that_cannot_be_sent_costs_only_itself() {
    let d = TestDevice::start(ZONE).await;
    let SocketAddr::V4(server) = d.v4() else {
        panic!("the first listener is IPv4");
    };
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let SocketAddr::V4(me) = client.local_addr().unwrap() else {
        panic!("IPv4");
    };
    let raw = Raw::open();
    let (rounds, mut wanted) = (100u16, BTreeSet::new());
    for i in 0..rounds {
        let mut q = query("www.example.test.", RecordType::A);
        q.metadata.id = i;
        raw.send("127.0.0.1:0".parse().unwrap(), server, &q.to_vec().unwrap());
        q.metadata.id = 1000 + i;
        raw.send(me, server, &q.to_vec().unwrap());
        wanted.insert(1000 + i);
        q.metadata.id = 2000 + i;
        raw.send(
            "198.51.100.7:5300".parse().unwrap(),
            server,
            &q.to_vec().unwrap(),
        );
    }
    let mut buf = [0u8; 1500];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !wanted.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(n) = tokio::time::timeout(left, client.recv(&mut buf)).await else {
            panic!(
                "{} of {rounds} answers never came: {wanted:?}",
                wanted.len()
            );
        };
        let m = hickory_server::proto::op::Message::from_vec(&buf[..n.unwrap()]).unwrap();
        wanted.remove(&m.metadata.id);
    }
    let text = metrics(&d).await;
    assert_eq!(
        sample(
            &text,
            "gtm_dns_udp_unanswered_total{reason=\"source_port_zero\"}"
        ),
        u64::from(rounds),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "gtm_dns_udp_unanswered_total{reason=\"send_failed\"}"
        ),
        u64::from(rounds),
        "{text}"
    );
}
