//! A device's own copy of the configuration it serves, for restarts: the
//! last committed one and, while that one did not install here, the last
//! good one.
//!
//! Each is kept as a list of parts ([`crate::parts`]) under a key of the
//! default tree, each part once in a file of `config-parts/` named by its
//! hash ([`SideFiles`]), so that keeping a configuration that changed in
//! one place writes that place and a list, not the whole text again.
//! The parts are in files, not in a tree: an engine keeps what it is given
//! in its cache (sled did), and the parts are read only when the device
//! starts (a 100,000-record configuration held 8 MiB of each device's
//! memory so).
//! Layouts written before still read: parts in the tree `config-parts`
//! move to files when the store opens, and whole texts (under `config`
//! and `config-last-good`) are replaced by the next save.

use std::collections::HashSet;
use std::path::Path;

use bincode::{Decode, Encode};

use crate::db::{DbError, Tree};
use crate::side_files::{Checked, SideFiles};
use crate::{Store, StoreError, parts, types};

/// The parts of the committed configuration: a [`Listed`].
const LIST_KEY: &[u8] = b"config-list";
/// Present only while the committed configuration did not install on this
/// device: the last one that did (`Option<Listed>`, `None`: there was none).
const LAST_GOOD_LIST_KEY: &[u8] = b"config-last-good-list";
/// The layout before parts: a whole [`StoredConfig`] (or [`StoredConfigV1`]).
const CONFIG_KEY: &[u8] = b"config";
/// The layout before parts: an optional whole [`StoredConfig`].
const LAST_GOOD_KEY: &[u8] = b"config-last-good";
/// The tree the parts were kept in before files: hash → bytes.
const PARTS_TREE: &str = "config-parts";
/// The directory of the parts' files, in the data directory.
const PARTS_DIR: &str = "config-parts";

/// The files of the parts, in the data directory `dir`.
pub(crate) fn part_files(dir: &Path) -> SideFiles {
    SideFiles::new(dir.join(PARTS_DIR), ".part")
}

/// A part of a text by name: the hash of its bytes
/// ([`parts::part_hash`]) and their length.
pub type PartName = ([u8; 16], u64);

/// The applied replicated configuration: its version, its text, and per
/// domain the version that last changed it (the zones' SOA serials).
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct StoredConfig {
    pub version: u64,
    pub text: String,
    pub zone_versions: Vec<(String, u64)>,
}

impl StoredConfig {
    /// This configuration to keep: its text cut here.
    pub fn kept(&self) -> KeptConfig<'_> {
        KeptConfig {
            version: self.version,
            parts: parts::named(self.text.as_bytes()),
            zone_versions: self.zone_versions.clone(),
        }
    }
}

/// A configuration to keep: its version, its text's parts in order (each
/// by the name [`parts::part_hash`] gives its bytes), and per domain the
/// version that last changed it. Given the parts the replicated map holds
/// the text in, the store neither joins nor cuts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptConfig<'a> {
    pub version: u64,
    pub parts: Vec<([u8; 16], parts::Part<'a>)>,
    pub zone_versions: Vec<(String, u64)>,
}

/// A kept configuration as its parts' names and lengths.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
struct Listed {
    version: u64,
    parts: Vec<([u8; 16], u64)>,
    zone_versions: Vec<(String, u64)>,
}

/// [`StoredConfig`] as devices kept it before zone versions.
#[derive(Decode)]
struct StoredConfigV1 {
    version: u64,
    text: String,
}

impl From<StoredConfigV1> for StoredConfig {
    fn from(c: StoredConfigV1) -> Self {
        Self {
            version: c.version,
            text: c.text,
            zone_versions: Vec::new(),
        }
    }
}

/// An optional configuration before zone versions.
#[derive(Decode)]
struct OptionalV1(Option<StoredConfigV1>);

impl From<OptionalV1> for Option<StoredConfig> {
    fn from(c: OptionalV1) -> Self {
        c.0.map(Into::into)
    }
}

