//! A data directory that is read-only at start-up: the device serves from a
//! private copy of its store (docs/cluster.md, "A full or read-only disk").
//!
//! sled opens its files for writing, so a read-only store cannot be opened
//! where it is. The copy lets the device answer DNS from its stored
//! configuration, health decisions and events. Nothing is ever written to
//! the copy that would be needed later: Raft is frozen on it (no vote, no
//! entry), the API refuses writes, and what the device logs waits in memory
//! until the data directory can be written again (`StoreWriter`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What a copy holds: the store, and the files it names beside it (its
/// Raft state's, its configuration's parts: docs/cluster.md, "Large values
/// beside sled").
const COPIED: [&str; 4] = ["store", "raft-log", "raft-snapshot", "config-parts"];

/// The copy, removed when dropped.
#[derive(Debug)]
pub struct StoreCopy(tempfile::TempDir);

impl StoreCopy {
    /// Copies the store of the data directory `dir`, with the Raft log's
    /// and snapshot's files and the configuration's parts beside it, into
    /// a new private directory under `$RUNTIME_DIRECTORY` (set by systemd)
    /// or the system's temporary directory.
    pub fn make(dir: &Path) -> Result<Self> {
        let from = dir.join("store");
        if !from.is_dir() {
            anyhow::bail!(
                "the data directory {} is on a read-only filesystem and holds no store: there is nothing to serve",
                dir.display()
            );
        }
        let base = std::env::var_os("RUNTIME_DIRECTORY")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let copy = tempfile::Builder::new()
            .prefix("gtm-store-copy-")
            .tempdir_in(&base)
            .with_context(|| {
                format!(
                    "the data directory {} is read-only, and no copy of its store can be made in {}",
                    dir.display(),
                    base.display()
                )
            })?;
        for name in COPIED {
            let from = dir.join(name);
            if !from.is_dir() {
                continue;
            }
            copy_tree(&from, &copy.path().join(name)).with_context(|| {
                format!(
                    "the data directory {} is read-only, and copying its {name} to {} failed",
                    dir.display(),
                    copy.path().display()
                )
            })?;
        }
        Ok(Self(copy))
    }

    /// The directory to open the store in (it holds `store/`, and
    /// `raft-log/`, `raft-snapshot/` and `config-parts/` when the data
    /// directory does).
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Copies the directory `from` to `to` (files and directories only; sled
/// makes nothing else).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_copied_with_its_subdirectories_and_raft_files_and_the_copy_goes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir_all(store.join("blobs")).unwrap();
        std::fs::write(store.join("db"), b"data").unwrap();
        std::fs::write(store.join("blobs/1"), b"blob").unwrap();
        std::fs::create_dir_all(dir.path().join("raft-snapshot")).unwrap();
        std::fs::write(dir.path().join("raft-snapshot/ab.snapshot"), b"snap").unwrap();
        std::fs::write(dir.path().join("api-token"), b"not the store's").unwrap();
        let copy = StoreCopy::make(dir.path()).unwrap();
        let copied = copy.path().join("store");
        assert_eq!(std::fs::read(copied.join("db")).unwrap(), b"data");
        assert_eq!(std::fs::read(copied.join("blobs/1")).unwrap(), b"blob");
        let snapshot = copy.path().join("raft-snapshot/ab.snapshot");
        assert_eq!(std::fs::read(snapshot).unwrap(), b"snap");
        assert!(!copy.path().join("api-token").exists());
        assert!(!copy.path().join("raft-log").exists(), "none to copy");
        let path = copy.path().to_path_buf();
        drop(copy);
        assert!(!path.exists());
    }

    #[test]
    fn a_directory_without_a_store_is_an_error_that_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = StoreCopy::make(dir.path()).unwrap_err().to_string();
        assert!(e.contains("holds no store"), "{e}");
    }
}
