//! The checker on small crates made to keep or break the rules, so that a clean workspace means
//! something.

use std::path::{Path, PathBuf};

use signet_house::{circles, string_errors, tree::Crate};

fn root(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crates").join(name).join("src/lib.rs")
}

fn file_names(files: &[PathBuf]) -> Vec<String> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crates");
    files.iter().map(|f| f.strip_prefix(&base).unwrap_or(f).display().to_string()).collect()
}

#[test]
fn circles_between_siblings_through_super_and_behind_a_used_re_export_are_all_found() {
    let krate = Crate::read(&root("circle")).expect("the fixture crate reads");
    let found = circles::circles(&krate);
    let mut files: Vec<Vec<String>> = found.iter().map(|c| file_names(&c.files)).collect();
    files.sort();
    assert_eq!(
        files,
        vec![
            vec!["circle/src/config.rs".to_string(), "circle/src/feature.rs".to_string()],
            vec!["circle/src/inner/child.rs".to_string(), "circle/src/inner/mod.rs".to_string()],
            vec!["circle/src/reexport/mod.rs".to_string(), "circle/src/reexport/part.rs".to_string()],
        ]
    );
    let config = found.iter().find(|c| c.files.iter().any(|f| f.ends_with("config.rs"))).expect("config's circle");
    let lines: Vec<(String, usize)> =
        config.edges.iter().map(|e| (file_names(&[e.site.file.clone()])[0].clone(), e.site.line)).collect();
    assert_eq!(lines, vec![("circle/src/config.rs".to_string(), 2), ("circle/src/feature.rs".to_string(), 1)]);
}

#[test]
fn a_string_error_is_found_where_it_is_written() {
    let krate = Crate::read(&root("circle")).expect("the fixture crate reads");
    let found = string_errors::find(&krate).expect("the files read");
    let sites: Vec<(String, usize)> =
        found.iter().map(|s| (file_names(&[s.file.clone()])[0].clone(), s.line)).collect();
    assert_eq!(sites, vec![("circle/src/feature.rs".to_string(), 5)]);
}

#[test]
fn re_exports_tests_and_paths_inside_macros_make_no_circle_and_no_finding() {
    let krate = Crate::read(&root("clean")).expect("the fixture crate reads");
    assert!(circles::circles(&krate).is_empty());
    assert!(string_errors::find(&krate).expect("the files read").is_empty());
    // The macro's path is still seen: service.rs depends on settings.rs through format!.
    let edges = circles::edges(&krate);
    let service_to_settings = edges
        .iter()
        .find(|((from, to), _)| from.ends_with("layer/service.rs") && to.ends_with("settings.rs"))
        .map(|(_, sites)| sites.iter().map(|s| s.line).collect::<Vec<_>>());
    assert_eq!(service_to_settings, Some(vec![2, 6, 7]));
}

#[test]
fn a_missing_module_file_is_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("signet-house-missing-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).expect("temp dir");
    std::fs::write(dir.join("src/lib.rs"), "mod absent;\n").expect("write");
    let err = Crate::read(&dir.join("src/lib.rs")).expect_err("absent.rs does not exist");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(err.to_string().contains("mod absent;"), "{err}");
}
