//! Real cluster nodes in one process: each with its own sled directory and
//! its own HTTP server on 127.0.0.1:0. Tests wait on state (the applied
//! watch, the status), never on fixed sleeps.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gtm_cluster::{
    Applied, Backend, ClusterConfig, ClusterError, ClusterNode, ClusterStatus, Effect, FaultSwitch,
    Machine, NodeInfo, NodeState, SECRET_HEADER, Store, Write, rpc_router,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SECRET: &str = "test-cluster-secret";
const WAIT: Duration = Duration::from_secs(20);

struct TestNode {
    id: u64,
    dir: PathBuf,
    addr: SocketAddr,
    node: Arc<ClusterNode>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    /// The commands its log offered its machine to prepare.
    prepared: Prepared,
}

fn info(id: u64, addr: SocketAddr) -> NodeInfo {
    NodeInfo {
        name: format!("gtm-{id}"),
        datacenter: if id == 3 { "dc2" } else { "dc1" }.into(),
        api_addr: format!("http://{addr}"),
    }
}

impl TestNode {
    /// Starts a node on `dir`, serving on `addr` (port 0: a new one).
    async fn start(id: u64, dir: &Path, addr: SocketAddr) -> Self {
        Self::start_timed(id, dir, addr, false).await
    }

    /// `product_timing`: the timing devices run with
    /// (`ClusterConfig::new`); else a slower election, for calm tests.
    async fn start_timed(id: u64, dir: &Path, addr: SocketAddr, product_timing: bool) -> Self {
        Self::start_with(id, dir, addr, product_timing, false, |_| {}).await
    }

    /// `frozen`: as a device on a copy of its store (`ClusterConfig::frozen`).
    async fn start_with(
        id: u64,
        dir: &Path,
        addr: SocketAddr,
        product_timing: bool,
        frozen: bool,
        tune: fn(&mut ClusterConfig),
    ) -> Self {
        Self::start_on(id, dir, addr, product_timing, frozen, tune, &Backend::Sled).await
    }

    /// [`TestNode::start_with`], its store kept by `backend`.
    async fn start_on(
        id: u64,
        dir: &Path,
        addr: SocketAddr,
        product_timing: bool,
        frozen: bool,
        tune: fn(&mut ClusterConfig),
        backend: &Backend,
    ) -> Self {
        let listener = bind(addr).await;
        let addr = listener.local_addr().expect("local addr");
        let store = Store::open_with(dir, backend).expect("open store");
        let mut config = ClusterConfig::new(id, info(id, addr), SECRET);
        config.frozen = frozen;
        if !product_timing {
            config.heartbeat_ms = 100;
            config.election_timeout_ms = (600, 1200);
        }
        tune(&mut config);
        let prepared = Prepared::default();
        let machine = Arc::new(Puts {
            prepared: prepared.clone(),
        });
        let node = ClusterNode::start(&store, config, machine)
            .await
            .expect("start node");
        let (stop, stopped) = oneshot::channel::<()>();
        let app = rpc_router(node.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
        });
        Self {
            id,
            dir: dir.to_path_buf(),
            addr,
            node,
            stop: Some(stop),
            server: Some(server),
            prepared,
        }
    }

    fn info(&self) -> NodeInfo {
        info(self.id, self.addr)
    }

    /// Stops Raft and the HTTP server, releasing the directory.
    async fn kill(mut self) -> (u64, PathBuf, SocketAddr) {
        self.node.shutdown().await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task");
        }
        (self.id, self.dir.clone(), self.addr)
    }

    async fn wait_applied(&self, what: &str, pred: impl Fn(&Applied) -> bool) -> Applied {
        let mut rx = self.node.applied();
        let res = tokio::time::timeout(WAIT, rx.wait_for(|a| pred(a))).await;
        match res {
            Ok(Ok(a)) => a.clone(),
            _ => panic!(
                "node {}: timed out waiting for {what}; status {:?}",
                self.id,
                self.node.status()
            ),
        }
    }

    async fn wait_status(
        &self,
        what: &str,
        pred: impl Fn(&ClusterStatus) -> bool,
    ) -> ClusterStatus {
        self.node
            .wait_status(WAIT, pred)
            .await
            .unwrap_or_else(|e| panic!("node {}: waiting for {what}: {e}", self.id))
    }

    async fn wait_has(&self, key: &str, value: &[u8]) {
        self.wait_applied(&format!("{key}={}", String::from_utf8_lossy(value)), |a| {
            a.kv.get(key).map(|v| &v[..]) == Some(value)
        })
        .await;
    }
}

