//! UDP serving with batched socket I/O: `recvmmsg` a batch of queries,
//! answer each (fast path, else general path), `sendmmsg` the responses.
//!
//! A query from a source no answer can or should go to (port 0, an
//! unspecified, broadcast or multicast address: forged, as
//! hickory-server's `sanitize_src_address` also judges) is not answered,
//! and a response the kernel refuses to send is skipped alone: the rest
//! of its batch is still sent. Both are counted by reason.
//!
//! Each worker is an OS thread with its own `SO_REUSEPORT` socket on the
//! listen address, so the kernel spreads queries over workers and no
//! worker waits on another. Buffers are allocated once per worker.

use std::{
    io,
    mem::MaybeUninit,
    net::{IpAddr, SocketAddr},
    os::fd::AsRawFd,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, SystemTime},
};

use bytes::Bytes;
use socket2::{Domain, Protocol, Socket, Type};

use crate::cpus::Split;

use super::{
    dnstap::{Seen, SocketProtocol, Tapped},
    fast,
    handler::{DRAW, Handler, Transport, answer_noted, answer_udp},
    metrics::Unanswered,
    rrl::{self, Verdict},
};

const BATCH: usize = 32;
const MAX_QUERY: usize = 4096;

/// Binds one `SO_REUSEPORT` UDP socket on `addr`.
pub fn bind(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_port(true)?;
    socket.set_recv_buffer_size(4 << 20).ok();
    socket.set_send_buffer_size(4 << 20).ok();
    // Wake up now and then to notice shutdown.
    socket.set_read_timeout(Some(Duration::from_millis(200)))?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// Binds the first socket of a listen address, refusing an address another
/// socket holds. `SO_REUSEPORT` lets any socket of the same user join a
/// port: a second device started on the same address would silently take
/// part of the queries, and with port 0 the kernel may even pick a port that
/// another process's reuse-port sockets hold. So the address is claimed
/// first by a socket without `SO_REUSEPORT`, which the kernel gives only a
/// port nobody holds (and refuses a held one), then released to the
/// workers' sockets on that very port.
pub fn bind_first(addr: SocketAddr) -> io::Result<Socket> {
    let claim = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        claim.set_only_v6(true)?;
    }
    claim.bind(&addr.into())?;
    let free = claim
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("UDP socket without an address"))?;
    drop(claim);
    bind(free)
}

/// Starts `workers` threads answering on `first` and further sockets bound
/// to the same address; with `cpus`, worker `i` runs on its `i`th DNS CPU.
pub fn spawn(
    first: Socket,
    workers: usize,
    cpus: Option<&Split>,
    handler: Handler,
    stop: Arc<AtomicBool>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let addr = first
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("UDP socket without an address"))?;
    let mut sockets = vec![first];
    for _ in 1..workers.max(1) {
        sockets.push(bind(addr)?);
    }
    sockets
        .into_iter()
        .enumerate()
        .map(|(i, socket)| {
            let (handler, stop) = (handler.clone(), stop.clone());
            let cpu = cpus.and_then(|split| split.dns_cpu(i));
            std::thread::Builder::new()
                .name(format!("dns-udp-{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu
                        && let Err(e) = crate::cpus::pin_current_thread(&[cpu])
                    {
                        tracing::warn!(cpu, error = %e, "cannot keep a DNS worker on its CPU");
                    }
                    worker(socket, handler, stop)
                })
        })
        .collect()
}