/// Reads a stored `T` (a configuration, or an optional one), in this
/// layout or the one before zone versions (`V1`).
fn decode_whole<T: Decode<()>, V1: Decode<()> + Into<T>>(
    bytes: &[u8],
) -> Result<T, bincode::error::DecodeError> {
    match bincode::decode_from_slice::<T, _>(bytes, types::decoding()) {
        Ok((config, _)) => Ok(config),
        Err(e) => bincode::decode_from_slice::<V1, _>(bytes, types::decoding())
            .map(|(old, _)| old.into())
            .map_err(|_| e),
    }
}

fn corrupt(what: &'static str) -> impl Fn(bincode::error::DecodeError) -> StoreError {
    move |e| StoreError::Corrupt {
        what,
        why: e.to_string(),
    }
}

fn io(action: &'static str) -> impl Fn(DbError) -> StoreError {
    move |source| StoreError::Io { action, source }
}

fn file_io(action: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |e| StoreError::Io {
        action,
        source: DbError::Io(e),
    }
}

fn encode<T: Encode>(value: &T) -> Result<Vec<u8>, StoreError> {
    bincode::encode_to_vec(value, bincode::config::standard()).map_err(|e| StoreError::Corrupt {
        what: "configuration",
        why: e.to_string(),
    })
}

impl Store {
    /// The tree the parts were kept in before files.
    fn parts_tree(&self) -> Result<Tree, StoreError> {
        self.db
            .open_tree(PARTS_TREE)
            .map_err(io("opening the configuration's parts"))
    }

    /// The committed configuration this device keeps, if any.
    pub fn load_config(&self) -> Result<Option<StoredConfig>, StoreError> {
        if let Some(bytes) = self
            .default_tree
            .get(LIST_KEY)
            .map_err(io("reading the configuration"))?
        {
            let listed: Listed = decode(&bytes, "configuration")?;
            return self.join(listed).map(Some);
        }
        let Some(bytes) = self
            .default_tree
            .get(CONFIG_KEY)
            .map_err(io("reading the configuration"))?
        else {
            return Ok(None);
        };
        decode_whole::<StoredConfig, StoredConfigV1>(&bytes)
            .map(Some)
            .map_err(corrupt("configuration"))
    }

    /// Saves a configuration this device installed, and flushes: when this
    /// returns, the configuration survives a crash. Being installed, it is
    /// the last good one too: a kept older one is dropped.
    pub fn save_config(&self, config: &KeptConfig) -> Result<(), StoreError> {
        let held = self.held_lists()?;
        let listed = self.keep_parts(config, &held)?;
        let mut batch = self.db.batch();
        batch.insert(&self.default_tree, LIST_KEY, encode(&listed)?);
        for key in [CONFIG_KEY, LAST_GOOD_KEY, LAST_GOOD_LIST_KEY] {
            batch.remove(&self.default_tree, key);
        }
        batch.apply().map_err(io("writing the configuration"))?;
        // The list that names the new parts is durable before the parts
        // only the list before named go: a crash in between reads the
        // new list, never the old one without its parts.
        self.flush_config()?;
        self.drop_parts(&held, &[&listed])?;
        #[cfg(test)]
        tests::crash_point();
        Ok(())
    }

    /// Saves a committed configuration that did not install on this device,
    /// keeping the one it replaces as the last good one (unless one is kept
    /// already: that one is older and did install). Flushes.
    pub fn save_uninstalled(&self, config: &KeptConfig) -> Result<(), StoreError> {
        let held = self.held_lists()?;
        let listed = self.keep_parts(config, &held)?;
        let kept_good = self.last_good_listed()?;
        let good = match kept_good {
            Some(good) => good,
            // The one it replaces becomes the last good one.
            None => match self.load_config()? {
                Some(previous) => Some(self.keep_parts(&previous.kept(), &held)?),
                None => None,
            },
        };
        let mut batch = self.db.batch();
        batch.insert(&self.default_tree, LIST_KEY, encode(&listed)?);
        batch.insert(&self.default_tree, LAST_GOOD_LIST_KEY, encode(&good)?);
        batch.remove(&self.default_tree, CONFIG_KEY);
        batch.remove(&self.default_tree, LAST_GOOD_KEY);
        batch.apply().map_err(io("writing the configuration"))?;
        let mut lists = vec![&listed];
        lists.extend(good.as_ref());
        self.flush_config()?;
        self.drop_parts(&held, &lists)
    }

