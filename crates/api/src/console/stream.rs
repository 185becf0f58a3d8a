//! The console's live updates: a Server-Sent Events stream that says
//! "change" whenever this device's records, checks or configuration
//! change (an event of its log), a peer's reported record states change,
//! or a peer falls silent or reports again. The page's script then fetches
//! the table again. Nothing here touches the DNS path: the stream waits on
//! the engine's event channel and the peers' change signal, and looks at
//! the peers' reachability every few seconds only while a page is open.

use std::{convert::Infallible, time::Duration};

use axum::{
    extract::{Query, State},
    response::IntoResponse,
    response::sse::{Event, KeepAlive, Sse},
};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

use crate::ApiState;

/// How often a silent peer is looked for (its column greys).
const REACHABILITY_EVERY: Duration = Duration::from_secs(3);
/// Changes this close together are announced once: a probe result brings
/// a check event and a record event at once.
const COALESCE: Duration = Duration::from_millis(200);

/// What a page's live data was made from: the events this device logged
/// and the peers' reports it had. A page carries it (`data-since` on its
/// `#live` element) and the stream takes it back (`?since=`), so that a
/// page that connects right after it was made is not told to fetch again.
pub fn since(state: &ApiState) -> String {
    format!(
        "{}.{}",
        state.engine.events_logged(),
        *state.peers.subscribe().borrow()
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamQuery {
    /// The page's [`since`]: a change is announced at once only when the
    /// state moved on from it (or without it).
    #[serde(default)]
    since: Option<String>,
}

pub async fn stream(
    State(state): State<ApiState>,
    Query(q): Query<StreamQuery>,
) -> impl IntoResponse {
    let reachable = reachability(&state);
    let current = q.since.as_deref() == Some(since(&state).as_str());
    let watcher = Watcher {
        events: state.engine.subscribe_events(),
        peers: state.peers.subscribe(),
        tick: tokio::time::interval(REACHABILITY_EVERY),
        reachable,
        state,
        sent: u64::from(current),
    };
    let changes = futures_util::stream::unfold(watcher, |mut w| async move {
        let n = w.next().await?;
        Some((Ok(Event::default().event("change").data(n.to_string())), w))
    });
    Sse::new(changes_of(changes)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Names the stream's item type for [`Sse`].
fn changes_of(
    s: impl Stream<Item = Result<Event, Infallible>>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    s
}

struct Watcher {
    events: broadcast::Receiver<gtm_engine::Event>,
    peers: watch::Receiver<u64>,
    tick: tokio::time::Interval,
    reachable: Vec<(String, bool)>,
    state: ApiState,
    sent: u64,
}

impl Watcher {
    /// Waits for the next change; `None` when the device shuts down. The
    /// first call answers at once unless the page is current (`sent`
    /// starts at 1 then): a page that (re)connects may have missed
    /// changes.
    async fn next(&mut self) -> Option<u64> {
        if self.sent > 0 {
            loop {
                tokio::select! {
                    r = self.events.recv() => match r {
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                    r = self.peers.changed() => match r {
                        Ok(()) => break,
                        Err(_) => return None,
                    },
                    _ = self.tick.tick() => {
                        let now = reachability(&self.state);
                        if now != self.reachable {
                            self.reachable = now;
                            break;
                        }
                    }
                }
            }
            tokio::time::sleep(COALESCE).await;
            while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) =
                self.events.try_recv()
            {}
            self.peers.borrow_and_update();
        }
        self.sent += 1;
        Some(self.sent)
    }
}

/// Each peer and whether it reports.
fn reachability(state: &ApiState) -> Vec<(String, bool)> {
    state
        .peers
        .devices(&state.replication)
        .into_iter()
        .map(|p| (p.device, p.reachable))
        .collect()
}
