//! `signet-house [WORKSPACE]`: the import circles inside each crate, and the string errors in the
//! library crates, each with the lines that make it. Exits 1 when a crate has a circle; the
//! string errors are a count on its way down (the workspace test holds its ceiling).

use std::path::PathBuf;
use std::process::ExitCode;

use signet_house::{circles, crate_roots, string_errors, tree::Crate};

fn main() -> ExitCode {
    let workspace = std::env::args_os().nth(1).map_or_else(|| PathBuf::from("."), PathBuf::from);
    match report(&workspace) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("signet-house: {e}");
            ExitCode::from(2)
        }
    }
}

fn report(workspace: &std::path::Path) -> Result<usize, Box<dyn std::error::Error>> {
    let (mut circle_count, mut string_count) = (0, 0);
    for root in crate_roots(workspace)? {
        let krate = Crate::read(&root)?;
        for circle in circles::circles(&krate) {
            circle_count += 1;
            println!("circle in {}:", root.display());
            for (from, to, sites) in circle.pairs() {
                println!("  {} -> {}: {} (line {})", from.display(), to.display(), sites.len(), sites[0].line);
            }
        }
        if root.file_name().is_some_and(|f| f == "lib.rs") {
            for site in string_errors::find(&krate)? {
                string_count += 1;
                println!("Result<_, String> at {site}");
            }
        }
    }
    println!("{circle_count} circles inside crates; {string_count} Result<_, String> in library crates");
    Ok(circle_count)
}