    /// The last configuration this device installed, when the committed
    /// one did not install: `None` when the committed one is good (or
    /// nothing is kept), `Some(None)` when no configuration ever installed.
    pub fn last_good_config(&self) -> Result<Option<Option<StoredConfig>>, StoreError> {
        if let Some(good) = self.last_good_listed()? {
            return match good {
                Some(listed) => self.join(listed).map(|c| Some(Some(c))),
                None => Ok(Some(None)),
            };
        }
        Ok(None)
    }

    /// The last good configuration as its list, also when it was kept in
    /// the layout before parts (its parts are written then).
    fn last_good_listed(&self) -> Result<Option<Option<Listed>>, StoreError> {
        let read = io("reading the last good configuration");
        if let Some(bytes) = self.default_tree.get(LAST_GOOD_LIST_KEY).map_err(&read)? {
            return decode(&bytes, "last good configuration").map(Some);
        }
        let Some(bytes) = self.default_tree.get(LAST_GOOD_KEY).map_err(&read)? else {
            return Ok(None);
        };
        let whole = decode_whole::<Option<StoredConfig>, OptionalV1>(&bytes)
            .map_err(corrupt("last good configuration"))?;
        match whole {
            Some(config) => self
                .keep_parts(&config.kept(), &self.held_lists()?)
                .map(|l| Some(Some(l))),
            None => Ok(Some(None)),
        }
    }

    /// The lists of parts kept now (the committed configuration's and the
    /// last good one's): every part they name has its file.
    fn held_lists(&self) -> Result<Vec<Listed>, StoreError> {
        let read = io("reading the configuration");
        let mut lists = Vec::new();
        if let Some(bytes) = self.default_tree.get(LIST_KEY).map_err(&read)? {
            lists.push(decode::<Listed>(&bytes, "configuration")?);
        }
        if let Some(bytes) = self.default_tree.get(LAST_GOOD_LIST_KEY).map_err(&read)? {
            lists.extend(decode::<Option<Listed>>(&bytes, "last good configuration")?);
        }
        Ok(lists)
    }

    /// Writes the parts of `config` that have no file yet (those a list in
    /// `held` names are there), and returns its list.
    fn keep_parts(&self, config: &KeptConfig, held: &[Listed]) -> Result<Listed, StoreError> {
        let there = named_in(held.iter());
        let mut new: Vec<(String, &[u8])> = Vec::new();
        let mut list = Vec::with_capacity(config.parts.len());
        for (hash, part) in &config.parts {
            let name = hex(hash);
            if !there.contains(hash) && !self.config_parts.path(&name).exists() {
                new.push((name, part.bytes()));
            }
            list.push((*hash, part.len() as u64));
        }
        let new: Vec<(&str, &[u8])> = new.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        self.config_parts
            .write_all(&new)
            .map_err(file_io("writing the configuration's parts"))?;
        Ok(Listed {
            version: config.version,
            parts: list,
            zone_versions: config.zone_versions.clone(),
        })
    }

    /// The configuration a list names, its parts joined.
    fn join(&self, listed: Listed) -> Result<StoredConfig, StoreError> {
        let total = listed.parts.iter().map(|(_, len)| *len as usize).sum();
        let mut text = Vec::with_capacity(total);
        for &(hash, len) in &listed.parts {
            let part = self
                .config_parts
                .read(&hex(&hash), Checked { len, hash })
                .map_err(|e| StoreError::Corrupt {
                    what: "configuration",
                    why: format!("its part {}: {e}", hex(&hash)),
                })?;
            text.extend_from_slice(&part);
        }
        let text = String::from_utf8(text).map_err(|e| StoreError::Corrupt {
            what: "configuration",
            why: e.to_string(),
        })?;
        Ok(StoredConfig {
            version: listed.version,
            text,
            zone_versions: listed.zone_versions,
        })
    }

    /// Removes the parts the lists `held` named that no list in `kept`
    /// names.
    fn drop_parts(&self, held: &[Listed], kept: &[&Listed]) -> Result<(), StoreError> {
        let named = named_in(kept.iter().copied());
        let gone: Vec<String> = named_in(held.iter())
            .into_iter()
            .filter(|hash| !named.contains(hash))
            .map(|hash| hex(hash))
            .collect();
        self.config_parts
            .remove(&gone)
            .map_err(file_io("removing the configuration's old parts"))
    }

