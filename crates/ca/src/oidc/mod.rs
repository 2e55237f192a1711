//! OpenID Connect identity tokens.
//!
//! - [`verify`]: checks a token against the configured issuers and yields the identity.
//! - [`jwks`]: the key sets tokens are checked with.
//! - [`refresh`]: at most one key set fetch per interval, whatever key IDs tokens make up.
//! - [`dev`]: the development issuer that `serve --dev` runs and `dev-token` mints from.

pub mod dev;
pub mod jwks;
pub mod refresh;
pub mod verify;

pub use verify::{Identity, IssuerConfig, SubjectKind, TokenError, TokenVerifier};
