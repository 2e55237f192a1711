//! OpenID Connect identity tokens.
//!
//! - [`verify`]: checks a token against the configured issuers and yields the identity.
//! - [`error`]: why a token was refused.
//! - [`kind`]: Fulcio's issuer types, and the certificate subject each makes of a token.
//! - [`meta`]: meta-issuers, one entry for a family of issuer URLs.
//! - [`spec`]: one issuer's settings, and the kind they make.
//! - [`fulcio_config`]: Fulcio's own issuer config file, JSON or YAML.
//! - [`jwks`]: the key sets tokens are checked with.
//! - [`refresh`]: at most one key set fetch per interval, whatever key IDs tokens make up.
//! - [`dev`]: the development issuer that `serve --dev` runs and `dev-token` mints from.

pub mod dev;
pub mod error;
pub mod fulcio_config;
pub mod jwks;
pub mod kind;
pub mod meta;
pub mod refresh;
pub mod spec;
pub mod verify;

pub use kind::{IssuerKind, SanKind};
pub use spec::IssuerSpec;
pub use error::TokenError;
pub use verify::{Identity, IssuerConfig, MetaIssuerConfig, TokenVerifier};