/// Binds `addr`. A restarted node needs its old port back (peers know it by
/// address), and an outgoing connection may hold that port for a moment.
async fn bind(addr: SocketAddr) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(e) if Instant::now() < deadline => {
                eprintln!("bind {addr}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("bind {addr}: {e}"),
        }
    }
}

/// The simplest application: a command is a batch of writes (JSON),
/// applied as it is; one that does not decode is rejected. A command
/// starting with [`RAW_PUT`] is one put, `key NUL value`, for values too
/// large to spell in JSON.
#[derive(Debug)]
struct Puts {
    prepared: Prepared,
}

/// The index and length of each command offered to `prepare`.
type Prepared = Arc<Mutex<Vec<(u64, usize)>>>;

const RAW_PUT: u8 = 0x01;

fn raw_put(key: &str, value: Vec<u8>) -> Vec<u8> {
    let mut command = vec![RAW_PUT];
    command.extend_from_slice(key.as_bytes());
    command.push(0);
    command.extend(value);
    command
}

impl Machine for Puts {
    fn prepare(&self, index: u64, command: &gtm_cluster::Value) {
        self.prepared
            .lock()
            .expect("prepared")
            .push((index, command.len()));
    }

    fn apply(&self, _kv: &gtm_cluster::Map, _index: u64, command: &[u8]) -> Effect {
        if let Some(rest) = command.strip_prefix(&[RAW_PUT])
            && let Some(nul) = rest.iter().position(|b| *b == 0)
        {
            let (key, value) = rest.split_at(nul);
            return Effect {
                writes: vec![Write::Put {
                    key: String::from_utf8_lossy(key).into_owned(),
                    value: value[1..].to_vec(),
                }],
                outcome: b"applied".to_vec(),
            };
        }
        match serde_json::from_slice::<Vec<Write>>(command) {
            Ok(writes) => Effect {
                writes,
                outcome: b"applied".to_vec(),
            },
            Err(e) => Effect {
                writes: Vec::new(),
                outcome: format!("rejected: {e}").into_bytes(),
            },
        }
    }
}

fn batch(writes: Vec<Write>) -> Vec<u8> {
    serde_json::to_vec(&writes).expect("encode")
}

fn put(key: &str, value: &str) -> Vec<u8> {
    batch(vec![Write::Put {
        key: key.into(),
        value: value.as_bytes().to_vec(),
    }])
}

/// Proposes through `node`, expecting it applied; returns the index this
/// device has applied since.
async fn write(node: &TestNode, command: Vec<u8>) -> u64 {
    let outcome = node.node.propose(command).await.expect("propose");
    assert_eq!(outcome, b"applied", "{}", String::from_utf8_lossy(&outcome));
    node.node.applied().borrow().index
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("addr")
}

/// A cluster of `n` voters, node 1 initialized first and leading.
async fn cluster(root: &Path, n: u64) -> Vec<TestNode> {
    cluster_timed(root, n, false).await
}

