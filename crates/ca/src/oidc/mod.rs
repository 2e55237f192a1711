//! OpenID Connect identity tokens.
//!
//! - [`verify`]: checks a token against the configured issuers and yields the identity.
//! - [`jwks`]: the key sets tokens are checked with.
//! - [`dev`]: the development issuer that `serve --dev` runs and `dev-token` mints from.

pub mod dev;
pub mod jwks;
pub mod verify;

pub use verify::{Identity, IssuerConfig, SubjectKind, TokenError, TokenVerifier};
