//! The end of every `signet bench` subcommand that measures: its result to `--json PATH`.

/// Writes `result` to `path`, when given, as pretty JSON; false (said on stderr) when it cannot
/// be written. `cmd` names the subcommand in the message, e.g. `load`.
pub fn write_json(cmd: &str, path: Option<&std::path::Path>, result: &impl serde::Serialize) -> bool {
    let Some(path) = path else { return true };
    let text = serde_json::to_string_pretty(result).expect("results serialize");
    match std::fs::write(path, text) {
        Ok(()) => true,
        Err(e) => {
            errln!("signet bench {cmd}: writing {}: {e}", path.display());
            false
        }
    }
}
