//! `SIGNET_*` environment variables: every config key, named after its path.
//!
//! `log.batch_max_entries` is `SIGNET_LOG_BATCH_MAX_ENTRIES`; an array of tables
//! (`oidc.issuers`) or a map (`guard.roles`) is one variable holding a TOML value. The names
//! are derived from the config types themselves, so a key added to a settings struct has its
//! variable without anyone writing it down: each table refuses unknown keys, and serde's
//! refusal lists the keys it knows.
//!
//! A variable's value is read as a TOML value where the key takes one (`256`, `true`,
//! `["a", "b"]`, `[{ issuer = "…" }]`), and as a string otherwise, so a path or URL needs no
//! quotes.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::error::ConfigError;

/// Every leaf key by its variable's name: `SIGNET_LOG_BATCH_MAX_ENTRIES` →
/// `["log", "batch_max_entries"]`.
pub type Keys = BTreeMap<String, Vec<String>>;

/// Variables that are not config keys, read elsewhere: the log filter and format, and the
/// admin CLI's token. They must never name a key (a test checks).
pub const NOT_KEYS: [&str; 3] = ["SIGNET_LOG", "SIGNET_LOG_FORMAT", "SIGNET_TOKEN"];

/// Every leaf key of the settings type `T` (the server's [`Config`](super::Config)), read from
/// what its tables refuse.
pub fn keys_of<T: DeserializeOwned>() -> Keys {
    let mut keys = BTreeMap::new();
    collect::<T>(&mut Vec::new(), &mut keys);
    keys
}

/// The variable that sets the key at `path`.
pub fn variable(path: &[String]) -> String {
    format!("SIGNET_{}", path.join("_").to_ascii_uppercase())
}

fn collect<T: DeserializeOwned>(table: &mut Vec<String>, keys: &mut Keys) {
    for field in fields_of::<T>(table, false).unwrap_or_default() {
        table.push(field);
        // A table of its own recurses; anything else (arrays of tables included) is a leaf.
        if fields_of::<T>(table, false).is_some() {
            collect::<T>(table, keys);
        } else {
            keys.insert(variable(table), table.clone());
        }
        table.pop();
    }
}

/// The keys the table at `path` accepts, read from the refusal of a key it cannot have;
/// `None` if `path` is not a table that refuses unknown keys.
fn fields_of<T: DeserializeOwned>(path: &[String], array: bool) -> Option<Vec<String>> {
    const PROBE: &str = "zz_signet_probe";
    let text = match (path.is_empty(), array) {
        (true, _) => format!("{PROBE} = 1\n"),
        (false, false) => format!("[{}]\n{PROBE} = 1\n", path.join(".")),
        (false, true) => format!("[[{}]]\n{PROBE} = 1\n", path.join(".")),
    };
    let err = toml::from_str::<T>(&text).err()?.message().to_string();
    let list = err.strip_prefix(&format!("unknown field `{PROBE}`, expected"))?;
    Some(list.split('`').skip(1).step_by(2).map(str::to_string).collect())
}

