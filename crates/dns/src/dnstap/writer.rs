//! The dnstap writer: takes tapped queries from the queue, encodes their
//! messages and writes them to the output, and keeps the output open.
//!
//! A socket reader is connected to with the Frame Streams handshake
//! (READY, ACCEPT, START); when it is not there yet, refuses, or goes
//! away (its end closes, a write fails), the writer connects again after
//! a backoff of 0.1 s doubling to 5 s, dropping (and counting) what the
//! answer paths queue meanwhile, so a reader that comes back gets fresh
//! messages. A reader that stays connected but never reads holds the
//! writer in its write: the queue fills and the answer paths drop, never
//! wait. A file is written from START; a write that fails closes it and
//! the file is made again after the backoff.
//!
//! Asked to stop (a reload or the device stopping), the writer writes what
//! is queued, sends STOP and, to a socket reader, waits a moment for its
//! FINISH.

use std::{io, sync::Arc, sync::atomic::Ordering::Relaxed, time::Duration};

use arc_swap::ArcSwap;
use bytes::Bytes;
use gtm_geo::Geo;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::mpsc,
};
use tokio_util::sync::CancellationToken;

use super::{
    Output, Settings, Stats, Tapped,
    extra::Words,
    frames::{self, CONTENT_TYPE, Control},
    message::{self, MessageType},
};

/// The first wait before connecting again, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a connect and the reader's ACCEPT may take.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// How long a stopping writer waits for the reader's FINISH.
const FINISH: Duration = Duration::from_secs(1);
/// Tapped queries encoded for one write at most.
const BATCH: usize = 1024;
/// How long the writer lets the queue fill once it has drained it: the
/// most a message waits before it is written (a reader sees messages in
/// bursts this far apart).
const PACE: Duration = Duration::from_millis(20);

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// An open output: what is written to, and for a socket the reader's end.
struct Open {
    write: Writer,
    read: Option<Reader>,
}

/// Why an output closed.
enum Closed {
    /// Asked to stop, and done.
    Stopped,
    /// Lost: open it again.
    Lost(String),
}

/// Runs the writer of `settings` until `stop` (or until every sender is
/// gone).
pub async fn run(
    settings: Settings,
    mut queue: mpsc::Receiver<Tapped>,
    stats: Arc<Stats>,
    geo: Arc<ArcSwap<Geo>>,
    stop: CancellationToken,
) {
    let mut words = Words::default();
    let mut backoff = FIRST_BACKOFF;
    let mut last_error: Option<String> = None;
    loop {
        let opened = tokio::select! {
            opened = open(&settings.output) => opened,
            _ = stop.cancelled() => return,
        };
        match opened {
            Ok(open) => {
                backoff = FIRST_BACKOFF;
                stats.connected.store(true, Relaxed);
                stats.connects.fetch_add(1, Relaxed);
                stats.set_error(None);
                tracing::info!(output = %settings.output, "dnstap output open");
                let closed =
                    serve(open, &settings, &mut queue, &stats, &geo, &stop, &mut words).await;
                stats.connected.store(false, Relaxed);
                match closed {
                    Closed::Stopped => return,
                    Closed::Lost(why) => {
                        tracing::warn!(output = %settings.output, error = %why, "dnstap output lost; opening it again");
                        stats.set_error(Some(why.clone()));
                        last_error = Some(why);
                    }
                }
            }
            Err(e) => {
                let why = e.to_string();
                // Said once per reason, not once per attempt.
                if last_error.as_deref() != Some(why.as_str()) {
                    tracing::warn!(output = %settings.output, error = %why, "dnstap output cannot be opened; trying again");
                }
                stats.set_error(Some(why.clone()));
                last_error = Some(why);
            }
        }
        // Wait, dropping what is queued meanwhile.
        let wait = tokio::time::sleep(backoff);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                _ = &mut wait => break,
                tapped = queue.recv() => match tapped {
                    Some(_) => { stats.dropped.fetch_add(per_query(&settings), Relaxed); }
                    None => return,
                },
                _ = stop.cancelled() => return,
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn per_query(settings: &Settings) -> u64 {
    settings.per_query()
}

/// Opens the output and, for a socket, makes the handshake; a file gets
/// its START.
async fn open(output: &Output) -> io::Result<Open> {
    match output {
        Output::File(path) => {
            let mut file = tokio::fs::File::create(path)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            file.write_all(&frames::control(Control::Start, Some(CONTENT_TYPE)))
                .await?;
            Ok(Open {
                write: Box::new(file),
                read: None,
            })
        }
        Output::Unix(path) => {
            let stream = timed(tokio::net::UnixStream::connect(path))
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let (read, write) = stream.into_split();
            handshake(Box::new(read), Box::new(write)).await
        }
        Output::Tcp(addr) => {
            let stream = timed(tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))?;
            let _ = stream.set_nodelay(true);
            let (read, write) = stream.into_split();
            handshake(Box::new(read), Box::new(write)).await
        }
    }
}

async fn timed<T>(f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(HANDSHAKE, f)
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in 5 s")))
}

/// READY, the reader's ACCEPT (of our content type), START.
async fn handshake(mut read: Reader, mut write: Writer) -> io::Result<Open> {
    write
        .write_all(&frames::control(Control::Ready, Some(CONTENT_TYPE)))
        .await?;
    let accept = timed(async {
        frames::read_control(&mut read)
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    })
    .await?;
    if accept.kind != Control::Accept {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the reader answered READY with {:?}, not ACCEPT",
                accept.kind
            ),
        ));
    }
    if !accept.content_types.is_empty() && !accept.content_types.iter().any(|c| c == CONTENT_TYPE) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the reader does not accept protobuf:dnstap.Dnstap",
        ));
    }
    write
        .write_all(&frames::control(Control::Start, Some(CONTENT_TYPE)))
        .await?;
    Ok(Open {
        write,
        read: Some(read),
    })
}

