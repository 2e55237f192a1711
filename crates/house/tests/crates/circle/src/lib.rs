//! A crate made to break the rules: `config` and `feature` import each other, `inner` and its
//! child do too (through `super`), `reexport` re-exports its child's type and uses it while the
//! child uses its parent's, and `feature` returns a string error.
pub mod config;
pub mod feature;
pub mod inner;
pub mod reexport;
