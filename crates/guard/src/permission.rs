//! Permissions: what a route needs and what a role grants, one bit each.
//!
//! Every route declares the one permission it needs (the server's route table); a role is a
//! set of them. A check is one AND on a `u16`: no allocation, no lookup by name.

use std::fmt;

/// One thing a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Permission {
    /// The public read routes: log entries, proofs, checkpoints, tiles, trust documents,
    /// search (a POST that writes nothing), the CA's and TSA's public material, metrics.
    Read,
    /// Appending to a transparency log (Rekor v1 and v2).
    LogAppend,
    /// Asking the CA for a certificate.
    CertIssue,
    /// Asking the TSA for a timestamp.
    TsaStamp,
    /// Listing, creating and revoking API tokens.
    AdminTokens,
    /// Listing and lifting bans.
    AdminBans,
    /// Operating the logs: shard rotation.
    AdminLog,
    /// Reading the audit trail.
    AuditRead,
}

impl Permission {
    /// Every permission, in bit order.
    pub const ALL: [Permission; 8] = [
        Permission::Read,
        Permission::LogAppend,
        Permission::CertIssue,
        Permission::TsaStamp,
        Permission::AdminTokens,
        Permission::AdminBans,
        Permission::AdminLog,
        Permission::AuditRead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::LogAppend => "log.append",
            Permission::CertIssue => "cert.issue",
            Permission::TsaStamp => "tsa.stamp",
            Permission::AdminTokens => "admin.tokens",
            Permission::AdminBans => "admin.bans",
            Permission::AdminLog => "admin.log",
            Permission::AuditRead => "audit.read",
        }
    }

    fn bit(self) -> u16 {
        1 << self as u8
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A permission name that is not one of [`Permission::ALL`]'s (nor `admin.*`): the name given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission {0:?}; expected one of {names}, or \"admin.*\" for every admin.* permission", names = permission_names())]
pub struct UnknownPermission(pub String);

fn permission_names() -> String {
    Permission::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}

impl std::str::FromStr for Permission {
    type Err = UnknownPermission;
    fn from_str(s: &str) -> Result<Permission, UnknownPermission> {
        Permission::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownPermission(s.to_string()))
    }
}

/// A set of permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Permissions(u16);

impl Permissions {
    pub const NONE: Permissions = Permissions(0);

    pub fn all() -> Permissions {
        Permission::ALL.into_iter().collect()
    }

    pub fn contains(self, p: Permission) -> bool {
        self.0 & p.bit() != 0
    }

    pub fn with(self, p: Permission) -> Permissions {
        Permissions(self.0 | p.bit())
    }

    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL.into_iter().filter(move |p| self.contains(*p))
    }

    /// Parses a list of permission names; `admin.*` stands for every `admin.…` permission.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Permissions, UnknownPermission> {
        let mut set = Permissions::NONE;
        for name in names {
            if name == "admin.*" {
                set = Permission::ALL.into_iter().filter(|p| p.name().starts_with("admin.")).fold(set, Permissions::with);
            } else {
                set = set.with(name.parse()?);
            }
        }
        Ok(set)
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        iter.into_iter().fold(Permissions::NONE, Permissions::with)
    }
}

impl fmt::Display for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Permission::name).collect();
        f.write_str(&names.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sets_hold_what_was_put_in() {
        for p in Permission::ALL {
            assert_eq!(p.name().parse::<Permission>().unwrap(), p);
            assert!(Permissions::NONE.with(p).contains(p));
            assert_eq!(Permissions::NONE.with(p).iter().collect::<Vec<_>>(), [p]);
        }
        let set = Permissions::parse(["read", "admin.*"]).unwrap();
        assert_eq!(set.to_string(), "read admin.tokens admin.bans admin.log");
        assert!(!set.contains(Permission::LogAppend) && !set.contains(Permission::AuditRead));
        assert_eq!(Permissions::all().iter().count(), Permission::ALL.len());
        let e = Permissions::parse(["read", "log.write"]).unwrap_err().to_string();
        assert!(e.contains("\"log.write\"") && e.contains("log.append"), "{e}");
    }
}
