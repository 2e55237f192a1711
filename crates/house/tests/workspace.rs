//! The workspace itself, held to the rules.
//!
//! Issue 45 brings both counts to zero. Until then each is a ceiling that only goes down: a change
//! that adds a circle or a string error fails here, naming the lines.

use std::path::Path;

use signet_house::{circles, crate_roots, string_errors, tree::Crate};

/// Import circles inside crates, at most.
const CIRCLES_AT_MOST: usize = 2;
/// `Result<_, String>` in library crates (everything but the binary), at most.
const STRING_ERRORS_AT_MOST: usize = 250;

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn circles_inside_crates_do_not_grow() {
    let mut found = Vec::new();
    for root in crate_roots(workspace()).expect("crates/ lists") {
        let krate = Crate::read(&root).unwrap_or_else(|e| panic!("{e}"));
        for circle in circles::circles(&krate) {
            let pairs: Vec<String> = circle
                .pairs()
                .iter()
                .map(|(from, to, sites)| format!("{} -> {} (line {})", from.display(), to.display(), sites[0].line))
                .collect();
            found.push(pairs.join("; "));
        }
    }
    assert!(found.len() <= CIRCLES_AT_MOST, "{} circles, at most {CIRCLES_AT_MOST}:\n{}", found.len(), found.join("\n"));
}

#[test]
fn string_errors_in_library_crates_do_not_grow() {
    let mut found = Vec::new();
    for root in crate_roots(workspace()).expect("crates/ lists") {
        if root.file_name().is_some_and(|f| f == "main.rs") {
            continue;
        }
        let krate = Crate::read(&root).unwrap_or_else(|e| panic!("{e}"));
        found.extend(string_errors::find(&krate).unwrap_or_else(|e| panic!("{e}")));
    }
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        found.len() <= STRING_ERRORS_AT_MOST,
        "{} Result<_, String>, at most {STRING_ERRORS_AT_MOST}:\n{}",
        found.len(),
        list.join("\n")
    );
}
