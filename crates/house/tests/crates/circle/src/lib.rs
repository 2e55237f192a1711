//! A crate made to break the rules: `config` and `feature` import each other, `inner` and its
//! child do too (through `super`), and `feature` returns a string error.
pub mod config;
pub mod feature;
pub mod inner;