/// Writes the queue's messages to an open output until it is lost or the
/// writer is stopped.
async fn serve(
    mut open: Open,
    settings: &Settings,
    queue: &mut mpsc::Receiver<Tapped>,
    stats: &Stats,
    geo: &ArcSwap<Geo>,
    stop: &CancellationToken,
    words: &mut Words,
) -> Closed {
    let mut buffer = Vec::with_capacity(64 * 1024);
    let mut batch: Vec<Tapped> = Vec::with_capacity(BATCH);
    let mut scratch = [0u8; 64];
    loop {
        // The next tapped queries, or the reader closing its end, or stop.
        let reader_gone = async {
            match open.read.as_mut() {
                Some(read) => read.read(&mut scratch).await,
                None => std::future::pending().await,
            }
        };
        let received = if stop.is_cancelled() {
            0
        } else {
            tokio::select! {
            n = queue.recv_many(&mut batch, BATCH) => n,
            ended = reader_gone => {
                let why = match ended {
                    Ok(0) => "the reader closed the connection".to_string(),
                    Ok(_) => "the reader sent a frame after START".to_string(),
                    Err(e) => e.to_string(),
                };
                return Closed::Lost(why);
            }
            _ = stop.cancelled() => 0,
            }
        };
        let stopping = received == 0;
        if stopping {
            // Stopped, or every sender gone: what is still queued goes too.
            while let Ok(t) = queue.try_recv() {
                batch.push(t);
            }
        }
        let messages = encode(&batch, settings, geo, words, &mut buffer);
        batch.clear();
        if !buffer.is_empty() {
            // A reader that never reads holds the writer here: only a stop
            // ends the wait (what is queued meanwhile is dropped by the
            // answer paths, counted).
            let written = tokio::select! {
                w = write_out(&mut open.write, &buffer) => Some(w),
                _ = stop.cancelled(), if !stopping => None,
            };
            buffer.clear();
            match written {
                Some(Ok(())) => {
                    stats.sent.fetch_add(messages, Relaxed);
                }
                Some(Err(e)) => {
                    stats.dropped.fetch_add(messages, Relaxed);
                    return Closed::Lost(e.to_string());
                }
                None => {
                    stats.dropped.fetch_add(messages, Relaxed);
                    return finish(open).await;
                }
            }
        }
        if stopping {
            return finish(open).await;
        }
        // The queue is drained: let it fill a while before the next read.
        // Meanwhile the writer waits on no queue, so the answer paths'
        // sends wake nobody (one wake-up a query cost more than the rest
        // of the tap), and the output gets a few large writes, not one per
        // query.
        if received < BATCH {
            tokio::select! {
                _ = tokio::time::sleep(PACE) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}

/// Writes `bytes` and flushes them (a file's are then in the file).
async fn write_out(write: &mut Writer, bytes: &[u8]) -> io::Result<()> {
    write.write_all(bytes).await?;
    write.flush().await
}

/// Every message of `batch` as data frames in `buffer`; how many.
fn encode(
    batch: &[Tapped],
    settings: &Settings,
    geo: &ArcSwap<Geo>,
    words: &mut Words,
    buffer: &mut Vec<u8>,
) -> u64 {
    let geo = geo.load();
    let (identity, version) = (&settings.identity, &settings.version);
    let mut n = 0;
    let mut addresses = message::Addresses::default();
    for t in batch {
        addresses.of(&t.seen);
        if settings.queries {
            message::push_frame(
                buffer,
                MessageType::AuthQuery,
                &t.seen,
                &addresses,
                identity,
                version,
                None,
            );
            n += 1;
        }
        if settings.responses {
            let extra = t.steered.as_ref().and_then(|s| words.text(s, &geo));
            message::push_frame(
                buffer,
                MessageType::AuthResponse,
                &t.seen,
                &addresses,
                identity,
                version,
                extra.map(Bytes::from),
            );
            n += 1;
        }
    }
    n
}

/// STOP, and from a socket reader its FINISH (waited for briefly).
async fn finish(mut open: Open) -> Closed {
    let stop = frames::control(Control::Stop, None);
    let sent = tokio::time::timeout(FINISH, async {
        open.write.write_all(&stop).await?;
        open.write.flush().await
    })
    .await;
    if let (Ok(Ok(())), Some(read)) = (sent, open.read.as_mut()) {
        let _ = tokio::time::timeout(FINISH, frames::read_control(read)).await;
    }
    let _ = tokio::time::timeout(FINISH, open.write.shutdown()).await;
    Closed::Stopped
}
