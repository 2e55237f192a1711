//! The workspace's house rules, read from the source with `syn` rather than from a list:
//!
//! - [`tree`]: a crate's modules, found as rustc finds them (`mod x;` → `x.rs` or `x/mod.rs`), with what
//!   each defines, imports and names.
//! - [`resolve`]: a path as written in one module, to the module that defines what it names.
//! - [`circles`]: the import graph between a crate's files, and its cycles.
//! - [`string_errors`]: every `Result<_, String>` outside tests.
//!
//! `cargo run -p signet-house` prints what it finds; `tests/workspace.rs` holds the workspace to zero.

pub mod circles;
pub mod resolve;
pub mod string_errors;
pub mod tree;

use std::path::{Path, PathBuf};

/// The crate roots under `crates/`: each `src/lib.rs`, and `src/main.rs` where there is one.
pub fn crate_roots(workspace: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut roots = Vec::new();
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(workspace.join("crates"))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        for root in ["src/lib.rs", "src/main.rs"] {
            let file = dir.join(root);
            if file.is_file() {
                roots.push(file);
            }
        }
    }
    Ok(roots)
}

/// A place in the source, for a finding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Site {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Why a crate could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Read { file: PathBuf, source: std::io::Error },
    Parse { file: PathBuf, source: syn::Error },
    ModuleNotFound { declared_in: PathBuf, name: String },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Read { file, source } => write!(f, "reading {}: {source}", file.display()),
            Error::Parse { file, source } => {
                let at = source.span().start();
                write!(f, "parsing {}:{}: {source}", file.display(), at.line)
            }
            Error::ModuleNotFound { declared_in, name } => {
                write!(f, "{} declares `mod {name};` but neither {name}.rs nor {name}/mod.rs exists", declared_in.display())
            }
        }
    }
}

impl std::error::Error for Error {}
