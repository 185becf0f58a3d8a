//! The DNS transports under abuse (docs/operations.md, "Abuse
//! resistance"): TCP clients that hold connections idle or never read
//! their answers do not lock anybody else out, and over UDP a response that
//! cannot be sent costs only itself. Real sockets on loopback; the clients
//! that abuse come from addresses of their own in 127.0.0.0/8.

use std::{
    collections::BTreeSet,
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use hickory_server::proto::{op::ResponseCode, rr::RecordType};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
    task::JoinSet,
};
use tokio_util::sync::CancellationToken;

use crate::{
    support::*,
    xfr::{self, NSD_IP, Nsd, OTHER_IP},
};

/// The value of one sample (`name{labels}`) in `/metrics`, 0 if absent.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Waits (bounded) until the sample `name` of `d` reaches `at_least`.
async fn until_metric(d: &TestDevice, name: &str, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = metrics(d).await;
        if sample(&text, name) >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} stayed under {at_least}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lets this process hold `n` descriptors (the clients' and, in-process,
/// the device's ends of every connection).
fn allow_descriptors(n: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes a plain struct we own.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    if limit.rlim_cur >= n {
        return;
    }
    assert!(
        limit.rlim_max >= n,
        "this test needs {n} open files; the hard limit is {}",
        limit.rlim_max
    );
    limit.rlim_cur = n;
    // SAFETY: setrlimit reads a plain struct we own.
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) },
        0,
        "raising the open-file limit to {n}"
    );
}

/// A TCP connection to `server` from `from` (any port).
async fn connect_from(from: &str, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(format!("{from}:0").parse().unwrap())
        .unwrap_or_else(|e| panic!("bind {from}: {e}"));
    tokio::time::timeout(Duration::from_secs(10), socket.connect(server))
        .await
        .unwrap_or_else(|_| panic!("connect from {from}: no handshake within 10 s"))
        .unwrap_or_else(|e| panic!("connect from {from}: {e}"))
}