    /// Removes the parts no kept list names (left by a save that stopped
    /// between writing its parts and its list): done when the store opens.
    pub(crate) fn drop_unnamed_parts(&self) -> Result<(), StoreError> {
        let held = self.held_lists()?;
        let named: Vec<String> = named_in(held.iter()).into_iter().map(|h| hex(h)).collect();
        self.config_parts
            .keep_only(&named)
            .map_err(file_io("removing the configuration's old parts"))
    }

    /// Moves the parts a store kept in its tree (before files) to files:
    /// written and synced before the tree is emptied, so a crash between
    /// the two moves them again.
    pub(crate) fn move_parts_to_files(&self) -> Result<(), StoreError> {
        let exists = self
            .db
            .has_tree(PARTS_TREE)
            .map_err(io("reading the configuration's parts"))?;
        if !exists {
            return Ok(());
        }
        let tree = self.parts_tree()?;
        let read = io("reading the configuration's parts");
        let parts: Vec<(String, types::Value)> = tree
            .iter()
            .map(|item| item.map(|(k, v)| (hex(&k), v)))
            .collect::<Result<_, _>>()
            .map_err(read)?;
        let files: Vec<(&str, &[u8])> = parts.iter().map(|(n, v)| (n.as_str(), &v[..])).collect();
        self.config_parts
            .write_all(&files)
            .map_err(file_io("moving the configuration's parts to files"))?;
        drop((parts, tree));
        self.db
            .drop_tree(PARTS_TREE)
            .map_err(io("removing the tree of the configuration's parts"))?;
        self.flush_config()
    }

    fn flush_config(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(io("flushing the configuration"))?;
        Ok(())
    }
}

