//! Values the store keeps in files of their own beside its engine: the Raft
//! log's large commands (`raft-log/`), the state machine's snapshot
//! (`raft-snapshot/`) and the parts of the device's own copy of its
//! configuration (`config-parts/`), in the data directory.
//!
//! sled keeps a value inside its tree's leaf and writes the leaf again
//! whole, as one blob, whenever it consolidates, splits or relocates it
//! (its segment cleaner runs in the background). A 57 MB command in the
//! log's leaf was written again every few appends until it was purged (up
//! to a thousand entries later), and a snapshot beside the applied pointer
//! with nearly every command; each time cost the writes around it hundreds
//! of milliseconds. Such a value is written here once; the tree holds what
//! the file must hold ([`Checked`]: its length and hash) under the file's
//! name, and the file is removed once the tree no longer names it.
//!
//! Measured on sled, but this stays above the storage seam (`db`), not in
//! the sled adapter: the trees name the files, so where a value lives is
//! part of the store's layout whichever engine holds the trees, and an
//! engine that rewrites the page or the run holding a value (a B-tree
//! copying on write, an LSM tree compacting) would write tens of
//! megabytes again just the same.
//!
//! A name is never reused for other bytes (a log entry's file is named by
//! its log id, a snapshot's by its id). A file is written under a
//! temporary name, synced, renamed and its directory synced before the
//! tree names it; a crash in between leaves a file no tree names, removed
//! when its owner opens again ([`SideFiles::keep_only`]).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a tree holds of a value kept in a file: enough to tell that the
/// file holds the bytes written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Checked {
    pub(crate) len: u64,
    /// [`crate::parts::part_hash`] of the value.
    pub(crate) hash: [u8; 16],
}

impl Checked {
    pub(crate) fn of(value: &[u8]) -> Self {
        Self {
            len: value.len() as u64,
            hash: crate::parts::part_hash(value),
        }
    }
}

/// One directory of such files, each named `<name><suffix>`.
#[derive(Debug, Clone)]
pub(crate) struct SideFiles {
    dir: Arc<Path>,
    suffix: &'static str,
}

const PARTIAL: &str = ".partial";

impl SideFiles {
    pub(crate) fn new(dir: PathBuf, suffix: &'static str) -> Self {
        Self {
            dir: dir.into(),
            suffix,
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{}", self.suffix))
    }

    /// Writes `value` as the file `name`, durably: when this returns `Ok`,
    /// the file is there whole after a crash.
    pub(crate) fn write(&self, name: &str, value: &[u8]) -> io::Result<()> {
        self.write_all(&[(name, value)])
    }

    /// Writes each value as its file, durably: when this returns `Ok`,
    /// every file is there whole after a crash. Each file is synced, and
    /// the directory once for them all.
    pub(crate) fn write_all(&self, files: &[(&str, &[u8])]) -> io::Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        for (name, value) in files {
            let path = self.path(name);
            let partial = self.dir.join(format!("{name}{}{PARTIAL}", self.suffix));
            let written = (|| {
                fs::create_dir_all(&self.dir)?;
                let mut file = fs::File::create(&partial)?;
                file.write_all(value)?;
                file.sync_all()?;
                drop(file);
                fs::rename(&partial, &path)
            })();
            written.map_err(|e| {
                io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
            })?;
        }
        fs::File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| io::Error::new(e.kind(), format!("syncing {}: {e}", self.dir.display())))
    }

    /// Renames the file `from` to `to`, durably: when this returns `Ok`,
    /// the file is there under its new name after a crash.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (self.path(from), self.path(to));
        fs::rename(&from, &to)
            .and_then(|()| fs::File::open(&self.dir)?.sync_all())
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("renaming {} to {}: {e}", from.display(), to.display()),
                )
            })
    }

    /// The value of the file `name`, checked against what its tree holds.
    pub(crate) fn read(&self, name: &str, expected: Checked) -> io::Result<Vec<u8>> {
        let path = self.path(name);
        let bytes = fs::read(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
        let found = Checked::of(&bytes);
        if found != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {} bytes that are not the {} bytes stored there (their hash differs)",
                    path.display(),
                    found.len,
                    expected.len
                ),
            ));
        }
        Ok(bytes)
    }

    /// Removes the files `names`; one already gone is fine.
    pub(crate) fn remove(&self, names: &[String]) -> io::Result<()> {
        for name in names {
            match fs::remove_file(self.path(name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Removes every file of the directory with this suffix (or a partial
    /// one) but those `keep` names: what a crash left between writing a
    /// file and its tree naming it, or between the tree forgetting it and
    /// its removal. A directory not there yet holds nothing to remove.
    pub(crate) fn keep_only(&self, keep: &[String]) -> io::Result<()> {
        let kept: Vec<String> = keep.iter().map(|n| format!("{n}{}", self.suffix)).collect();
        let partial = format!("{}{PARTIAL}", self.suffix);
        let entries = match fs::read_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            entries => entries?,
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let ours = name.ends_with(self.suffix) || name.ends_with(&partial);
            if ours && !kept.iter().any(|k| *k == name) {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_reads_back_only_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SideFiles::new(dir.path().join("side"), ".value");
        let value = vec![5u8; 3000];
        files.write("4-3-7", &value).expect("write");
        let expected = Checked::of(&value);
        assert_eq!(files.read("4-3-7", expected).expect("read"), value);

        let err = files.read("5-3-7", expected).expect_err("no such file");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("5-3-7.value"), "{err}");

        // Altered on disk: refused, naming the file.
        let mut altered = value.clone();
        altered[100] = 6;
        fs::write(files.path("4-3-7"), &altered).expect("alter");
        let err = files.read("4-3-7", expected).expect_err("altered");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("4-3-7.value"), "{err}");
    }

    #[test]
    fn only_the_named_files_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SideFiles::new(dir.path().join("side"), ".value");
        // Nothing written yet: nothing to do.
        files.keep_only(&["1".into()]).expect("no directory");
        for i in 1..=3u8 {
            files.write(&i.to_string(), &[i; 10]).expect("write");
        }
        let partial = dir.path().join("side").join("9.value.partial");
        fs::write(&partial, b"cut short").expect("partial");
        let other = dir.path().join("side").join("README");
        fs::write(&other, b"not ours").expect("other");

        files.keep_only(&["2".into()]).expect("keep");
        assert!(!files.path("1").exists());
        assert!(files.path("2").exists());
        assert!(!files.path("3").exists());
        assert!(!partial.exists());
        assert!(other.exists(), "a file not named as ours is left alone");

        files
            .remove(&["2".into(), "3".into()])
            .expect("remove, one already gone");
        assert!(!files.path("2").exists());
    }
}
