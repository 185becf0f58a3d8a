//! Putting a checked database in place: `geoip.mmdb` in the data directory
//! is replaced atomically (write a temporary file, fsync it, rename it over
//! the old one, fsync the directory), so a crash leaves either the old or
//! the new database, never half of one. Where it came from is kept beside
//! it (`geoip.source`) so status can say so after a restart.

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

use super::{Geo, GeoError};

/// The database a device answers with, in its data directory.
pub fn database_path(data_dir: &Path) -> PathBuf {
    data_dir.join("geoip.mmdb")
}

fn source_path(data_dir: &Path) -> PathBuf {
    data_dir.join("geoip.source")
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

/// Checks `bytes` whole ([`Geo::from_bytes`]) and only then writes them as
/// the device's database. `shown` names the file in errors, `source` is
/// what status reports it came from. Returns the opened database, ready to be swapped
/// into the DNS state; on any error nothing on disk changed.
pub fn install(
    data_dir: &Path,
    bytes: Vec<u8>,
    shown: &str,
    source: &str,
) -> Result<Geo, InstallError> {
    let geo = Geo::from_bytes(bytes.clone(), shown, source)?;
    let target = database_path(data_dir);
    let tmp = data_dir.join("geoip.mmdb.new");
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
    let _ = std::fs::write(source_path(data_dir), source);
    if let Ok(dir) = File::open(data_dir) {
        let _ = dir.sync_all();
    }
    Ok(geo)
}

/// Opens the device's installed database, if there is one, with the source
/// noted when it was installed.
pub fn open_installed(data_dir: &Path) -> Result<Option<Geo>, GeoError> {
    let path = database_path(data_dir);
    if !path.exists() {
        return Ok(None);
    }
    let source = std::fs::read_to_string(source_path(data_dir))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| path.display().to_string());
    let shown = path.display().to_string();
    Geo::from_bytes(super::read_bounded(&path)?, &shown, &source).map(Some)
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
        let geo = install(dir.path(), good.clone(), "good", "import").unwrap();
        assert_eq!(geo.info().map(|i| i.source.as_str()), Some("import"));
        let cut = good[..good.len() - 20].to_vec();
        for bad in [b"garbage".to_vec(), cut, Vec::new()] {
            assert!(matches!(
                install(dir.path(), bad, "bad", "import"),
                Err(InstallError::Invalid(_))
            ));
            assert_eq!(std::fs::read(database_path(dir.path())).unwrap(), good);
            assert!(!dir.path().join("geoip.mmdb.new").exists());
        }
        let again = open_installed(dir.path()).unwrap().unwrap();
        assert_eq!(again.info().map(|i| i.source.as_str()), Some("import"));
    }
}