/// [`cluster`], with the product's timing when `product_timing`.
async fn cluster_timed(root: &Path, n: u64, product_timing: bool) -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        let dir = root.join(format!("node{id}"));
        nodes.push(TestNode::start_timed(id, &dir, loopback(), product_timing).await);
    }
    nodes[0].node.initialize().await.expect("initialize");
    for other in &nodes[1..] {
        nodes[0]
            .node
            .add_member(other.id, other.info(), true)
            .await
            .expect("add member");
    }
    for node in &nodes {
        node.wait_status("full membership", |s| {
            s.members.len() == n as usize && s.members.iter().all(|m| m.voter) && s.leader.is_some()
        })
        .await;
    }
    nodes
}

/// Waits until every device names the same leader in the same term, that
/// leader has quorum, and every device has applied the leader's whole log;
/// returns the leader's index in `nodes` and its term, read together. (A
/// restarted device may start an election before it hears the leader: its
/// term and state read apart could name a leader that has just lost.)
/// Killing the leader before every device caught up would be a second
/// fault: only one survivor could win.
async fn settled_leader(nodes: &[TestNode]) -> (usize, u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let all: Vec<ClusterStatus> = nodes.iter().map(|n| n.node.status()).collect();
        let leader = all
            .iter()
            .position(|s| s.state == NodeState::Leader && s.quorum);
        if let Some(l) = leader {
            let (id, term) = (all[l].id, all[l].term);
            let last = all[l].last_log_index;
            let settled = all.iter().all(|s| {
                s.term == term
                    && s.members.len() == nodes.len()
                    && s.leader.as_ref().is_some_and(|(lid, _)| *lid == id)
                    && s.applied_index >= last
            });
            if settled {
                return (l, term);
            }
        }
        assert!(Instant::now() < deadline, "no settled leader: {all:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn leader_index(nodes: &[TestNode]) -> usize {
    nodes
        .iter()
        .position(|n| n.node.status().state == NodeState::Leader)
        .expect("a leader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_and_followers_name_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let l = leader_index(&nodes);
    let index = write(&nodes[l], put("config", "v1")).await;
    for node in &nodes {
        node.wait_has("config", b"v1").await;
        assert!(node.node.applied().borrow().index >= index);
    }
    // A batch is applied atomically, deletes included.
    let batch = batch(vec![
        Write::Put {
            key: "a".into(),
            value: b"1".to_vec(),
        },
        Write::Put {
            key: "b".into(),
            value: b"2".to_vec(),
        },
        Write::Delete {
            key: "config".into(),
        },
    ]);
    write(&nodes[l], batch).await;
    for node in &nodes {
        let a = node.wait_applied("batch", |a| a.kv.contains_key("b")).await;
        assert_eq!(a.kv.get("a").map(|v| &v[..]), Some(&b"1"[..]));
        assert!(!a.kv.contains_key("config"));
    }

    // A follower forwards a command to the leader, and the outcome comes
    // back to it.
    let f = (l + 1) % 3;
    write(&nodes[f], put("config", "v2")).await;
    for node in &nodes {
        node.wait_has("config", b"v2").await;
    }
    // A command the application rejects changes nothing, and its outcome
    // says so to the follower that proposed it.
    let outcome = nodes[f]
        .node
        .propose(b"not json".to_vec())
        .await
        .expect("propose");
    assert!(
        outcome.starts_with(b"rejected: "),
        "{}",
        String::from_utf8_lossy(&outcome)
    );
    // Membership changes are not forwarded: the leader is named.
    let err = nodes[f]
        .node
        .add_member(9, info(9, loopback()), false)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClusterError::NotLeader { leader: Some(_) }),
        "{err:?}"
    );

    let status = nodes[l].node.status();
    assert_eq!(status.state, NodeState::Leader);
    assert_eq!(status.members.len(), 3);
    for m in status.members.iter().filter(|m| m.id != nodes[l].id) {
        assert!(m.last_contact_ms.is_some_and(|ms| ms < 5_000), "{m:?}");
    }
    for node in nodes {
        node.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_replicates_and_losing_the_follower_is_no_quorum() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 2).await;
    let index = write(&nodes[0], put("config", "pair")).await;
    for node in &nodes {
        node.wait_has("config", b"pair").await;
        assert!(node.node.applied().borrow().index >= index);
    }
    assert!(
        nodes[0].node.status().quorum,
        "{:?}",
        nodes[0].node.status()
    );
    let follower = nodes.pop().unwrap();
    let lost = follower.info();
    follower.kill().await;

    // The cut-off leader shows it: still Leader, without a quorum.
    let status = nodes[0]
        .wait_status("leader without quorum", |s| !s.quorum)
        .await;
    assert_eq!(status.state, NodeState::Leader, "{status:?}");
    let log_before = status.last_log_index;

    // Refused before it was proposed: it will never apply.
    let err = nodes[0]
        .node
        .propose(put("config", "lost"))
        .await
        .unwrap_err();
    match &err {
        ClusterError::NoQuorum { unreachable } => assert_eq!(unreachable, &vec![lost.clone()]),
        other => panic!("want NoQuorum, got {other:?}"),
    }
    assert!(err.to_string().contains(&lost.name), "{err}");
    // Nothing was proposed: the leader's log did not grow.
    assert_eq!(nodes[0].node.status().last_log_index, log_before);
    // DNS keeps answering: the applied state is still there.
    assert_eq!(
        nodes[0]
            .node
            .applied()
            .borrow()
            .kv
            .get("config")
            .map(|v| &v[..]),
        Some(&b"pair"[..])
    );
    for node in nodes {
        node.kill().await;
    }
}

