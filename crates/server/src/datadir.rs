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

/// Makes everything under `dir` private: directories 0700, files 0600. Returns the paths
/// whose modes were too open and have been fixed (the caller logs them).
///
/// The data dir holds keys, tokens (hashed), the audit chain and the log database, and
/// SQLite creates its `-wal` and `-shm` files with the process umask, 0644 by default. So
/// `serve` also sets the umask to 077 for everything it creates afterwards.
pub fn make_private(dir: &Path) -> Result<Vec<PathBuf>, LockError> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0o077) };
    let mut fixed = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((path, depth)) = pending.pop() {
        let io = |source| LockError::Io { dir: dir.display().to_string(), path: path.display().to_string(), source };
        let meta = std::fs::symlink_metadata(&path).map_err(io)?;
        if meta.file_type().is_symlink() {
            // A link points elsewhere (an operator's key on another volume): not ours to chmod.
            continue;
        }
        let want = if meta.is_dir() { 0o700 } else { 0o600 };
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(want)).map_err(io)?;
            fixed.push(path.clone());
        }
        // The layout is shallow (keys/, ca/, tsa/); a deep tree is not signet's.
        if meta.is_dir() && depth < 3 {
            for entry in std::fs::read_dir(&path).map_err(io)? {
                pending.push((entry.map_err(io)?.path(), depth + 1));
            }
        }
    }
    Ok(fixed)
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

    #[test]
    fn open_modes_are_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        std::fs::write(dir.path().join("keys/k.pem"), "k").unwrap();
        std::fs::set_permissions(dir.path().join("keys/k.pem"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(dir.path().join("ok"), "x").unwrap();
        std::fs::set_permissions(dir.path().join("ok"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let fixed = make_private(dir.path()).unwrap();
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&dir.path().join("keys/k.pem")), 0o600);
        assert!(fixed.contains(&dir.path().join("keys/k.pem")) && !fixed.contains(&dir.path().join("ok")));
    }
}