/// Sets each `SIGNET_*` variable that names one of `keys` into `table` (the config file's, or
/// empty), each value as `T` takes it,
/// in the variables' order. Returns the variables that look like a table's key but name none
/// (`SIGNET_LOG_BATCH_MAX_ENTRYS`), for `serve` and `config check` to point out: a misspelled
/// name does nothing. Other `SIGNET_*` names (a script's own) are not the config's business.
pub fn overlay<T: DeserializeOwned>(
    keys: &Keys,
    table: &mut toml::Table,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<String>, ConfigError> {
    let mut vars: Vec<(String, String)> = vars.into_iter().filter(|(k, _)| k.starts_with("SIGNET_")).collect();
    vars.sort();
    let mut unknown = Vec::new();
    for (name, raw) in vars {
        let Some(path) = keys.get(&name) else {
            if !NOT_KEYS.contains(&name.as_str()) && in_a_table(keys, &name) {
                unknown.push(name);
            }
            continue;
        };
        // The value as TOML where that is what the key takes, else as the string it is.
        let mut tried = None;
        for value in [as_toml(&raw), Some(toml::Value::String(raw.clone()))].into_iter().flatten() {
            let mut candidate = table.clone();
            set(&mut candidate, &name, path, value)?;
            match candidate.clone().try_into::<T>() {
                Ok(_) => {
                    *table = candidate;
                    tried = None;
                    break;
                }
                Err(e) => tried = Some(e.message().to_string()),
            }
        }
        if let Some(why) = tried {
            return Err(ConfigError::Env { name, why: format!("{why} (for {})", path.join(".")) });
        }
    }
    Ok(unknown)
}

/// Whether `name` begins as a table's variables do (`SIGNET_GUARD_AUDIT_`).
fn in_a_table(keys: &Keys, name: &str) -> bool {
    keys.values().any(|path| (1..path.len()).any(|n| name.starts_with(&format!("{}_", variable(&path[..n])))))
}

/// `raw` as one TOML value, if it is one (and nothing more: no second key smuggled in).
fn as_toml(raw: &str) -> Option<toml::Value> {
    let mut parsed: toml::Table = toml::from_str(&format!("v = {raw}")).ok()?;
    (parsed.len() == 1).then(|| parsed.remove("v")).flatten()
}

/// Sets `path` (the key of variable `name`) to `value` in `table`.
fn set(table: &mut toml::Table, name: &str, path: &[String], value: toml::Value) -> Result<(), ConfigError> {
    let (last, tables) = path.split_last().ok_or_else(|| ConfigError::EnvEmptyKey { name: name.to_string() })?;
    let mut at = table;
    for segment in tables {
        let entry = at.entry(segment.clone()).or_insert_with(|| toml::Value::Table(Default::default()));
        at = entry.as_table_mut().ok_or_else(|| ConfigError::EnvNotATable { name: name.to_string(), segment: segment.clone() })?;
    }
    at.insert(last.clone(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{env_keys, Config};

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn load(file: &str, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut table: toml::Table = toml::from_str(file).unwrap();
        overlay::<Config>(env_keys(), &mut table, vars(pairs))?;
        Ok(table.try_into::<Config>().unwrap())
    }

    #[test]
    fn every_key_of_every_table_has_a_variable() {
        let keys = env_keys();
        // The names issue 44 found missing, and those that were always there, all derived.
        for name in [
            "SIGNET_LISTEN",
            "SIGNET_PUBLIC_URL",
            "SIGNET_LOG_BATCH_MAX_ENTRIES",
            "SIGNET_LOG_WITNESSES_QUORUM",
            "SIGNET_LOG_WITNESSES_MEMBERS",
            "SIGNET_KEYS_PKCS11_PIN",
            "SIGNET_LIMITS_MAX_BODY_BYTES",
            "SIGNET_HTTP_METRICS_LISTEN",
            "SIGNET_OIDC_ISSUERS",
            "SIGNET_TLS_CLIENT_AUTH",
            "SIGNET_TUF_TIMESTAMP_EXPIRY_SECS",
            "SIGNET_GUARD_RATE_LIMIT_ENABLED",
            "SIGNET_GUARD_AUDIT_MODE",
            "SIGNET_GUARD_REDIS_URL",
            "SIGNET_GUARD_ROLES",
            "SIGNET_WITNESS_LOGS",
            "SIGNET_MONITOR_WATCH",
            "SIGNET_TRACING_OTLP_ENDPOINT",
        ] {
            assert!(keys.contains_key(name), "{name} missing from {:?}", keys.keys().collect::<Vec<_>>());
        }
        assert!(keys.len() > 100, "{}", keys.len());
        // No two keys share a variable, and no variable read elsewhere names a key.
        let paths: std::collections::BTreeSet<_> = keys.values().collect();
        assert_eq!(paths.len(), keys.len());
        for name in NOT_KEYS {
            assert!(!keys.contains_key(name), "{name} is read elsewhere but names a key");
        }
    }

    #[test]
    fn a_value_is_typed_where_the_key_takes_a_type_and_a_string_otherwise() {
        let cfg = load(
            "[log]\nbatch_max_entries = 16\n",
            &[
                ("SIGNET_LOG_BATCH_MAX_ENTRIES", "512"),
                ("SIGNET_GUARD_RATE_LIMIT_ENABLED", "true"),
                ("SIGNET_PUBLIC_URL", "https://log.example.com"),
                // A string key given something that reads as a number stays the string.
                ("SIGNET_TLS_KEY", "123"),
                ("SIGNET_OIDC_ISSUERS", r#"[{ url = "https://idp.example", type = "email" }]"#),
            ],
        )
        .unwrap();
        assert_eq!(cfg.log.batch_max_entries, 512, "the variable wins over the file");
        assert!(cfg.guard.rate_limit.enabled);
        assert_eq!(cfg.public_url.as_deref(), Some("https://log.example.com"));
        assert_eq!(cfg.tls.key.as_deref(), Some(std::path::Path::new("123")));
        assert_eq!(cfg.oidc.issuers.len(), 1);
    }

    #[test]
    fn a_bad_value_names_its_variable_and_key_and_an_unknown_name_is_returned() {
        let err = load("", &[("SIGNET_LOG_BATCH_MAX_ENTRIES", "many")]).unwrap_err().to_string();
        assert!(err.contains("SIGNET_LOG_BATCH_MAX_ENTRIES") && err.contains("log.batch_max_entries"), "{err}");
        // A second key cannot ride in on a value.
        let err = load("", &[("SIGNET_LOG_BATCH_MAX_ENTRIES", "1\n[tls]\nplain_http = true")]).unwrap_err().to_string();
        assert!(err.contains("SIGNET_LOG_BATCH_MAX_ENTRIES"), "{err}");
        let mut table = toml::Table::new();
        let unknown = overlay::<Config>(
            env_keys(),
            &mut table,
            vars(&[
                ("SIGNET_LOG_BATCH_MAX_ENTRYS", "1"),
                ("SIGNET_GUARD_AUDIT_MODES", "closed"),
                ("SIGNET_LOG", "debug"),
                ("SIGNET_LOG_FORMAT", "json"),
                // A script's own variable, in no table: not the config's.
                ("SIGNET_TEST_POSTGRES", "postgres://"),
                ("PATH", "/bin"),
            ]),
        )
        .unwrap();
        assert_eq!(unknown, ["SIGNET_GUARD_AUDIT_MODES", "SIGNET_LOG_BATCH_MAX_ENTRYS"]);
        assert!(table.is_empty());
    }
}
