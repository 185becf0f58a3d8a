//! This device's Raft log, beside what openraft does with it: large
//! commands written to their files ahead of their append, elections held
//! off while a large append arrives, and compaction (a snapshot, then the
//! log purged behind it).

use std::sync::atomic::Ordering;

use super::{ClusterNode, WRITE_TIMEOUT, fatal};
use crate::error::ClusterError;
use crate::log_store::{IN_FILE_BYTES, PreWrite};

impl ClusterNode {
    /// Keeps this device from standing for election while the returned
    /// guard lives: held while an append of 1 MiB or more from the leader
    /// is received, decoded and appended. openraft sends the leader's
    /// heartbeats on the stream that carries its appends, so none arrives
    /// while a large one is on its way; a 57 MB whole configuration takes
    /// longer than the election timeout to arrive and be written, and the
    /// follower stood for election during every whole apply, taking the
    /// leadership from a leader that was only busy sending. Standing is
    /// liveness, never safety: the device still answers votes, and stands
    /// again as soon as the append is done (its leader lease renewed by
    /// it) or has failed (its RPC timeout bounds it).
    pub(crate) fn hold_elections(&self) -> ElectionsHeld<'_> {
        if self.large_appends.fetch_add(1, Ordering::SeqCst) == 0 {
            self.raft().runtime_config().elect(false);
        }
        ElectionsHeld { node: self }
    }

    /// Where the Raft log keeps its large commands.
    pub(crate) fn log_files(&self) -> crate::side_files::SideFiles {
        self.store.log_files()
    }

    /// Writes each of `commands` of [`IN_FILE_BYTES`] or more to its file
    /// ahead of the append that will carry it (on the blocking pool), for
    /// the log store to rename rather than write while Raft's core waits.
    /// What cannot be written so is written by the append, as ever.
    pub(crate) async fn prewrite(&self, commands: &[crate::types::Value]) -> Vec<PreWrite> {
        let large: Vec<_> = commands
            .iter()
            .filter(|c| c.len() >= IN_FILE_BYTES)
            .cloned()
            .collect();
        if large.is_empty() {
            return Vec::new();
        }
        let (prewritten, files) = (self.prewritten.clone(), self.store.log_files());
        let written = tokio::task::spawn_blocking(move || {
            large
                .iter()
                .filter_map(|command| match prewritten.write(&files, command) {
                    Ok(guard) => Some(guard),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot write a large command ahead of its append");
                        None
                    }
                })
                .collect()
        })
        .await;
        written.unwrap_or_default()
    }

    /// Builds a snapshot of everything applied, then purges the log up to
    /// it (openraft defers the purge while a member still replicates those
    /// entries). Returns the snapshot's last log index.
    pub async fn compact(&self) -> Result<u64, ClusterError> {
        let raft = self.raft();
        let Some(applied) = raft.metrics().borrow().last_applied else {
            return Err(ClusterError::Invalid(
                "nothing applied yet: nothing to compact".into(),
            ));
        };
        raft.trigger().snapshot().await.map_err(fatal)?;
        let metrics = raft
            .wait(Some(WRITE_TIMEOUT * 3))
            .metrics(
                move |m| m.snapshot.is_some_and(|s| s.index >= applied.index),
                "snapshot built",
            )
            .await
            .map_err(|e| ClusterError::Storage(format!("building a snapshot: {e}")))?;
        let upto = metrics.snapshot.map_or(applied.index, |s| s.index);
        raft.trigger().purge_log(upto).await.map_err(fatal)?;
        Ok(upto)
    }
}

/// Elections held off ([`ClusterNode::hold_elections`]) until this goes.
pub(crate) struct ElectionsHeld<'a> {
    node: &'a ClusterNode,
}

impl Drop for ElectionsHeld<'_> {
    fn drop(&mut self) {
        if self.node.large_appends.fetch_sub(1, Ordering::SeqCst) == 1 && !self.node.frozen {
            self.node.raft().runtime_config().elect(true);
        }
    }
}
