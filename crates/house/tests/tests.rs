//! The house rules' tests: the checker on crates made to break them, then the workspace itself.

mod fixtures;
mod workspace;