/// A device that does not catch up (here: one that refuses the cluster's
/// secret, as a slow snapshot would look) is not made a voter, nor left a
/// learner: the join fails saying why, and the cluster writes as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_does_not_catch_up_is_not_left_half_added() {
    let root = tempfile::tempdir().unwrap();
    let one = TestNode::start_with(1, &root.path().join("one"), loopback(), false, false, |c| {
        c.join_timeout = Duration::from_secs(2);
    })
    .await;
    one.node.initialize().await.expect("initialize");
    one.wait_status("leader", |s| s.state == NodeState::Leader)
        .await;
    write(&one, put("config", "before")).await;
    // Another cluster's device: it answers, but refuses this secret.
    let stranger = {
        let listener = bind(loopback()).await;
        let addr = listener.local_addr().unwrap();
        let store = Store::open(&root.path().join("two")).unwrap();
        let config = ClusterConfig::new(2, info(2, addr), "another-secret");
        let node = ClusterNode::start(
            &store,
            config,
            Arc::new(Puts {
                prepared: Prepared::default(),
            }),
        )
        .await
        .unwrap();
        let app = rpc_router(node.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (node, addr)
    };
    let err = one
        .node
        .add_member(2, info(2, stranger.1), true)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("did not catch up with the cluster within 2 s"),
        "{err}"
    );
    let status = one
        .wait_status("the learner removed", |s| s.members.len() == 1)
        .await;
    assert_eq!(status.members[0].id, 1, "{status:?}");
    // Not wedged: a write commits with this device alone.
    write(&one, put("config", "after")).await;
    one.wait_has("config", b"after").await;
    stranger.0.shutdown().await;
    one.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivor_of_a_pair_recovers_with_force_single() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 2).await;
    write(&nodes[0], put("config", "before")).await;
    nodes[1].wait_has("config", b"before").await;

    // Lose the leader: the survivor has no quorum.
    let leader = nodes.remove(0);
    let lost = leader.info();
    leader.kill().await;
    let survivor = &nodes[0];
    // Until it misses heartbeats, a follower still names the old leader.
    survivor
        .wait_status("the loss noticed", |s| s.state == NodeState::Candidate)
        .await;
    let err = survivor
        .node
        .propose(put("config", "after"))
        .await
        .unwrap_err();
    match &err {
        ClusterError::NoQuorum { unreachable } => assert_eq!(unreachable, &vec![lost]),
        other => panic!("want NoQuorum, got {other:?}"),
    }

    survivor.node.force_single().await.expect("force_single");
    let status = survivor.node.status();
    assert_eq!(status.state, NodeState::Leader);
    assert_eq!(status.members.len(), 1);
    assert_eq!(status.members[0].id, survivor.id);
    assert!(status.members[0].voter);
    write(survivor, put("config", "after")).await;
    survivor.wait_has("config", b"after").await;

    // The recovery survives a restart.
    let (id, dir, addr) = nodes.pop().unwrap().kill().await;
    let again = TestNode::start(id, &dir, addr).await;
    again
        .wait_status("sole leader again", |s| s.state == NodeState::Leader)
        .await;
    assert_eq!(again.node.status().members.len(), 1);
    write(&again, put("config", "restarted")).await;
    again.wait_has("config", b"restarted").await;
    again.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_node_keeps_membership_and_data_and_catches_up() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let l = leader_index(&nodes);
    write(&nodes[l], put("k1", "one")).await;
    for node in &nodes {
        node.wait_has("k1", b"one").await;
    }
    let victim = if l == 2 { 1 } else { 2 };
    let (id, dir, addr) = nodes.remove(victim).kill().await;
    let l = leader_index(&nodes);
    write(&nodes[l], put("k2", "two")).await;

    let back = TestNode::start(id, &dir, addr).await;
    // From its own disk, before hearing from anyone.
    assert_eq!(
        back.node.applied().borrow().kv.get("k1").map(|v| &v[..]),
        Some(&b"one"[..])
    );
    assert_eq!(
        back.node.status().members.len(),
        3,
        "membership survives a restart"
    );
    back.wait_has("k2", b"two").await;
    let status = back
        .wait_status("following", |s| {
            s.state == NodeState::Follower && s.leader.is_some()
        })
        .await;
    assert_eq!(status.members.len(), 3);
    back.kill().await;
    for node in nodes {
        node.kill().await;
    }
}

