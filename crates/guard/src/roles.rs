//! Roles: named sets of [`Permissions`].
//!
//! Four are built in: `admin` (everything), `signer` (read, log.append, cert.issue,
//! tsa.stamp), `reader` (read) and `auditor` (read, audit.read). `[guard.roles]` adds custom
//! ones (`release-bot = ["read", "log.append"]`); a built-in cannot be redefined. A token
//! names its role, and its permissions are looked up at each request, so a changed table
//! takes effect on the next request. A role the table does not define grants nothing.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::error::{ConfigError, PolicyError};
use crate::permission::{Permission, Permissions};

/// A role's name: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Role(Arc<str>);

impl Role {
    pub fn admin() -> Role {
        Role("admin".into())
    }
    pub fn signer() -> Role {
        Role("signer".into())
    }
    pub fn reader() -> Role {
        Role("reader".into())
    }
    pub fn auditor() -> Role {
        Role("auditor".into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::str::FromStr for Role {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Role, PolicyError> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
        match ok {
            true => Ok(Role(s.into())),
            false => Err(PolicyError::RoleName(s.to_string())),
        }
    }
}

/// The built-in roles and what they grant.
pub fn builtin() -> [(Role, Permissions); 4] {
    use Permission::*;
    [
        (Role::admin(), Permissions::all()),
        (Role::signer(), [Read, LogAppend, CertIssue, TsaStamp].into_iter().collect()),
        (Role::reader(), [Read].into_iter().collect()),
        (Role::auditor(), [Read, AuditRead].into_iter().collect()),
    ]
}

/// The role table: built-in roles and the configured ones.
#[derive(Debug, Clone)]
pub struct Roles {
    by_name: HashMap<Role, Permissions>,
}

impl Default for Roles {
    fn default() -> Self {
        Roles { by_name: builtin().into_iter().collect() }
    }
}

impl Roles {
    /// The built-in roles plus `[guard.roles]`. An error names the role and what was wrong.
    pub fn with_custom(custom: &BTreeMap<String, Vec<String>>) -> Result<Roles, ConfigError> {
        let mut roles = Roles::default();
        for (name, permissions) in custom {
            let role: Role = name.parse().map_err(ConfigError::RoleName)?;
            if roles.by_name.contains_key(&role) {
                return Err(ConfigError::BuiltinRole(role.name().to_string()));
            }
            let set = match Permissions::parse(permissions.iter().map(String::as_str)) {
                Ok(set) => set,
                Err(unknown) => return Err(ConfigError::RolePermissions { role: role.name().to_string(), source: unknown.into() }),
            };
            roles.by_name.insert(role, set);
        }
        Ok(roles)
    }

    /// What `role` grants; nothing when the table does not define it.
    pub fn permissions(&self, role: &Role) -> Permissions {
        self.by_name.get(role).copied().unwrap_or(Permissions::NONE)
    }

    pub fn defines(&self, role: &Role) -> bool {
        self.by_name.contains_key(role)
    }

    /// Every role, by name.
    pub fn table(&self) -> Vec<(Role, Permissions)> {
        let mut all: Vec<(Role, Permissions)> = self.by_name.iter().map(|(r, p)| (r.clone(), *p)).collect();
        all.sort();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_grant_what_they_say_and_unknown_roles_grant_nothing() {
        let roles = Roles::default();
        assert_eq!(roles.permissions(&Role::admin()), Permissions::all());
        let signer = roles.permissions(&Role::signer());
        assert!(signer.contains(Permission::LogAppend) && signer.contains(Permission::CertIssue) && signer.contains(Permission::TsaStamp));
        assert!(!signer.contains(Permission::AdminTokens) && !signer.contains(Permission::AuditRead));
        assert_eq!(roles.permissions(&Role::reader()).to_string(), "read");
        assert_eq!(roles.permissions(&Role::auditor()).to_string(), "read audit.read");
        assert_eq!(roles.permissions(&"ghost".parse().unwrap()), Permissions::NONE);
    }

    #[test]
    fn custom_roles_are_checked_like_everything_in_the_config() {
        let custom = |name: &str, perms: &[&str]| BTreeMap::from([(name.to_string(), perms.iter().map(|p| p.to_string()).collect())]);
        let roles = Roles::with_custom(&custom("release-bot", &["read", "log.append"])).unwrap();
        let bot: Role = "release-bot".parse().unwrap();
        assert_eq!(roles.permissions(&bot).to_string(), "read log.append");
        assert_eq!(roles.table().len(), 5);
        let e = Roles::with_custom(&custom("admin", &["read"])).unwrap_err().to_string();
        assert!(e.contains("built-in"), "{e}");
        let e = Roles::with_custom(&custom("bot", &["log.write"])).unwrap_err().to_string();
        assert!(e.contains("[guard.roles] bot") && e.contains("log.append"), "{e}");
        let e = Roles::with_custom(&custom("Bad Name", &[])).unwrap_err().to_string();
        assert!(e.contains("not a role name"), "{e}");
        assert!("-x".parse::<Role>().is_err() && "x".repeat(65).parse::<Role>().is_err() && "ops.1_a-b".parse::<Role>().is_ok());
    }
}
