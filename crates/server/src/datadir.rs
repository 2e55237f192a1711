//! One data directory, one server. Two servers on one data dir would each rewrite the
//! published URL and issuer files under the other, and each sequence the same logs.
//!
//! `serve` takes an exclusive `flock` on `<data dir>/signet.lock` before it writes anything,
//! and holds it for its lifetime; the kernel drops it when the process ends, however it
//! ends, so a crash never leaves a stale lock. The file holds the owner's pid, for the
//! message a second server prints. Admin commands do not take the lock: they are meant to
//! run beside a server.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct DataDirLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("data dir {dir} is in use by pid {pid}; stop that server first, or give this one another --data-dir")]
    InUse { dir: String, pid: String },
    #[error("data dir {dir}: cannot take its lock file {path}: {source}")]
    Io { dir: String, path: String, source: std::io::Error },
}

impl DataDirLock {
    pub fn acquire(dir: &Path) -> Result<DataDirLock, LockError> {
        let path: PathBuf = dir.join("signet.lock");
        let io = |source| LockError::Io { dir: dir.display().to_string(), path: path.display().to_string(), source };
        if !dir.exists() {
            signet_core::files::ensure_private_dir(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path).map_err(io)?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                let pid = if pid.is_empty() { "unknown".to_string() } else { pid.to_string() };
                return Err(LockError::InUse { dir: dir.display().to_string(), pid });
            }
            return Err(io(err));
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_first_owner() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file description: a second open conflicts even
        // within one process, as a second process would.
        match DataDirLock::acquire(dir.path()) {
            Err(LockError::InUse { pid, .. }) => assert_eq!(pid, std::process::id().to_string()),
            Err(e) => panic!("expected InUse, got {e}"),
            Ok(_) => panic!("expected InUse, got a second lock"),
        }
        drop(first);
        assert!(DataDirLock::acquire(dir.path()).is_ok(), "released with its holder");
    }
}