/// A node on a copy of its store (a device whose data directory is
/// read-only) takes no part in Raft: it takes no entry, grants no vote and
/// does not campaign, so nothing it would lose is ever decided with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_takes_no_entry_and_grants_no_vote() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let l = leader_index(&nodes);
    write(&nodes[l], put("k1", "one")).await;
    for node in &nodes {
        node.wait_has("k1", b"one").await;
    }
    let victim = if l == 2 { 1 } else { 2 };
    let (id, dir, addr) = nodes.remove(victim).kill().await;
    let frozen = TestNode::start_with(id, &dir, addr, false, true, |_| {}).await;
    let term = frozen.node.status().term;
    assert_eq!(
        frozen.node.applied().borrow().kv.get("k1").map(|v| &v[..]),
        Some(&b"one"[..]),
        "it serves what its store holds"
    );
    let refused = frozen.node.propose(put("k9", "nine")).await.unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");

    // The leader goes: the survivor campaigns again and again, but the
    // frozen node grants no vote, so no leader can be elected.
    let l = leader_index(&nodes);
    let _ = nodes.remove(l).kill().await;
    let survivor = nodes.pop().unwrap();
    survivor
        .wait_status("campaigning", |s| s.term >= term + 3)
        .await;
    let status = frozen.node.status();
    assert_eq!(status.term, term, "the frozen node took a term: {status:?}");
    assert_ne!(status.state, NodeState::Leader);
    assert_ne!(survivor.node.status().state, NodeState::Leader);

    // Unfrozen (its directory writable again), it votes: a leader again.
    let (id, dir, addr) = frozen.kill().await;
    let back = TestNode::start(id, &dir, addr).await;
    back.wait_status("a leader", |s| s.leader.is_some()).await;
    survivor
        .wait_status("a leader", |s| s.leader.is_some())
        .await;
    let nodes = [back, survivor];
    let l = leader_index(&nodes);
    write(&nodes[l], put("k2", "two")).await;
    for node in &nodes {
        node.wait_has("k2", b"two").await;
    }
    for node in nodes {
        node.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_node_rejoins_through_a_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let l = leader_index(&nodes);
    write(&nodes[l], put("k1", "one")).await;
    let victim = if l == 2 { 1 } else { 2 };
    let (id, dir, _) = nodes.remove(victim).kill().await;
    std::fs::remove_dir_all(&dir).expect("wipe");
    let l = leader_index(&nodes);
    nodes[l]
        .node
        .remove_member(id)
        .await
        .expect("remove member");
    for i in 0..5 {
        write(&nodes[l], put(&format!("key{i}"), "x")).await;
    }
    let snap = nodes[l].node.compact().await.expect("compact");
    nodes[l]
        .wait_status("log purged up to the snapshot", |s| {
            s.purged_index.is_some_and(|p| p >= snap)
        })
        .await;

    let fresh = TestNode::start(id, &dir, loopback()).await;
    assert_eq!(fresh.node.applied().borrow().index, 0);
    nodes[l]
        .node
        .add_member(id, fresh.info(), true)
        .await
        .expect("re-add");
    let applied = fresh
        .wait_applied("snapshot content", |a| a.kv.contains_key("key4"))
        .await;
    assert_eq!(applied.kv.get("k1").map(|v| &v[..]), Some(&b"one"[..]));
    let status = fresh
        .wait_status("a voter", |s| {
            s.members.iter().any(|m| m.id == id && m.voter)
        })
        .await;
    assert!(
        status.snapshot_index.is_some_and(|s| s >= snap),
        "caught up through a snapshot: {status:?}"
    );
    // And it follows new writes.
    write(&nodes[l], put("k9", "nine")).await;
    fresh.wait_has("k9", b"nine").await;
    fresh.kill().await;
    for node in nodes {
        node.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_without_the_secret_is_unauthorized() {
    let root = tempfile::tempdir().unwrap();
    let node = TestNode::start(1, &root.path().join("node1"), loopback()).await;
    // reqwest is built without a default TLS provider: name one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    for route in ["append", "vote", "snapshot"] {
        let url = format!("http://{}/cluster/v1/{route}", node.addr);
        let none = client
            .post(&url)
            .body(vec![0xffu8; 4])
            .send()
            .await
            .unwrap();
        assert_eq!(none.status(), reqwest::StatusCode::UNAUTHORIZED, "{route}");
        let wrong = client
            .post(&url)
            .header(SECRET_HEADER, "not-the-secret")
            .body(vec![0xffu8; 4])
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), reqwest::StatusCode::UNAUTHORIZED, "{route}");
        // The right secret passes authentication (the body is not bincode).
        let right = client
            .post(&url)
            .header(SECRET_HEADER, SECRET)
            .body(vec![0xffu8; 4])
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), reqwest::StatusCode::BAD_REQUEST, "{route}");
    }
    node.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninitialized_node_refuses_writes_and_double_initialize() {
    let root = tempfile::tempdir().unwrap();
    let node = TestNode::start(1, &root.path().join("node1"), loopback()).await;
    let err = node.node.propose(put("k", "v")).await.unwrap_err();
    assert!(matches!(err, ClusterError::Invalid(_)), "{err:?}");
    node.node.initialize().await.expect("initialize");
    let err = node.node.initialize().await.unwrap_err();
    assert!(matches!(err, ClusterError::Invalid(_)), "{err:?}");
    assert_eq!(write(&node, put("k", "v")).await, 2);
    node.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_applies_a_30_mb_entry_without_an_election_and_a_new_node_gets_it_in_chunks() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 2).await;
    write(&nodes[0], put("small", "first")).await;
    nodes[1].wait_has("small", b"first").await;
    let term = nodes[0].node.status().term;

    // One entry of 30 MB: its append RPC outlives the 100 ms openraft
    // gives each append, and is not cancelled and resent from scratch.
    let big: Vec<u8> = (0..30_000_000u32).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    write(&nodes[0], raw_put("big", big.clone())).await;
    nodes[1]
        .wait_applied("the 30 MB value", |a| {
            a.kv.get("big").is_some_and(|v| v.len() == big.len())
        })
        .await;
    eprintln!("30 MB entry applied on both in {:?}", started.elapsed());
    // Each device's log offered the large command to its machine, at its
    // index, before applying it; the small ones were not offered.
    let index = nodes[0].node.applied().borrow().index;
    for node in &nodes {
        let prepared = node.prepared.lock().expect("prepared").clone();
        assert_eq!(prepared, [(index, big.len() + 5)], "node {}", node.id);
    }
    for node in &nodes {
        assert_eq!(
            node.node.applied().borrow().kv.get("big").map(|v| &v[..]),
            Some(&big[..]),
            "node {}",
            node.id
        );
        assert_eq!(
            node.node.status().term,
            term,
            "no election on node {}",
            node.id
        );
    }
    // Over the limit: refused before it is proposed.
    let over = raw_put("over", vec![0; gtm_cluster::MAX_COMMAND_BYTES]);
    let err = nodes[0].node.propose(over).await.unwrap_err();
    assert!(matches!(err, ClusterError::Invalid(_)), "{err:?}");

    // A new device joins after the log is purged: the snapshot (over 30 MB,
    // 4 MiB chunks) is its only way to the value.
    let snap = nodes[0].node.compact().await.expect("compact");
    nodes[0]
        .wait_status("log purged up to the snapshot", |s| {
            s.purged_index.is_some_and(|p| p >= snap)
        })
        .await;
    let fresh = TestNode::start(3, &root.path().join("node3"), loopback()).await;
    nodes[0]
        .node
        .add_member(3, fresh.info(), true)
        .await
        .expect("add the new device");
    let applied = fresh
        .wait_applied("the snapshot", |a| a.kv.contains_key("big"))
        .await;
    assert_eq!(applied.kv.get("big").map(|v| &v[..]), Some(&big[..]));
    assert_eq!(applied.kv.get("small").map(|v| &v[..]), Some(&b"first"[..]));
    // Its metrics follow the install a moment later.
    fresh
        .wait_status("the snapshot installed", |s| {
            s.snapshot_index.is_some_and(|s| s >= snap)
        })
        .await;
    assert_eq!(nodes[0].node.status().term, term, "no election");
    nodes.push(fresh);
    for node in nodes {
        node.kill().await;
    }
}