fn worker(socket: Socket, handler: Handler, stop: Arc<AtomicBool>) {
    let fd = socket.as_raw_fd();
    // The address dnstap names as the response's.
    let local = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    // Dynamic updates are decided on the runtime, which answers from here.
    let update_socket = socket
        .try_clone()
        .ok()
        .map(|s| Arc::new(std::net::UdpSocket::from(s)));
    let mut inbuf = vec![[0u8; MAX_QUERY]; BATCH];
    let mut outbuf: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(1232)).collect();
    // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs for
    // which all-zero bytes are a valid value.
    let mut names: Vec<libc::sockaddr_storage> =
        vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH];
    let mut iov: Vec<libc::iovec> = vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH];
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH];
    let mut send_iov: Vec<libc::iovec> =
        vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH];
    let mut send_hdrs: Vec<libc::mmsghdr> =
        vec![unsafe { MaybeUninit::zeroed().assume_init() }; BATCH];

    while !stop.load(Ordering::Relaxed) {
        for i in 0..BATCH {
            iov[i].iov_base = inbuf[i].as_mut_ptr().cast();
            iov[i].iov_len = MAX_QUERY;
            hdrs[i].msg_hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            hdrs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
            hdrs[i].msg_hdr.msg_control = std::ptr::null_mut();
            hdrs[i].msg_hdr.msg_controllen = 0;
            hdrs[i].msg_len = 0;
        }
        // SAFETY: every header points at live buffers of the stated sizes.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            continue; // timeout (shutdown check), EINTR, or a transient error
        }
        let received = std::time::Instant::now();
        let metrics = &handler.state.metrics;
        let limits = handler.state.rrl.limits();
        let second = handler.state.rrl.second(received);
        // Read once a batch: with dnstap off, nothing more is done for it.
        let tap = handler.state.dnstap.tap.load();
        let mut replies = 0;
        {
            for i in 0..n as usize {
                let len = hdrs[i].msg_len as usize;
                let query = &inbuf[i][..len];
                let Some(src) = socket_addr(&names[i]) else {
                    continue;
                };
                if let Some(why) = unanswerable(src) {
                    metrics.unanswered(why);
                    continue;
                }
                let state = &handler.state;
                let verdict =
                    rrl::screen(&state.rrl, &state.cookies, &limits, query, src.ip(), second);
                if verdict == Verdict::Drop {
                    continue;
                }
                let out = &mut outbuf[replies];
                if super::update::is_update(query)
                    && let Some(socket) = &update_socket
                    && let Some(now) = super::update::udp(&handler, query, src, socket)
                {
                    match now {
                        Some(bytes) => *out = bytes,
                        None => continue,
                    }
                } else {
                    // dnstap: this query tapped, and what decided its answer.
                    let tapping = tap.as_deref().filter(|t| t.sampled());
                    let mut note = None;
                    let answered = DRAW.with(|d| {
                        let draw = &mut d.borrow_mut();
                        // Over the limit: the truncated response, not the answer.
                        if verdict == Verdict::Slip {
                            return rrl::truncate_into(query, handler.state.edns_payload, out);
                        }
                        let general = match tapping {
                            None => {
                                if fast::answer(&handler.state, query, src.ip(), draw, out) {
                                    return true;
                                }
                                // Each path counts its own responses.
                                answer_udp(&handler, query, src, draw)
                            }
                            Some(_) => {
                                let state = &handler.state;
                                if fast::answer_noted(state, query, src.ip(), draw, out, &mut note)
                                {
                                    return true;
                                }
                                answer_noted(&handler, query, src, Transport::Udp, draw, &mut note)
                            }
                        };
                        match general {
                            Some(bytes) => {
                                *out = bytes;
                                true
                            }
                            None => false,
                        }
                    });
                    if !answered {
                        continue;
                    }
                    if let Some(tap) = tapping {
                        tap.send(Tapped {
                            seen: Seen {
                                protocol: SocketProtocol::Udp,
                                client: src,
                                server: local,
                                query_time: SystemTime::now()
                                    .checked_sub(received.elapsed())
                                    .unwrap_or_else(SystemTime::now),
                                query: Bytes::copy_from_slice(query),
                                response_time: SystemTime::now(),
                                response: Bytes::copy_from_slice(out),
                            },
                            steered: note,
                        });
                    }
                }
                send_iov[replies].iov_base = out.as_mut_ptr().cast();
                send_iov[replies].iov_len = out.len();
                let h = &mut send_hdrs[replies];
                h.msg_hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
                h.msg_hdr.msg_namelen = hdrs[i].msg_hdr.msg_namelen;
                h.msg_hdr.msg_iov = &mut send_iov[replies];
                h.msg_hdr.msg_iovlen = 1;
                replies += 1;
            }
        }
        let mut sent = 0;
        while sent < replies {
            // SAFETY: the first `replies` headers point at live buffers.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    send_hdrs[sent..].as_mut_ptr(),
                    (replies - sent) as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                sent += r as usize;
            } else {
                // The response at `sent` could not go: skip it alone.
                metrics.unanswered(Unanswered::SendFailed);
                sent += 1;
            }
        }
        // Every query of the batch waited for the batch to be sent.
        metrics.latency.observe(received.elapsed(), replies as u64);
    }
}

/// Why no answer may go to `src`, if so.
fn unanswerable(src: SocketAddr) -> Option<Unanswered> {
    if src.port() == 0 {
        return Some(Unanswered::SourcePortZero);
    }
    let ip = src.ip().to_canonical();
    if ip.is_unspecified() {
        return Some(Unanswered::SourceUnspecified);
    }
    if ip.is_multicast() {
        return Some(Unanswered::SourceMulticast);
    }
    match ip {
        IpAddr::V4(v4) if v4.is_broadcast() => Some(Unanswered::SourceBroadcast),
        _ => None,
    }
}

/// The address the kernel wrote into a `sockaddr_storage`.
fn socket_addr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: &libc::sockaddr_in =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_no_answer_may_go_to() {
        for (src, why) in [
            ("192.0.2.1:0", Some(Unanswered::SourcePortZero)),
            ("0.0.0.0:53", Some(Unanswered::SourceUnspecified)),
            ("[::]:53", Some(Unanswered::SourceUnspecified)),
            ("[::ffff:0.0.0.0]:53", Some(Unanswered::SourceUnspecified)),
            ("255.255.255.255:53", Some(Unanswered::SourceBroadcast)),
            ("224.0.0.251:5353", Some(Unanswered::SourceMulticast)),
            ("[ff02::fb]:5353", Some(Unanswered::SourceMulticast)),
            ("[::ffff:239.1.2.3]:53", Some(Unanswered::SourceMulticast)),
            ("192.0.2.1:53", None),
            ("[2001:db8::1]:1053", None),
        ] {
            assert_eq!(unanswerable(src.parse().unwrap()), why, "{src}");
        }
    }

    #[test]
    fn an_address_another_socket_holds_is_refused() {
        // Another device's reuse-port socket on a port of its own.
        let other = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let held = other.local_addr().unwrap().as_socket().unwrap();
        // A reuse-port socket joins it silently: the surprise.
        assert!(bind(held).is_ok());
        let refused = bind_first(held).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        // A free port, and workers joining it.
        let first = bind_first("127.0.0.1:0".parse().unwrap()).unwrap();
        let mine = first.local_addr().unwrap().as_socket().unwrap();
        assert_ne!(mine, held);
        bind(mine).unwrap();
    }
}
