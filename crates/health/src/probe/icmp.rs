//! ICMP echo probe. Tries an unprivileged ICMP datagram socket ("ping
//! socket", allowed by net.ipv4.ping_group_range) and falls back to a raw
//! socket (needs CAP_NET_RAW).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::net::UdpSocket;

use super::{Down, ProbeResult, Target, connect_error, resolve};

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

static SEQUENCE: AtomicU16 = AtomicU16::new(0);

fn next_ids() -> (u16, u16) {
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let id = (std::process::id() as u16) ^ 0x6774; // "gt"
    (id, seq)
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            u16::from_be_bytes([chunk[0], 0])
        };
        sum = sum.wrapping_add(u32::from(word));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn echo_request(v6: bool, id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut pkt = Vec::with_capacity(8 + payload.len());
    pkt.push(if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 });
    pkt.push(0);
    pkt.extend_from_slice(&[0, 0]);
    pkt.extend_from_slice(&id.to_be_bytes());
    pkt.extend_from_slice(&seq.to_be_bytes());
    pkt.extend_from_slice(payload);
    if !v6 {
        // ICMPv6 checksums include a pseudo-header: the kernel computes them.
        let sum = checksum(&pkt);
        pkt[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    pkt
}

fn is_permission(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || matches!(e.raw_os_error(), Some(1) | Some(13)) // EPERM, EACCES
}

/// Opens an ICMP socket: datagram first, raw as fallback. Returns the
/// socket and whether it is raw.
fn open(v6: bool) -> Result<(Socket, bool), Down> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    let dgram_err = match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => return Ok((s, false)),
        Err(e) => e,
    };
    match Socket::new(domain, Type::RAW, Some(proto)) {
        Ok(s) => Ok((s, true)),
        Err(e) => {
            let shown = if is_permission(&dgram_err) {
                &dgram_err
            } else {
                &e
            };
            if is_permission(&e) || is_permission(&dgram_err) {
                Err(format!(
                    "ICMP not permitted here (needs CAP_NET_RAW or net.ipv4.ping_group_range): {shown}"
                ))
            } else {
                Err(format!("cannot open ICMP socket: {e}"))
            }
        }
    }
}

/// Does `data` (as received) hold our echo reply?
fn is_our_reply(data: &[u8], v6: bool, raw: bool, id: u16, seq: u16, payload: &[u8]) -> bool {
    let mut icmp = data;
    if raw && !v6 {
        // Raw IPv4 sockets deliver the IP header too.
        let Some(&first) = data.first() else {
            return false;
        };
        let ihl = usize::from(first & 0x0f) * 4;
        if first >> 4 != 4 || data.len() < ihl {
            return false;
        }
        icmp = &data[ihl..];
    }
    if icmp.len() < 8 {
        return false;
    }
    let reply_type = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    if icmp[0] != reply_type || icmp[1] != 0 {
        return false;
    }
    let r_id = u16::from_be_bytes([icmp[4], icmp[5]]);
    let r_seq = u16::from_be_bytes([icmp[6], icmp[7]]);
    // Datagram sockets rewrite the identifier (the kernel demultiplexes by
    // it), so only raw sockets check it.
    (!raw || r_id == id) && r_seq == seq && &icmp[8..] == payload
}

pub(crate) async fn probe(target: &Target) -> ProbeResult {
    let ip = resolve(target).await?[0].ip().to_canonical();
    let v6 = matches!(ip, IpAddr::V6(_));
    let (socket, raw) = open(v6)?;
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("cannot open ICMP socket: {e}"))?;
    socket
        .connect(&SockAddr::from(SocketAddr::new(ip, 0)))
        .map_err(|e| connect_error(&e))?;
    // A datagram socket that tokio can drive; it only uses send/recv.
    let socket = UdpSocket::from_std(std::net::UdpSocket::from(socket))
        .map_err(|e| format!("cannot open ICMP socket: {e}"))?;

    let (id, seq) = next_ids();
    let mut payload = *b"gtm-health-xxxxxxxx";
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    payload[11..19].copy_from_slice(format!("{nonce:08x}").as_bytes());
    let pkt = echo_request(v6, id, seq, &payload);
    socket.send(&pkt).await.map_err(|e| {
        if is_permission(&e) {
            format!("ICMP not permitted here (needs CAP_NET_RAW or net.ipv4.ping_group_range): {e}")
        } else {
            connect_error(&e)
        }
    })?;

    let mut buf = [0u8; 1500];
    loop {
        let n = socket.recv(&mut buf).await.map_err(|e| connect_error(&e))?;
        if is_our_reply(&buf[..n], v6, raw, id, seq, &payload) {
            return Ok("echo reply".to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_request_verifies() {
        let pkt = echo_request(false, 0x1234, 7, b"abc");
        assert_eq!(checksum(&pkt), 0);
        let mut reply = pkt.clone();
        reply[0] = ECHO_REPLY_V4;
        assert!(is_our_reply(&reply, false, false, 1, 7, b"abc"));
        assert!(!is_our_reply(&reply, false, true, 1, 7, b"abc"));
        assert!(is_our_reply(&reply, false, false, 0x1234, 7, b"abc"));
    }
}
