//! OIDC identities as principals.
//!
//! Who a signing request is for is known only once the CA has verified its identity token,
//! inside the handler, after the layers have run. So the handler asks here, before anything
//! is signed: the identity gets the same write bucket, strikes and ban as a client, keyed by
//! [`ClientKey::identity`] (issuer and subject). Its limits come on top of the client's, so
//! that an identity cannot escape them by changing address or API token, and one banned
//! after repeated refusals gets no certificate from anywhere, on any instance that shares
//! the limits (Redis).

use axum::response::Response;

use crate::refuse::banned;
use crate::client::ClientKey;
use crate::guard::Guard;
use crate::ratelimit::{refused, shared_check};

impl Guard {
    /// Admits one signing request of `issuer`'s `subject`, or gives the refusal to answer:
    /// 403 `banned`, 429 `rate_limited` (a strike), or 503 when the shared limiter is down
    /// and `on_failure = "closed"`. Nothing to do when neither limits nor bans are on.
    pub async fn admit_identity(&self, issuer: &str, subject: &str) -> Result<(), Response> {
        if !self.config.rate_limit.enabled && !self.config.ban.enabled && self.shared.is_none() {
            return Ok(());
        }
        let key = ClientKey::identity(issuer, subject);
        if let Some(until) = self.banned_until(&key) {
            return Err(banned(&key, until));
        }
        if let Some(shared) = &self.shared {
            return shared_check(self, shared, &key, true).await;
        }
        match self.limiters.as_ref().map(|l| l.check(&key, true)) {
            Some(Err(wait)) => {
                // The ban's reason names the identity: `admin ban list` shows only its key.
                self.strike(key, &format!("rate limited: {subject} from {issuer}"));
                Err(refused(self, &key, true, wait))
            }
            _ => Ok(()),
        }
    }
}
