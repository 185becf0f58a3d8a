//! Starting and stopping the DNS listeners of a device.

use std::{
    io,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
};

use tokio::net::TcpListener;

use crate::cpus::Split;
use tokio_util::sync::CancellationToken;

use super::{
    handler::{DnsState, Handler},
    tcp, udp,
};

/// The running DNS service: UDP workers and the TCP listeners.
pub struct DnsServer {
    /// The addresses really bound (port 0 resolved), UDP and TCP alike.
    pub addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    tcp_stop: CancellationToken,
    tcp: Vec<tokio::task::JoinHandle<()>>,
    /// The workers' names, UDP threads then TCP listeners, in the order of
    /// `threads` and `tcp`.
    names: Vec<String>,
}

impl DnsServer {
    /// Binds every address for UDP and TCP (the same port for both) and
    /// starts answering: `workers` UDP threads per address, on the DNS CPUs
    /// of `cpus` when given (TCP is served on the runtime's threads).
    pub async fn start(
        listen: &[SocketAddr],
        workers: usize,
        cpus: Option<&Split>,
        state: DnsState,
    ) -> io::Result<Self> {
        let handler = Handler { state };
        let stop = Arc::new(AtomicBool::new(false));
        let tcp_stop = CancellationToken::new();
        let mut tcp = Vec::new();
        let mut addrs = Vec::new();
        let mut threads = Vec::new();
        let mut udp_names = Vec::new();
        let mut tcp_names = Vec::new();
        for addr in listen {
            let (socket, listener, bound) = bind_pair(*addr)?;
            tcp.push(tokio::spawn(tcp::serve(
                listener,
                handler.clone(),
                tcp_stop.clone(),
            )));
            tcp_names.push(format!("dns-tcp {bound}"));
            let spawned = udp::spawn(socket, workers, cpus, handler.clone(), stop.clone())?;
            udp_names.extend((0..spawned.len()).map(|i| format!("dns-udp {bound} #{i}")));
            threads.extend(spawned);
            addrs.push(bound);
        }
        udp_names.extend(tcp_names);
        Ok(Self {
            addrs,
            stop,
            threads,
            tcp_stop,
            tcp,
            names: udp_names,
        })
    }

    /// Whether every UDP worker and TCP listener is still running (none
    /// ended by a panic or an error).
    pub fn alive(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
            && self.threads.iter().all(|t| !t.is_finished())
            && self.tcp.iter().all(|t| !t.is_finished())
    }

    /// Each UDP worker's and TCP listener's name (`dns-udp ADDR #N`,
    /// `dns-tcp ADDR`), for [`DnsServer::worker_alive`].
    pub fn workers(&self) -> &[String] {
        &self.names
    }

    /// Whether the `i`th of [`DnsServer::workers`] still runs.
    pub fn worker_alive(&self, i: usize) -> bool {
        match self.threads.get(i) {
            Some(thread) => !thread.is_finished(),
            None => self
                .tcp
                .get(i - self.threads.len())
                .is_some_and(|task| !task.is_finished()),
        }
    }

    /// Stops the listeners and waits for the workers.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tcp_stop.cancel();
        for task in self.tcp.drain(..) {
            let _ = task.await;
        }
        for t in self.threads.drain(..) {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// A UDP socket and a TCP listener on the same address. With port 0 the
/// kernel picks the UDP port, which TCP may already use: then try another.
/// Within the runtime (the listener registers with it).
fn bind_pair(addr: SocketAddr) -> io::Result<(socket2::Socket, TcpListener, SocketAddr)> {
    let mut attempts = 0;
    loop {
        let socket = udp::bind_first(addr).map_err(|e| with_addr(e, "UDP", addr))?;
        let bound = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("UDP socket without an address"))?;
        match tcp::bind(bound) {
            Ok(listener) => return Ok((socket, listener, bound)),
            Err(e) if addr.port() == 0 && e.kind() == io::ErrorKind::AddrInUse && attempts < 20 => {
                attempts += 1
            }
            Err(e) => return Err(with_addr(e, "TCP", bound)),
        }
    }
}

fn with_addr(e: io::Error, proto: &str, addr: SocketAddr) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot listen for DNS over {proto} on {addr}: {e}"),
    )
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}
