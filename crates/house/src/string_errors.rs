//! `Result<_, String>` outside tests: an error that a caller can only print, never match.

use std::collections::BTreeSet;
use std::path::PathBuf;

use syn::visit::Visit;

use crate::tree::{is_test_only, item_attrs, Crate};
use crate::{Error, Site};

/// Every `Result<_, String>` in the crate's non-test code.
pub fn find(krate: &Crate) -> Result<Vec<Site>, Error> {
    let files: BTreeSet<&PathBuf> = krate.modules.iter().map(|m| &m.file).collect();
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|source| Error::Read { file: file.clone(), source })?;
        let parsed = syn::parse_file(&text).map_err(|source| Error::Parse { file: file.clone(), source })?;
        let mut finder = Finder { file, found: &mut found };
        for item in &parsed.items {
            finder.visit_item(item);
        }
    }
    found.sort();
    Ok(found)
}

struct Finder<'a> {
    file: &'a PathBuf,
    found: &'a mut Vec<Site>,
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        // A `mod x;` is its own file, read on its own.
        if is_test_only(item_attrs(item)) || matches!(item, syn::Item::Mod(m) if m.content.is_none()) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
        if segment.ident == "Result" {
            if let syn::PathArguments::AngleBracketed(args) = &segment.arguments {
                let types: Vec<&syn::Type> = args
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        syn::GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                if let [_, syn::Type::Path(error)] = types.as_slice() {
                    if error.qself.is_none() && error.path.segments.last().is_some_and(|s| s.ident == "String") {
                        let line = segment.ident.span().start().line;
                        self.found.push(Site { file: self.file.clone(), line });
                    }
                }
            }
        }
        syn::visit::visit_path_segment(self, segment);
    }
}