/// With the product's timing (elections after 150–300 ms without a
/// heartbeat), a pair takes a 60 MB entry without an election: openraft
/// sends no heartbeat while an append is on its way, and receiving,
/// writing and appending this one takes longer than that, so the follower
/// holds its candidacy while a large append arrives. The command is
/// written to its file before Raft's core appends it, on both devices,
/// and what was written ahead is renamed, not left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_with_product_timing_takes_a_60_mb_entry_without_an_election() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster_timed(root.path(), 2, true).await;
    write(&nodes[0], put("small", "first")).await;
    nodes[1].wait_has("small", b"first").await;
    let term = nodes[0].node.status().term;

    let big: Vec<u8> = (0..60_000_000u32).map(|i| (i % 253) as u8).collect();
    write(&nodes[0], raw_put("big", big.clone())).await;
    nodes[1]
        .wait_applied("the 60 MB value", |a| {
            a.kv.get("big").is_some_and(|v| v.len() == big.len())
        })
        .await;
    let index = nodes[0].node.applied().borrow().index;
    for node in &nodes {
        assert_eq!(
            node.node.status().term,
            term,
            "no election on node {}",
            node.id
        );
        let mut files: Vec<String> = std::fs::read_dir(node.dir.join("raft-log"))
            .expect("raft-log")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), 1, "node {}: {files:?}", node.id);
        assert!(
            files[0].starts_with(&format!("{index}-")) && files[0].ends_with(".command"),
            "node {}: {files:?}",
            node.id
        );
    }
    for node in nodes {
        node.kill().await;
    }
}

