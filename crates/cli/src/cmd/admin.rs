//! `signet admin`: API tokens and bans in `<data dir>/guard.sqlite`, and the logs' shards.
//!
//! A running server that shares the data dir picks every token and ban change up within
//! about 200 ms (signet_guard::guard), so a revoked token stops working without a restart.
//! A log rotation is offline: it refuses to run beside a server.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_guard::client::ClientKey;
use signet_guard::store::{self, Store};
use signet_guard::Role;

#[derive(clap::Subcommand)]
pub enum Admin {
    /// API tokens: create, list, revoke.
    #[command(subcommand)]
    Token(TokenCmd),
    /// Bans of clients refused too often: list, lift.
    #[command(subcommand)]
    Ban(BanCmd),
    /// The transparency logs: rotate (start a new shard).
    #[command(subcommand)]
    Log(LogCmd),
    /// The role table in force: each role and the permissions it grants (built in, and
    /// `[guard.roles]` from --config).
    Roles {
        /// The server's config file, for its `[guard.roles]`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Subcommand)]
pub enum LogCmd {
    /// Freeze the active shard of a log and start a new one with its own key. A Rekor v1
    /// shard also has its own tree ID and origin, and old shards stay readable and provable;
    /// a CT or Rekor v2 log rotates into a new log (new key, so new log ID; its own tree from
    /// index 0). The trust documents list every shard's key with its validity window.
    /// Offline on a data dir or database (stop every instance first), or online through any
    /// running instance (--url).
    Rotate {
        #[command(flatten)]
        dir: DataDir,
        /// Which log: rekor-v1, rekor-v2 or ct.
        #[arg(long)]
        log: String,
        /// Rotate online instead, through this running instance (its base URL; on PostgreSQL
        /// any instance, and the others follow). Appends wait a moment, then go to the new shard.
        #[arg(long, value_name = "URL", requires = "token", conflicts_with = "storage")]
        url: Option<String>,
        /// An admin API token for --url (or the SIGNET_TOKEN environment variable).
        #[arg(long, env = "SIGNET_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Offline: the instance's config, whose `[keys]` say where shard 0's key is (a new
        /// shard's key is made beside it on a token or in KMS, else as a file).
        #[arg(long, conflicts_with = "url")]
        config: Option<PathBuf>,
        /// Only make the next shard's key and publish it (trust documents, TUF) beside the
        /// active one, signing nothing yet; rotate later, once clients have the new trusted
        /// root, and the rotation takes this key. Online (--url).
        #[arg(long, requires = "url")]
        prepare: bool,
    },
    /// Make the Rekor v1 entries logged before search by identity and key existed (signet
    /// before those indexes) searchable by them: their signer's identity and key are read
    /// from their stored bodies. Online, through a running instance: appends and searches go
    /// on, and a run stopped midway (a restart) resumes where it stopped. Prints each
    /// shard's count when done.
    Reindex {
        /// The running instance (its base URL; on PostgreSQL any instance).
        #[arg(long, value_name = "URL")]
        url: String,
        /// An admin API token (or the SIGNET_TOKEN environment variable).
        #[arg(long, env = "SIGNET_TOKEN", hide_env_values = true)]
        token: String,
        /// Only start it, and print its status; `GET /api/admin/log/reindex` says how far it is.
        #[arg(long)]
        no_wait: bool,
    },
}

#[derive(clap::Args)]
pub struct DataDir {
    /// The server's data dir (it holds guard.sqlite).
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// The instances' PostgreSQL (`storage = "postgres://…"`), where their tokens and bans
    /// live instead of the data dir.
    #[arg(long, value_name = "URL")]
    storage: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum TokenCmd {
    /// Create a token and print it, alone, on stdout. Only its SHA-256 is stored: save it now.
    Create {
        #[command(flatten)]
        dir: DataDir,
        /// admin, signer, reader, auditor, or a role `[guard.roles]` defines (see `admin roles`).
        #[arg(long)]
        role: Role,
        /// The server's config file: the role is checked against its `[guard.roles]`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        life: Lifetime,
        /// A unique name to list and revoke it by (default: token-<id>).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Give a token a new secret and a new expiry; print the new token alone on stdout. Same
    /// id, name and role; the old secret stops working on every server within a moment.
    Rotate {
        #[command(flatten)]
        dir: DataDir,
        /// The token's name or id.
        token: String,
        #[command(flatten)]
        life: Lifetime,
    },
    /// List tokens: id, name, role, expiry, revocation. Never the tokens themselves.
    List {
        #[command(flatten)]
        dir: DataDir,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by name or id.
    Revoke {
        #[command(flatten)]
        dir: DataDir,
        /// The token's name or id.
        token: String,
    },
}

/// Where a token may be used: each flag repeats, and each given one is a limit.
#[derive(clap::Args)]
pub struct ScopeArgs {
    /// Only this route: "METHOD /template" or "/template" (any method), as docs/guard.md
    /// lists them, e.g. "POST /api/v2/log/entries".
    #[arg(long = "route", value_name = "ROUTE")]
    routes: Vec<signet_guard::scope::RouteRule>,
    /// Only this log's routes: rekor-v1, rekor-v2 or ct (other routes are not limited by it).
    #[arg(long = "log", value_name = "LOG")]
    logs: Vec<String>,
    /// Only from this network: an address or CIDR range, e.g. 10.0.0.0/8.
    #[arg(long = "network", value_name = "CIDR")]
    networks: Vec<signet_guard::client::Cidr>,
    /// Only certificates for identities like this (`*` for any run), e.g. "*@example.com".
    #[arg(long = "identity", value_name = "PATTERN")]
    identities: Vec<signet_guard::scope::IdentityPattern>,
}

impl ScopeArgs {
    fn scope(self) -> Result<signet_guard::TokenScope, String> {
        let scope = signet_guard::TokenScope { routes: self.routes, logs: self.logs, networks: self.networks, identities: self.identities };
        let routes: Vec<(http::Method, &str)> = signet_server::api::route_list().into_iter().map(|(m, t, _)| (m, t)).collect();
        scope.validate(&routes).map_err(|e| e.to_string())?;
        Ok(scope)
    }
}

/// How long a token lives.
#[derive(clap::Args)]
pub struct Lifetime {
    /// Lifetime in seconds, from now.
    #[arg(long, default_value_t = 86_400, conflicts_with = "no_expiry")]
    ttl: u64,
    /// Never expire (a token for a long-lived service; rotate it now and then).
    #[arg(long)]
    no_expiry: bool,
}

impl Lifetime {
    /// The lifetime (`Some(None)`: no expiry), or `None` after printing why it is not valid.
    fn ttl_or_say_why(&self) -> Option<Option<u64>> {
        match (self.no_expiry, self.ttl) {
            (true, _) => Some(None),
            (false, 0) => {
                errln!("signet admin: --ttl must be at least 1 second (or --no-expiry)");
                None
            }
            (false, t) => Some(Some(t)),
        }
    }
}

#[derive(clap::Subcommand)]
pub enum BanCmd {
    /// List the bans in force.
    List {
        #[command(flatten)]
        dir: DataDir,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Lift the ban of a client: an IP address, ip:ADDR, token:ID or oidc:KEY (an OIDC
    /// identity), as `ban list` shows it.
    Lift {
        #[command(flatten)]
        dir: DataDir,
        client: String,
        /// Also lift the ban shared through this Redis (`guard.redis.url`), which every
        /// instance honours.
        #[arg(long, value_name = "URL")]
        redis: Option<String>,
        /// For a rediss:// URL: the PEM file of the CA that signed Redis's certificate
        /// (`guard.redis.ca_file`), trusted instead of the system's roots.
        #[arg(long, value_name = "FILE", requires = "redis")]
        redis_ca: Option<std::path::PathBuf>,
    },
}


pub fn run(cmd: Admin) -> ExitCode {
    match execute(cmd) {
        Ok(code) => code,
        Err(message) => {
            errln!("signet admin: {message}");
            ExitCode::FAILURE
        }
    }
}

fn open(dir: &DataDir) -> Result<Store, String> {
    if let Some(url) = &dir.storage {
        if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            return Err(format!("--storage {url:?}: tokens and bans leave the data dir only for PostgreSQL (postgres://…)"));
        }
        return Store::open_postgres(url).map_err(|e| e.to_string());
    }
    if !dir.data_dir.is_dir() {
        return Err(format!("data dir {} does not exist", dir.data_dir.display()));
    }
    Store::open(&dir.data_dir).map_err(|e| e.to_string())
}

/// The built-in roles, and `[guard.roles]` of `config` if given.
fn role_table(config: Option<&std::path::Path>) -> Result<signet_guard::Roles, String> {
    match config {
        None => Ok(signet_guard::Roles::default()),
        Some(path) => {
            let cfg = signet_server::Config::load(Some(path)).map_err(|e| e.to_string())?;
            signet_guard::Roles::with_custom(&cfg.guard.roles).map_err(|e| e.to_string())
        }
    }
}

/// A scope on one line: `unlimited`, or its JSON.
fn scope_text(scope: &signet_guard::TokenScope) -> String {
    match scope.is_unlimited() {
        true => "unlimited".into(),
        false => serde_json::to_string(scope).unwrap_or_default(),
    }
}

fn when(t: Option<u64>, none: &str) -> String {
    t.map_or_else(|| none.to_string(), |t| format!("{t} ({})", relative(t)))
}

fn relative(t: u64) -> String {
    let now = store::now();
    if t >= now {
        format!("in {} s", t - now)
    } else {
        format!("{} s ago", now - t)
    }
}

fn execute(cmd: Admin) -> Result<ExitCode, String> {
    match cmd {
        Admin::Token(TokenCmd::Create { dir, role, config, life, name, scope }) => {
            let Some(ttl) = life.ttl_or_say_why() else { return Ok(ExitCode::from(2)) };
            let scope = match scope.scope() {
                Ok(scope) => scope,
                Err(why) => {
                    errln!("signet admin: {why}");
                    return Ok(ExitCode::from(2));
                }
            };
            let roles = role_table(config.as_deref())?;
            if !roles.defines(&role) {
                let names: Vec<String> = roles.table().into_iter().map(|(r, _)| r.to_string()).collect();
                let hint = if config.is_some() { "" } else { "; a custom role needs --config FILE with its [guard.roles]" };
                errln!("signet admin: role \"{role}\" is not defined (defined: {}){hint}", names.join(", "));
                return Ok(ExitCode::from(2));
            }
            let (new, record) = open(&dir)?.create_token(name.as_deref(), role, ttl, scope).map_err(|e| e.to_string())?;
            outln!("{}", new.plaintext);
            errln!(
                "created token {} ({}, role {}: {}; scope: {}); it is shown only this once",
                record.name,
                record.id,
                record.role,
                roles.permissions(&record.role),
                scope_text(&record.scope)
            );
        }
        Admin::Token(TokenCmd::List { dir, json }) => {
            let tokens = open(&dir)?.tokens().map_err(|e| e.to_string())?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&tokens).expect("serializes"));
            } else {
                outln!("{:<16}  {:<20}  {:<6}  {:<28}  {:<20}  scope", "id", "name", "role", "expires", "revoked");
                for t in tokens {
                    outln!(
                        "{:<16}  {:<20}  {:<6}  {:<28}  {:<20}  {}",
                        t.id,
                        t.name,
                        t.role,
                        when(t.expires, "never"),
                        when(t.revoked, "no"),
                        scope_text(&t.scope)
                    );
                }
            }
        }
        Admin::Token(TokenCmd::Rotate { dir, token, life }) => {
            let Some(ttl) = life.ttl_or_say_why() else { return Ok(ExitCode::from(2)) };
            let (new, record) = open(&dir)?.rotate(&token, ttl).map_err(|e| e.to_string())?;
            outln!("{}", new.plaintext);
            errln!(
                "rotated token {} ({}, role {}), expires {}; the old secret no longer works. The new one is shown only this once",
                record.name,
                record.id,
                record.role,
                when(record.expires, "never")
            );
        }
        Admin::Token(TokenCmd::Revoke { dir, token }) => {
            let t = open(&dir)?.revoke(&token).map_err(|e| e.to_string())?;
            errln!("revoked token {} ({})", t.name, t.id);
        }
        Admin::Ban(BanCmd::List { dir, json }) => {
            let bans = open(&dir)?.bans().map_err(|e| e.to_string())?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&bans).expect("serializes"));
            } else {
                outln!("{:<40}  {:<26}  reason", "client", "until");
                for b in bans {
                    outln!("{:<40}  {:<26}  {}", b.client.to_string(), when(Some(b.until), ""), b.reason);
                }
            }
        }
        Admin::Ban(BanCmd::Lift { dir, client, redis, redis_ca }) => {
            let client: ClientKey = match client.parse() {
                Ok(c) => c,
                Err(e) => {
                    errln!("signet admin: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let local = open(&dir)?.lift(&client).map_err(|e| e.to_string())?;
            let shared = match &redis {
                Some(url) => signet_guard::shared::SharedLimits::lift(url, redis_ca.as_deref(), &client).map_err(|e| e.to_string())?,
                None => false,
            };
            if !local && !shared {
                let where_ = if redis.is_some() { "here or in Redis" } else { "here (a ban shared through Redis needs --redis URL)" };
                return Err(format!("{client} is not banned {where_}"));
            }
            errln!("lifted the ban of {client}{}", if shared { ", on every instance" } else { "" });
        }
        Admin::Roles { config, json } => {
            let roles = role_table(config.as_deref())?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&signet_server::api::admin::roles_json(&roles)).expect("serializes"));
            } else {
                outln!("{:<20}  permissions", "role");
                for (role, perms) in roles.table() {
                    outln!("{:<20}  {}", role.to_string(), perms);
                }
            }
        }
        Admin::Log(LogCmd::Reindex { url, token, no_wait }) => reindex(&url, &token, no_wait)?,
        Admin::Log(LogCmd::Rotate { log, url: Some(url), token: Some(token), prepare: true, .. }) => {
            let endpoint = format!("{}/api/admin/log/rotate", url.trim_end_matches('/'));
            let report = signet_client::http::Http::new(std::time::Duration::from_secs(120))
                .post_json("admin API", &endpoint, &serde_json::json!({"log": log, "prepare": true}), Some(&token))
                .map_err(|e| e.to_string())?;
            outln!("{report}");
            errln!(
                "the {log} log's next key (shard {}) is published in the trust documents and TUF from {}, and signs nothing yet. \
                 Once clients have the new trusted root, rotate: signet admin log rotate --log {log} --url {url}",
                report["prepared"]["shard"], report["prepared"]["publishedFrom"]
            );
        }
        Admin::Log(LogCmd::Rotate { dir, log, url, token, config, .. }) => {
            let online = url.is_some();
            let report = match (url, token) {
                (Some(url), Some(token)) => {
                    let endpoint = format!("{}/api/admin/log/rotate", url.trim_end_matches('/'));
                    signet_client::http::Http::new(std::time::Duration::from_secs(120))
                        .post_json("admin API", &endpoint, &serde_json::json!({"log": log}), Some(&token))
                        .map_err(|e| e.to_string())?
                }
                _ => {
                    let cfg = signet_server::Config::load(config.as_deref()).map_err(|e| e.to_string())?;
                    let homes = signet_server::shards::KeyHomes::of(&cfg.keys);
                    signet_server::shards::rotation_report(&signet_server::shards::rotate(&dir.data_dir, dir.storage.as_deref(), &log, &homes).map_err(|e| e.to_string())?)
                }
            };
            outln!("{report}");
            let key = report["key"].as_str().unwrap_or("the new key");
            match report["active"].get("startIndex") {
                _ if online => errln!(
                    "froze the {log} log's shard {} at {} entries; shard {} (log ID {}) takes the appends now, and the trust documents \
                     served list both keys. Instances on the same PostgreSQL take the new key from the database",
                    report["frozen"]["shard"], report["frozen"]["treeSize"], report["active"]["shard"], report["active"]["logID"]
                ),
                Some(start) => errln!(
                    "froze Rekor v1 shard {} at {} entries; shard {} (tree {}) takes the appends from log index {}. \
                     Copy {key} to every instance's data dir, and export the trust documents again: they list both keys",
                    report["frozen"]["shard"], report["frozen"]["treeSize"], report["active"]["shard"], report["active"]["treeID"], start
                ),
                None => errln!(
                    "froze the {log} log (shard {}) at {} entries; shard {}, a new log with log ID {}, takes the appends from the next start. \
                     Copy {key} to every instance's data dir; the next start publishes the trust documents with both keys",
                    report["frozen"]["shard"], report["frozen"]["treeSize"], report["active"]["shard"], report["active"]["logID"]
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `signet admin log reindex`: starts the job, then (unless `no_wait`) follows it to its end,
/// a line on stderr at most every few seconds, and prints the final status.
fn reindex(url: &str, token: &str, no_wait: bool) -> Result<(), String> {
    let endpoint = format!("{}/api/admin/log/reindex", url.trim_end_matches('/'));
    let http = signet_client::http::Http::new(std::time::Duration::from_secs(60));
    let mut status = http.post_json("admin API", &endpoint, &serde_json::json!({"log": "rekor-v1"}), Some(token)).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let mut said = std::time::Instant::now();
    while !no_wait && status["state"] == "running" {
        std::thread::sleep(std::time::Duration::from_millis(200));
        status = http.get_json("admin API", &endpoint, Some(token)).map_err(|e| e.to_string())?;
        if said.elapsed() >= std::time::Duration::from_secs(5) {
            said = std::time::Instant::now();
            let shards = status["shards"].as_array().map(Vec::as_slice).unwrap_or_default();
            let (through, size) = shards.iter().fold((0, 0), |(t, s), sh| (t + sh["through"].as_u64().unwrap_or(0), s + sh["treeSize"].as_u64().unwrap_or(0)));
            errln!("reindexing: {through} of {size} entries looked at ({:.0} s)", started.elapsed().as_secs_f64());
        }
    }
    outln!("{}", serde_json::to_string_pretty(&status).unwrap_or_default());
    match status["state"].as_str() {
        Some("failed") => Err(format!(
            "the reindex stopped: {}. Run it again to resume where it stopped",
            status["error"].as_str().unwrap_or("no reason given")
        )),
        Some("done") => {
            let shards = status["shards"].as_array().map(Vec::as_slice).unwrap_or_default();
            let indexed: u64 = shards.iter().map(|sh| sh["indexed"].as_u64().unwrap_or(0)).sum();
            errln!("done: {indexed} entries logged before search by identity and key are searchable by them now");
            Ok(())
        }
        _ => Ok(()),
    }
}
