//! `signet`: a thin command-line front over the service crates.

#[macro_use]
mod output;
mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// The request path allocates many small, short-lived buffers (JSON, base64, PEM); mimalloc
// handles that pattern with far less contention than glibc's malloc across worker threads.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "signet", version, about = "A self-hosted, Sigstore-compatible artifact signing service")]
struct Cli {
    /// Log line format on stderr: text (default) or json (one object per line).
    #[arg(long, global = true, value_name = "text|json", env = "SIGNET_LOG_FORMAT", default_value = "text")]
    log_format: signet_server::logging::Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Operate the guard: API tokens and bans, shared with a running server via the data dir.
    #[command(subcommand)]
    Admin(cmd::admin::Admin),
    /// The audit log: check its hash chain.
    #[command(subcommand)]
    Audit(cmd::audit::Audit),
    /// Copy the data dir (--data-dir) consistently while its server runs (`restore` makes the copy take appends).
    Backup(cmd::backup::Args),
    /// Bring a log along from another service: `import rekor`.
    #[command(subcommand)]
    Import(cmd::import::ImportCmd),
    /// Create a production instance's keys, certificates and config (`serve` without --dev needs them).
    Init(cmd::init::Args),
    /// Apply the storage schema's migrations and exit (`serve` also applies them at start).
    Migrate(cmd::migrate::Args),
    /// Follow transparency logs: verify their checkpoints and alert on watched identities.
    Monitor(cmd::monitor::Args),
    /// Continue each log of a backup (its --data-dir), or of a PostgreSQL database restored from a dump (--storage), in a new shard, so that serving it never forks a log.
    Restore(cmd::restore::Args),
    /// Run the server.
    Serve(cmd::serve::Args),
    /// The configuration: print every option (`example`), or validate a file (`check`).
    #[command(subcommand)]
    Config(cmd::config::ConfigCmd),
    /// Check a config, its keys, storage and TUF metadata, and the running instance.
    Doctor(cmd::doctor::Args),
    /// Is the instance on this machine alive (/healthz) or ready (--ready: /readyz)? Exit 0 or 1.
    Probe(cmd::probe::Args),
    /// Print an identity token from the development OIDC issuer of a `serve --dev` data dir.
    DevToken(cmd::dev_token::Args),
    /// Trust distribution: export the documents clients verify with.
    Trust(cmd::trust::Args),
    /// The TUF repository that publishes them: its status, and signing with offline keys.
    #[command(subcommand)]
    Tuf(cmd::tuf::Tuf),
    /// The performance lab: load generation and reports.
    #[cfg(feature = "lab")]
    Bench(cmd::bench::Args),
    /// The performance lab, which this build leaves out (the cargo feature `lab`).
    #[cfg(not(feature = "lab"))]
    #[command(hide = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    /// Sign a file keylessly into a Sigstore bundle (sigstore-conformance protocol).
    SignBundle(cmd::sign_bundle::Args),
    /// Verify a Sigstore bundle offline (sigstore-conformance protocol).
    VerifyBundle(cmd::verify_bundle::Args),
    /// Witnessing: the keys of a witness and of a witnessed log.
    #[command(subcommand)]
    Witness(cmd::witness::Witness),
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors, which is the contract.
    let cli = Cli::parse();
    // `serve` installs its own, once its config says whether spans are exported too.
    if !matches!(cli.command, Command::Serve(_)) {
        signet_server::logging::init(cli.log_format);
    }
    match cli.command {
        Command::Admin(args) => cmd::admin::run(args),
        Command::Audit(args) => cmd::audit::run(args),
        Command::Backup(args) => cmd::backup::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Init(args) => cmd::init::run(args),
        Command::Migrate(args) => cmd::migrate::run(args),
        Command::Monitor(args) => cmd::monitor::run(args),
        Command::Restore(args) => cmd::restore::run(args),
        Command::Serve(args) => cmd::serve::run(args, cli.log_format),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Probe(args) => cmd::probe::run(args),
        Command::Config(args) => cmd::config::run(args),
        Command::DevToken(args) => cmd::dev_token::run(args),
        Command::Trust(args) => cmd::trust::run(args),
        Command::Tuf(args) => cmd::tuf::run(args),
        #[cfg(feature = "lab")]
        Command::Bench(args) => cmd::bench::run(args),
        #[cfg(not(feature = "lab"))]
        Command::Bench { .. } => {
            errln!("error: this signet was built without the performance lab (the cargo feature `lab`); a checkout's `cargo run --release -- bench …` has it");
            ExitCode::from(2)
        }
        Command::SignBundle(args) => cmd::sign_bundle::run(args),
        Command::VerifyBundle(args) => cmd::verify_bundle::run(args),
        Command::Witness(args) => cmd::witness::run(args),
    }
}