/// Failover with the product's timing: kill the leader of three, time until
/// a survivor leads, bring the old one back, ten times. Prints the figures
/// (docs/cluster.md); asserts only that each failover completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_timing_of_three_nodes() {
    const RUNS: usize = 10;
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let dir = root.path().join(format!("node{id}"));
        nodes.push(TestNode::start_timed(id, &dir, loopback(), true).await);
    }
    nodes[0].node.initialize().await.expect("initialize");
    for i in 1..3 {
        let (id, info) = (nodes[i].id, nodes[i].info());
        nodes[0].node.add_member(id, info, true).await.expect("add");
    }
    let mut times = Vec::new();
    for run in 0..RUNS {
        let (l, term) = settled_leader(&nodes).await;
        let victim = nodes.remove(l);
        let killed = Instant::now();
        let (id, dir, addr) = victim.kill().await;
        let stopped = Instant::now();
        let deadline = killed + WAIT;
        loop {
            let led = nodes.iter().any(|n| {
                let s = n.node.status();
                s.state == NodeState::Leader && s.term > term
            });
            if led {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run {run}: no new leader after term {term}; the survivors: {:#?}",
                nodes.iter().map(|n| n.node.status()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let took = killed.elapsed();
        eprintln!(
            "failover run {run}: new leader after {took:?} (the kill took {:?})",
            stopped - killed
        );
        times.push(took);
        nodes.push(TestNode::start_timed(id, &dir, addr, true).await);
    }
    times.sort();
    eprintln!(
        "failover over {RUNS} runs: p50 {:?}, max {:?}",
        times[RUNS / 2],
        times[RUNS - 1]
    );
    for node in nodes {
        node.kill().await;
    }
}

/// A device whose store fails under Raft (the disk refuses writes and
/// flushes) reports it as a storage error: the proposal is refused with
/// `Storage`, naming the cause, neither hanging nor panicking, and so is
/// the next one; Raft stops (its status says `Shutdown`) and what was
/// applied before stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failing_under_raft_is_a_storage_error_not_a_hang() {
    let root = tempfile::tempdir().expect("tempdir");
    let switch = FaultSwitch::new();
    let backend = Backend::Sled.with_faults(&switch);
    let node = TestNode::start_on(1, root.path(), loopback(), false, false, |_| {}, &backend).await;
    node.node.initialize().await.expect("initialize");
    write(&node, put("before", "1")).await;

    switch.fail_writes();
    switch.fail_flushes();
    for attempt in ["first", "second"] {
        let refused = tokio::time::timeout(WAIT, node.node.propose(put("after", "2")))
            .await
            .unwrap_or_else(|_| panic!("the {attempt} proposal hung"));
        match refused {
            Err(ClusterError::Storage(why)) => assert!(why.contains("fault switch"), "{why}"),
            other => panic!("the {attempt} proposal: {other:?}"),
        }
    }
    assert!(switch.injected() > 0);
    let applied = node.node.applied().borrow().clone();
    assert_eq!(applied.kv.get("before").map(|v| &v[..]), Some(&b"1"[..]));
    assert!(!applied.kv.contains_key("after"));
    // Raft stopped on the error, and says so, with the error.
    let status = node.node.status();
    assert_eq!(status.state, NodeState::Shutdown);
    let failure = status.failure.expect("a failed Raft names its failure");
    assert!(
        failure.starts_with("Raft storage failed: ") && failure.contains("fault switch"),
        "{failure}"
    );
    node.kill().await;
}
