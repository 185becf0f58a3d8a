//! A device's identity and secrets on disk: its Raft node id, the cluster
//! secret and the API token, each a small file in the data directory.
//!
//! Every file here is replaced atomically ([`write_private`]): a crash while
//! writing leaves the old content or the new one, never a truncated file.
//! A truncated node id or secret would take the device out of its cluster;
//! a truncated token would lock its operators out.

use std::{
    io::Write as _,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

/// The device's Raft node id.
pub const NODE_ID_FILE: &str = "node-id";
/// The secret that guards device-to-device traffic of its cluster.
pub const SECRET_FILE: &str = "cluster-secret";
/// The token the API requires (the CLI reads it from here).
pub const TOKEN_FILE: &str = "api-token";

/// Why a file of the device's identity cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is corrupt: {why}", path.display())]
    Corrupt { path: PathBuf, why: String },
    #[error("cannot read /dev/urandom: {0}")]
    Random(std::io::Error),
}

/// This device's Raft id: random on first start, kept in the data directory.
pub fn node_id(dir: &Path) -> Result<u64, IdentityError> {
    let path = dir.join(NODE_ID_FILE);
    if let Some(text) = read_kept(&path)? {
        return text.trim().parse().map_err(|e| IdentityError::Corrupt {
            path,
            why: format!("{e}"),
        });
    }
    let id = random_id()?;
    write_private(&path, &id.to_string())?;
    Ok(id)
}

/// Keeps `id` as the device's node id.
pub fn keep_node_id(dir: &Path, id: u64) -> Result<(), IdentityError> {
    write_private(&dir.join(NODE_ID_FILE), &id.to_string())
}

/// A random node id other than `old`, not yet kept (see [`keep_node_id`]).
/// A device that wiped its Raft state must not reuse its id: with its vote
/// forgotten it could vote twice in one term.
pub fn fresh_node_id(old: u64) -> Result<u64, IdentityError> {
    loop {
        let id = random_id()?;
        if id != old {
            return Ok(id);
        }
    }
}

fn random_id() -> Result<u64, IdentityError> {
    // 63 bits: the id stays positive wherever it is shown as a signed number.
    Ok(u64::from_be_bytes(random_bytes::<8>()?) >> 1)
}

/// The cluster secret: made on first start; replaced when joining.
pub fn secret(dir: &Path) -> Result<String, IdentityError> {
    kept_or_new(&dir.join(SECRET_FILE), "")
}

/// A new random secret, not yet kept (see [`keep_secret`]).
pub fn new_secret() -> Result<String, IdentityError> {
    Ok(gtm_model::random::hex(&random_bytes::<32>()?))
}

/// Keeps `secret` as the device's cluster secret.
pub fn keep_secret(dir: &Path, secret: &str) -> Result<(), IdentityError> {
    write_private(&dir.join(SECRET_FILE), secret)
}

/// The API token: kept in the data directory, made on first start.
pub fn api_token(dir: &Path) -> Result<String, IdentityError> {
    kept_or_new(&dir.join(TOKEN_FILE), "\n")
}

/// The trimmed content of `path`, or a new random secret written there (with
/// `end` after it) when the file is absent or blank.
fn kept_or_new(path: &Path, end: &str) -> Result<String, IdentityError> {
    if let Some(text) = read_kept(path)? {
        let kept = text.trim();
        if !kept.is_empty() {
            return Ok(kept.to_string());
        }
    }
    // From the kernel's CSPRNG: these guard the cluster and the management
    // plane.
    let made = new_secret()?;
    write_private(path, &format!("{made}{end}"))?;
    Ok(made)
}

fn random_bytes<const N: usize>() -> Result<[u8; N], IdentityError> {
    gtm_model::random::bytes::<N>().map_err(IdentityError::Random)
}