fn decode<T: Decode<()>>(bytes: &[u8], what: &'static str) -> Result<T, StoreError> {
    bincode::decode_from_slice(bytes, types::decoding())
        .map(|(value, _)| value)
        .map_err(corrupt(what))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The names of the parts the lists name.
fn named_in<'a>(lists: impl Iterator<Item = &'a Listed>) -> HashSet<&'a [u8; 16]> {
    lists
        .flat_map(|l| l.parts.iter().map(|(hash, _)| hash))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Backend;
    use crate::db::on_each_engine;

    thread_local! {
        /// Set in a child process: it aborts once a save has removed the
        /// parts only the list before named.
        static ABORT_AFTER_SAVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    pub(super) fn crash_point() {
        if ABORT_AFTER_SAVE.with(std::cell::Cell::get) {
            std::process::abort();
        }
    }

    /// The environment variable that makes the crash test its own child.
    const CRASH_CHILD: &str = "GTM_STORE_CRASH_CHILD";

    /// A device killed right after a save removed the parts that only the
    /// list before named reads the new configuration whole: the new list
    /// is durable before any part goes. The save and the crash are a
    /// child process, this test run again, which aborts at that point.
    #[test]
    fn a_crash_right_after_a_save_leaves_the_new_configuration_whole() {
        let config = |version, changed| StoredConfig {
            version,
            text: domains(50, changed),
            zone_versions: Vec::new(),
        };
        if let Some(dir) = std::env::var_os(CRASH_CHILD) {
            let store = Store::open(Path::new(&dir)).unwrap();
            ABORT_AFTER_SAVE.with(|a| a.set(true));
            store.save_config(&config(3, Some(7)).kept()).unwrap();
            unreachable!("the save aborts");
        }
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().to_path_buf();
        let store = Store::open(&dir).unwrap();
        store.save_config(&config(2, Some(3)).kept()).unwrap();
        let before = part_count(&store);
        drop(store);
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "config_store::tests::a_crash_right_after_a_save_leaves_the_new_configuration_whole",
                "--test-threads=1",
            ])
            .env(CRASH_CHILD, &dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!child.success(), "the child aborted in its save");
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.load_config().unwrap(), Some(config(3, Some(7))));
        assert!(part_count(&store) <= before, "the old parts went");
    }

    /// The layout a gtm before zone versions wrote.
    #[derive(Encode)]
    struct Before {
        version: u64,
        text: String,
    }

    /// A store on `backend` in a new directory, kept while the store is.
    fn open(backend: &Backend) -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (Store::open_with(dir.path(), backend).unwrap(), dir)
    }

    on_each_engine! {
        fn a_configuration_kept_before_zone_versions_still_reads(backend: Backend) {
            let (store, _dir) = open(&backend);
            let before = Before {
                version: 7,
                text: "old".into(),
            };
            let standard = bincode::config::standard();
            store
                .default_tree
                .insert(
                    CONFIG_KEY,
                    bincode::encode_to_vec(&before, standard).unwrap(),
                )
                .unwrap();
            store
                .default_tree
                .insert(
                    LAST_GOOD_KEY,
                    bincode::encode_to_vec(Some(&before), standard).unwrap(),
                )
                .unwrap();
            let read = StoredConfig {
                version: 7,
                text: "old".into(),
                zone_versions: Vec::new(),
            };
            assert_eq!(store.load_config().unwrap(), Some(read.clone()));
            assert_eq!(store.last_good_config().unwrap(), Some(Some(read.clone())));
            // The next save keeps both as parts; the whole texts go.
            let next = StoredConfig {
                version: 8,
                text: "new".into(),
                zone_versions: Vec::new(),
            };
            store.save_uninstalled(&next.kept()).unwrap();
            assert_eq!(store.load_config().unwrap(), Some(next));
            assert_eq!(store.last_good_config().unwrap(), Some(Some(read)));
            assert!(store.default_tree.get(CONFIG_KEY).unwrap().is_none());
            assert!(store.default_tree.get(LAST_GOOD_KEY).unwrap().is_none());
        }
    }

    fn domains(n: usize, changed: Option<usize>) -> String {
        (0..n)
            .map(|i| {
                let ttl = if Some(i) == changed { 60 } else { 300 };
                format!("[[domain]]\nname = \"d{i}.test\"\nttl = {ttl}\n\n")
            })
            .collect()
    }

    fn part_count(store: &Store) -> usize {
        std::fs::read_dir(store.path.with_file_name(PARTS_DIR)).map_or(0, |dir| dir.count())
    }

    on_each_engine! {
        /// Parts are kept as the caller names them, without cutting or
        /// hashing: the same list as the store's own cut when they are that
        /// cut, and two parts as one under a name of the caller's.
        fn a_configuration_is_kept_in_the_parts_it_is_given(backend: Backend) {
            let (store, _dir) = open(&backend);
            let config = StoredConfig {
                version: 1,
                text: domains(4, None),
                zone_versions: Vec::new(),
            };
            let kept = config.kept();
            store.save_config(&kept).unwrap();
            assert_eq!(store.load_config().unwrap().as_ref(), Some(&config));
            let listed = |store: &Store| -> Vec<PartName> {
                decode::<Listed>(&store.default_tree.get(LIST_KEY).unwrap().unwrap(), "list")
                    .unwrap()
                    .parts
            };
            let named: Vec<PartName> = kept
                .parts
                .iter()
                .map(|(h, p)| (*h, p.len() as u64))
                .collect();
            assert_eq!(listed(&store), named);
            let first_two = config.text.len() - kept.parts[2].1.len() - kept.parts[3].1.len();
            let joined = KeptConfig {
                parts: vec![
                    (
                        parts::part_hash(&config.text.as_bytes()[..first_two]),
                        parts::Part::plain(&config.text.as_bytes()[..first_two]),
                    ),
                    kept.parts[2].clone(),
                    kept.parts[3].clone(),
                ],
                ..kept.clone()
            };
            store.save_config(&joined).unwrap();
            let joined_hash = parts::part_hash(&config.text.as_bytes()[..first_two]);
            assert_eq!(listed(&store)[0], (joined_hash, first_two as u64));
            assert_eq!(store.load_config().unwrap().as_ref(), Some(&config));
            assert_eq!(part_count(&store), 3, "the two parts joined are gone");
        }
    }

    on_each_engine! {
        /// A part no kept list names (a save stopped between its parts and its
        /// list) is gone once the store opens again.
        fn a_part_left_over_is_removed_on_opening(backend: Backend) {
            let (store, dir) = open(&backend);
            store
                .save_config(
                    &StoredConfig {
                        version: 1,
                        text: domains(2, None),
                        zone_versions: Vec::new(),
                    }
                    .kept(),
                )
                .unwrap();
            store.config_parts.write(&hex(&[9; 16]), b"left").unwrap();
            assert_eq!(part_count(&store), 3);
            drop(store);
            let store = Store::open_with(dir.path(), &backend).unwrap();
            assert_eq!(part_count(&store), 2);
            assert_eq!(store.load_config().unwrap().unwrap().text, domains(2, None));
        }
    }

    on_each_engine! {
        /// A configuration changed in one place writes that place: the parts
        /// of the text before that it shares are kept once, and those no kept
        /// configuration names are gone.
        fn a_configuration_is_kept_as_parts_shared_with_the_one_before(backend: Backend) {
            let (store, dir) = open(&backend);
            let config = |version, changed| StoredConfig {
                version,
                text: domains(10, changed),
                zone_versions: vec![("d1.test".into(), version)],
            };
            store.save_config(&config(1, None).kept()).unwrap();
            assert_eq!(part_count(&store), 10);
            store.save_config(&config(2, Some(3)).kept()).unwrap();
            assert_eq!(part_count(&store), 10, "the old part of d3 is gone");
            // One that does not install keeps the good one's parts beside it.
            // (d3 as it was, d5 changed: two parts the good one lacks)
            store.save_uninstalled(&config(3, Some(5)).kept()).unwrap();
            assert_eq!(part_count(&store), 12);
            assert_eq!(store.load_config().unwrap(), Some(config(3, Some(5))));
            assert_eq!(
                store.last_good_config().unwrap(),
                Some(Some(config(2, Some(3))))
            );
            store.save_config(&config(4, None).kept()).unwrap();
            assert_eq!(part_count(&store), 10);
            assert_eq!(store.last_good_config().unwrap(), None);
            drop(store);
            let store = Store::open_with(dir.path(), &backend).unwrap();
            assert_eq!(store.load_config().unwrap(), Some(config(4, None)));
        }
    }

    on_each_engine! {
        /// Parts a store kept in its tree (the layout before files) move to
        /// files when it opens, and the configuration reads as it was.
        fn parts_kept_in_the_tree_move_to_files(backend: Backend) {
            let (store, dir) = open(&backend);
            let config = StoredConfig {
                version: 3,
                text: domains(5, None),
                zone_versions: vec![("d0.test".into(), 2)],
            };
            let kept = config.kept();
            let listed = Listed {
                version: 3,
                parts: kept
                    .parts
                    .iter()
                    .map(|(h, p)| (*h, p.len() as u64))
                    .collect(),
                zone_versions: config.zone_versions.clone(),
            };
            let tree = store.parts_tree().unwrap();
            for (hash, part) in &kept.parts {
                tree.insert(hash, part.bytes()).unwrap();
            }
            store.default_tree.insert(LIST_KEY, encode(&listed).unwrap()).unwrap();
            store.db.flush().unwrap();
            drop((tree, store));
            let store = Store::open_with(dir.path(), &backend).unwrap();
            assert_eq!(part_count(&store), 5);
            assert!(!store.db.has_tree(PARTS_TREE).unwrap());
            assert_eq!(store.load_config().unwrap(), Some(config));
        }
    }

    on_each_engine! {
        fn a_missing_part_is_named_not_joined_short(backend: Backend) {
            let (store, _dir) = open(&backend);
            store
                .save_config(
                    &StoredConfig {
                        version: 1,
                        text: domains(3, None),
                        zone_versions: Vec::new(),
                    }
                    .kept(),
                )
                .unwrap();
            let dir_of_parts = store.path.with_file_name(PARTS_DIR);
            let mut files: Vec<_> = std::fs::read_dir(&dir_of_parts)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            // One altered on disk is named, not joined.
            let before = std::fs::read(&files[1]).unwrap();
            std::fs::write(&files[1], b"altered").unwrap();
            let err = store.load_config().unwrap_err().to_string();
            assert!(
                err.contains("stored configuration is corrupt: its part"),
                "{err}"
            );
            assert!(err.contains("that are not the"), "{err}");
            std::fs::write(&files[1], before).unwrap();
            assert!(store.load_config().is_ok());
            std::fs::remove_file(&files[0]).unwrap();
            let err = store.load_config().unwrap_err().to_string();
            assert!(
                err.contains("stored configuration is corrupt: its part"),
                "{err}"
            );
        }
    }
}