/// `bytes` with their two-byte length in front.
fn framed(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// Asks `sticky.example.test. A` (addresses with no health check: its
/// answer never depends on how long a test took) over TCP from `from`:
/// the answer, or why there was none (within 5 s).
async fn ask_tcp_from(from: &str, server: SocketAddr) -> Result<Vec<String>, String> {
    let mut stream = connect_from(from, server).await;
    let q = query("sticky.example.test.", RecordType::A);
    stream
        .write_all(&framed(&q.to_vec().unwrap()))
        .await
        .map_err(|e| format!("write: {e}"))?;
    let read = async {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let m = hickory_server::proto::op::Message::from_vec(&buf).map_err(|e| e.to_string())?;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    Ok(answers(&m))
}

/// 2,000 idle connections: 1,000 from one address (far over its client's
/// limit), 1,000 more from 20 addresses (50 each, under it) which fill
/// the listener. A new client is still answered: the connections idle
/// the longest make room (RFC 7766 §6.2.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_lock_out_a_new_client() {
    allow_descriptors(8192);
    let d = TestDevice::start(ZONE).await;
    let mut idle = Vec::with_capacity(2000);
    for _ in 0..1000 {
        idle.push(connect_from("127.0.172.1", d.v4()).await);
    }
    for i in 0..1000 {
        idle.push(connect_from(&format!("127.0.172.{}", 10 + i / 50), d.v4()).await);
    }
    let answered = ask_tcp_from("127.0.172.200", d.v4()).await;
    assert!(
        answered.as_ref().is_ok_and(|a| !a.is_empty()),
        "a new client while 2,000 connections are held idle: {answered:?}"
    );
    // The idle ones made room; the listener never held more than its limit.
    let text = metrics(&d).await;
    assert!(
        sample(&text, "gtm_dns_tcp_closed_total{reason=\"evicted\"}") > 900,
        "{text}"
    );
    assert!(sample(&text, "gtm_dns_tcp_connections") <= 1024, "{text}");
    // Those closed were the one address's, idle the longest; the 20
    // addresses' connections, made after them, are all still open.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let first = idle[..1000].iter().filter(|s| established(s)).count();
        let later = idle[1000..].iter().filter(|s| established(s)).count();
        if first <= 64 && later == 1000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "open: {first} of the first 1,000, {later} of the later 1,000"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clients that ask for large answers and never read them, from one
/// address, connecting again whenever closed.
struct NeverReading {
    stop: CancellationToken,
    tasks: JoinSet<()>,
    counts: Arc<Counts>,
}

/// What the clients that never read saw.
#[derive(Debug, Default)]
struct Counts {
    /// Connections open now with answers waiting unread.
    stuck: AtomicUsize,
    /// Connections the server closed before sending anything: refused,
    /// the listener or the client's share being full.
    refused: AtomicUsize,
}

/// How one connection of a client that never reads ended.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// Closed by the server with answers unread.
    Stuck,
    /// Closed before an answer came, or never made.
    Refused,
}

impl NeverReading {
    /// `clients` clients from `from` to `server`, each pipelining
    /// `queries` questions for `name` TXT. They connect for the first time
    /// one after another, so that the listen queue never overflows and
    /// the server sees them in order.
    async fn start(
        from: Ipv4Addr,
        server: SocketAddr,
        clients: usize,
        name: &str,
        queries: usize,
    ) -> Self {
        let q = query(name, RecordType::TXT).to_vec().unwrap();
        let asked: Arc<[u8]> = framed(&q).repeat(queries).into();
        let stop = CancellationToken::new();
        let counts = Arc::new(Counts::default());
        let mut tasks = JoinSet::new();
        for _ in 0..clients {
            let (stop, counts, asked) = (stop.clone(), counts.clone(), asked.clone());
            let (tried, first_try) = tokio::sync::oneshot::channel();
            tasks.spawn(async move {
                let mut tried = Some(tried);
                loop {
                    let held = tokio::select! {
                        _ = stop.cancelled() => return,
                        held = Self::hold(from, server, &asked, &counts, &mut tried) => held,
                    };
                    if held == Held::Refused {
                        counts.refused.fetch_add(1, Relaxed);
                        // Again, but not in a tight loop.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            });
            let _ = first_try.await;
        }
        Self {
            stop,
            tasks,
            counts,
        }
    }

    /// One connection: connect, ask, never read, until the server closes
    /// it.
    async fn hold(
        from: Ipv4Addr,
        server: SocketAddr,
        asked: &[u8],
        counts: &Counts,
        tried: &mut Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Held {
        let Ok(socket) = TcpSocket::new_v4() else {
            return Held::Refused;
        };
        // A small window and small segments: the server's writes block
        // once a few tens of KB wait (its send buffer grows with the
        // segment size: 2.8 MB each at loopback's 64 KB).
        let _ = socket.set_recv_buffer_size(4096);
        let mss: libc::c_int = 536;
        // SAFETY: setsockopt reads one c_int.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_MAXSEG,
                (&mss as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        if socket
            .bind(SocketAddr::V4(SocketAddrV4::new(from, 0)))
            .is_err()
        {
            return Held::Refused;
        }
        let connected = tokio::time::timeout(Duration::from_secs(5), socket.connect(server)).await;
        // The next client may start.
        if let Some(tried) = tried.take() {
            let _ = tried.send(());
        }
        let Ok(Ok(mut stream)) = connected else {
            return Held::Refused;
        };
        if stream.write_all(asked).await.is_err() {
            return Held::Refused;
        }
        let mut answered = false;
        while established(&stream) {
            if !answered && unread(&stream) > 0 {
                answered = true;
                counts.stuck.fetch_add(1, Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if answered {
            counts.stuck.fetch_sub(1, Relaxed);
            Held::Stuck
        } else {
            Held::Refused
        }
    }

    /// Waits (bounded) until the clients hold all the server lets them:
    /// at least `stuck` connections hold answers unread, and the server
    /// refused one at least (every client tried once before: the server
    /// refuses only when full).
    async fn until_in_place(&self, stuck: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let c = &self.counts;
        while c.stuck.load(Relaxed) < stuck || c.refused.load(Relaxed) == 0 {
            assert!(Instant::now() < deadline, "{c:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Whether the connection is still established (not closed or reset by
/// the server), asked without reading from it.
fn established(stream: &TcpStream) -> bool {
    // SAFETY: tcp_info is a plain C struct; getsockopt writes at most
    // `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid descriptor and a buffer of `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    r == 0 && info.tcpi_state == 1 // TCP_ESTABLISHED
}

/// Bytes received and not read.
fn unread(stream: &TcpStream) -> libc::c_int {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int.
    let r = unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &mut n) };
    if r == 0 { n } else { 0 }
}

/// A TXT record of about 20 KB: its answer fills a small receive window
/// many times over.
fn large_txt() -> String {
    let values: Vec<String> = (0..100)
        .map(|i| format!("\"{i:03}{}\"", "x".repeat(200)))
        .collect();
    format!(
        "\n[[domain.record]]\nname = \"large\"\ntype = \"TXT\"\nvalues = [{}]\n",
        values.join(", ")
    )
}

/// 1,100 clients from one address ask for large answers and never read
/// them, reconnecting whenever closed. Meanwhile `dig` is answered over
/// TCP after a truncated UDP answer, and a real NSD secondary transfers
/// the zone; the clients that never read are closed by the write timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_read_shut_out_neither_tcp_fallback_nor_a_transfer() {
    let Some(nsd_bin) = tool("nsd", "nsd") else {
        return;
    };
    if tool("dig", "bind9-dnsutils").is_none() {
        return;
    }
    allow_descriptors(8192);
    let port = free_port_on(NSD_IP);
    let secondary = format!("{NSD_IP}:{port}");
    let extra = format!("{}{}", xfr::many(300), large_txt());
    let d = xfr::device(&xfr::zone(&xfr::secondary_at(&secondary), &extra)).await;
    let clients = 1100;
    let attack = NeverReading::start(
        "127.0.171.4".parse().unwrap(),
        d.v4(),
        clients,
        "large.example.test.",
        20,
    )
    .await;
    // The listener is as full as they can make it (with no limit per
    // client and no write timeout: all of it, for good).
    attack.until_in_place(50).await;

    // Too large for UDP: dig retries over TCP, from an address of its own.
    let out = tokio::task::block_in_place(|| {
        xfr::dig(&d, &["-b", OTHER_IP, "large.example.test", "TXT"])
    })
    .expect("dig is installed");
    assert!(out.contains("Truncated, retrying in TCP mode"), "{out}");
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 100,"),
        "the whole answer over TCP:\n{out}"
    );

    // A secondary transfers the zone (SOA, then AXFR over TCP).
    let nsd = Nsd::start(&nsd_bin, port, d.v4());
    xfr::until_in_step(&d, &nsd, 0).await;

    // The clients that never read were closed for it, and came back.
    until_metric(&d, "gtm_dns_tcp_closed_total{reason=\"write_timeout\"}", 1).await;
    let text = metrics(&d).await;
    assert!(
        sample(&text, "gtm_dns_tcp_closed_total{reason=\"client_limit\"}") > 0,
        "{text}"
    );
    attack.stop().await;
    drop(nsd);
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
