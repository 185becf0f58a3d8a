//! Putting a checked database in place: `geoip.mmdb` (or `asn.mmdb`) in
//! the data directory is replaced atomically (write a temporary file,
//! fsync it, rename it over the old one, fsync the directory), so a crash
//! leaves either the old or the new database, never half of one. Where it
//! came from is kept beside it (`geoip.source`, `asn.source`) so status
//! can say so after a restart.

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

use super::{Db, GeoError, Kind};

/// The database of `kind` a device answers with, in its data directory.
pub fn database_path(kind: Kind, data_dir: &Path) -> PathBuf {
    data_dir.join(format!("{}.mmdb", kind.stem()))
}

fn source_path(kind: Kind, data_dir: &Path) -> PathBuf {
    data_dir.join(format!("{}.source", kind.stem()))
}

/// Why a database was not installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}; the current database stays")]
    Invalid(#[from] GeoError),
    #[error("cannot write {path}: {source}; the current database stays")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Checks `bytes` whole ([`Db::from_bytes`]) as a database of `kind` and
/// only then writes them as the device's database of that kind. `shown`
/// names the file in errors, `source` is what status reports it came
/// from. Returns the opened database, ready to be swapped into the DNS
/// state; on any error nothing on disk changed.
pub fn install(
    kind: Kind,
    data_dir: &Path,
    bytes: Vec<u8>,
    shown: &str,
    source: &str,
) -> Result<Db, InstallError> {
    let db = Db::from_bytes(kind, bytes.clone(), shown, source)?;
    let target = database_path(kind, data_dir);
    let tmp = data_dir.join(format!("{}.mmdb.new", kind.stem()));
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    };
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp)(e));
    }
    std::fs::rename(&tmp, &target).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(&target)(e)
    })?;
    // The source note is informational: a failure to write it leaves a
    // working database whose source shows as unknown.
    let _ = std::fs::write(source_path(kind, data_dir), source);
    if let Ok(dir) = File::open(data_dir) {
        let _ = dir.sync_all();
    }
    Ok(db)
}

/// Opens the device's installed database of `kind`, if there is one, with
/// the source noted when it was installed.
pub fn open_installed(kind: Kind, data_dir: &Path) -> Result<Option<Db>, GeoError> {
    let path = database_path(kind, data_dir);
    if !path.exists() {
        return Ok(None);
    }
    let source = std::fs::read_to_string(source_path(kind, data_dir))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| path.display().to_string());
    let shown = path.display().to_string();
    Db::from_bytes(kind, super::read_bounded(&path)?, &shown, &source).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Code {
            iso_code: &'static str,
        }
        #[derive(serde::Serialize)]
        struct Entry {
            country: Code,
        }
        let mut w = mmdb_writer::Writer::new("GeoLite2-Country");
        let net: mmdb_writer::ipnet::IpNet = "81.2.69.0/24".parse().unwrap();
        w.insert(
            net,
            &Entry {
                country: Code { iso_code: "DE" },
            },
        )
        .unwrap();
        w.to_bytes().unwrap()
    }

    #[test]
    fn a_refused_database_leaves_the_installed_one_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = database();
        let db = install(Kind::Place, dir.path(), good.clone(), "good", "import").unwrap();
        assert_eq!(db.info().source, "import");
        let cut = good[..good.len() - 20].to_vec();
        for bad in [b"garbage".to_vec(), cut, Vec::new()] {
            assert!(matches!(
                install(Kind::Place, dir.path(), bad, "bad", "import"),
                Err(InstallError::Invalid(_))
            ));
            assert_eq!(
                std::fs::read(database_path(Kind::Place, dir.path())).unwrap(),
                good
            );
            assert!(!dir.path().join("geoip.mmdb.new").exists());
        }
        // A country database is not an ASN one: refused, and nothing of the
        // ASN kind is written.
        assert!(matches!(
            install(Kind::Asn, dir.path(), good.clone(), "good", "import"),
            Err(InstallError::Invalid(GeoError::WrongKind { .. }))
        ));
        assert!(!database_path(Kind::Asn, dir.path()).exists());
        assert!(open_installed(Kind::Asn, dir.path()).unwrap().is_none());
        let again = open_installed(Kind::Place, dir.path()).unwrap().unwrap();
        assert_eq!(again.info().source, "import");
    }
}