/// A file the device made on an earlier start, or `None` when there is
/// none yet. Any other failure (unreadable, not UTF-8) is an error: making a
/// new node id, secret or token over a file that exists but cannot be read
/// would silently take the device out of its cluster or lock out its users.
pub fn read_kept(path: &Path) -> Result<Option<String>, IdentityError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IdentityError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replaces `path` with `text`, readable by the owner only, atomically: the
/// text goes to a new file in the same directory (mode 0600), which is
/// flushed to disk, renamed over `path`, and the directory flushed so the
/// rename itself survives a crash. A crash at any point leaves the old file
/// or the new one; a failure removes the temporary file.
pub fn write_private(path: &Path, text: &str) -> Result<(), IdentityError> {
    let failed = |source| IdentityError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| failed(std::io::Error::other("the path names no file")))?;
    // Unique per process and call: two writers never share a temporary file.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_kept_file_that_cannot_be_read_is_an_error_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Absent: made once, then read back unchanged.
        let id = node_id(dir.path()).expect("new id");
        assert_eq!(node_id(dir.path()).expect("kept id"), id);
        let made = secret(dir.path()).expect("new secret");
        assert_eq!(secret(dir.path()).expect("kept secret"), made);
        let token = api_token(dir.path()).expect("new token");
        assert_eq!(api_token(dir.path()).expect("kept token"), token);
        // Present but not text: an error naming the file, and the file stays.
        for file in [NODE_ID_FILE, SECRET_FILE, TOKEN_FILE] {
            std::fs::write(dir.path().join(file), [0xff, 0xfe, 0x00]).expect("write");
        }
        let e = node_id(dir.path()).expect_err("binary node id").to_string();
        assert!(e.contains(NODE_ID_FILE), "{e}");
        let e = secret(dir.path()).expect_err("binary secret").to_string();
        assert!(e.contains(SECRET_FILE), "{e}");
        let e = api_token(dir.path()).expect_err("binary token").to_string();
        assert!(e.contains(TOKEN_FILE), "{e}");
        for file in [NODE_ID_FILE, SECRET_FILE, TOKEN_FILE] {
            let kept = std::fs::read(dir.path().join(file)).expect("read");
            assert_eq!(kept, [0xff, 0xfe, 0x00], "{file} was not replaced");
        }
        // Text that is not a number: corrupt, named.
        std::fs::write(dir.path().join(NODE_ID_FILE), "12x").expect("write");
        let e = node_id(dir.path()).expect_err("bad id").to_string();
        assert!(e.contains(NODE_ID_FILE) && e.contains("corrupt"), "{e}");
    }

    #[test]
    fn made_files_are_private_and_blank_ones_are_made_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(SECRET_FILE), "  \n").expect("write");
        let made = secret(dir.path()).expect("secret");
        assert_eq!(made.len(), 64, "{made}");
        assert!(made.bytes().all(|b| b.is_ascii_hexdigit()), "{made}");
        let token = api_token(dir.path()).expect("token");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(TOKEN_FILE)).expect("read"),
            format!("{token}\n")
        );
        node_id(dir.path()).expect("id");
        for file in [NODE_ID_FILE, SECRET_FILE, TOKEN_FILE] {
            let mode = std::fs::metadata(dir.path().join(file))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        // Sorted by name; no temporary file is left.
        assert_eq!(files(dir.path()), [TOKEN_FILE, SECRET_FILE, NODE_ID_FILE]);
    }

    #[test]
    fn a_write_replaces_the_whole_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        // A world-readable file with longer content: replaced whole, private.
        std::fs::write(&path, "a much longer old content").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, "new").expect("write_private");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(files(dir.path()), ["f"]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_removes_its_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The rename cannot replace a directory that holds a file: the
        // write fails after the temporary file was written and flushed.
        let target = dir.path().join(SECRET_FILE);
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::write(target.join("kept"), "old").expect("write");
        let e = write_private(&target, "new").expect_err("cannot replace a directory");
        assert!(e.to_string().contains(SECRET_FILE), "{e}");
        assert_eq!(files(dir.path()), [SECRET_FILE]);
        assert_eq!(
            std::fs::read_to_string(target.join("kept")).expect("read"),
            "old"
        );
        // A directory that does not exist: an error naming the file.
        let missing = dir.path().join("nope").join(NODE_ID_FILE);
        let e = write_private(&missing, "1").expect_err("no directory");
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn the_temporary_file_of_a_crashed_write_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = node_id(dir.path()).expect("id");
        // What a crash between writing the temporary file and the rename
        // leaves: the old file is what the device reads.
        let leftover = dir.path().join(format!(".{NODE_ID_FILE}.1.0.tmp"));
        std::fs::write(&leftover, "12").expect("write");
        assert_eq!(node_id(dir.path()).expect("kept id"), id);
        let renewed = fresh_node_id(id).expect("fresh id");
        assert_ne!(renewed, id);
        keep_node_id(dir.path(), renewed).expect("keep");
        assert_eq!(node_id(dir.path()).expect("renewed id"), renewed);
    }
}
