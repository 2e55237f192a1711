//! The workspace itself, held to the rules: no import circle inside any crate, and no
//! `Result<_, String>` in a library crate (only the binary's top level may print a string). A
//! change that breaks either fails here, naming the lines.

use std::path::Path;

use signet_house::{circles, crate_roots, string_errors, tree::Crate};

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn no_crate_has_an_import_circle() {
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
    assert!(found.is_empty(), "{} import circles inside crates:\n{}", found.len(), found.join("\n"));
}

#[test]
fn no_library_crate_returns_a_string_error() {
    let mut found = Vec::new();
    for root in crate_roots(workspace()).expect("crates/ lists") {
        if root.file_name().is_some_and(|f| f == "main.rs") {
            continue;
        }
        let krate = Crate::read(&root).unwrap_or_else(|e| panic!("{e}"));
        found.extend(string_errors::find(&krate).unwrap_or_else(|e| panic!("{e}")));
    }
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(found.is_empty(), "{} Result<_, String> in library crates (give each a typed error):\n{}", found.len(), list.join("\n"));
}
