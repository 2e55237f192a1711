//! A crate's module tree, read as rustc reads it, with what each module defines, imports and names.
//!
//! Items under `#[cfg(test)]` are left out: tests are leaves that may reach anywhere, and an edge
//! from a test to the code it tests is not a layer pointing back up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::{Error, Site};

/// A path as written: `crate::a::B`, `super::C`, `child::D`, with where it was written.
#[derive(Clone, Debug)]
pub struct Reference {
    pub segments: Vec<String>,
    pub line: usize,
}

#[derive(Debug, Default)]
pub struct Module {
    /// From the crate root: empty for the root.
    pub path: Vec<String>,
    pub file: PathBuf,
    pub parent: Option<usize>,
    pub children: BTreeMap<String, usize>,
    /// Names this module defines (types, functions, traits, constants, macros).
    pub items: BTreeSet<String>,
    /// Names brought in by `use`, to the path as written.
    pub imports: BTreeMap<String, Vec<String>>,
    /// `use path::*` paths as written.
    pub globs: Vec<Vec<String>>,
    /// Every path this module names that may lead into the crate.
    pub references: Vec<Reference>,
}

#[derive(Debug, Default)]
pub struct Crate {
    pub root: PathBuf,
    pub modules: Vec<Module>,
}

impl Crate {
    pub fn read(root: &Path) -> Result<Crate, Error> {
        let mut krate = Crate { root: root.to_path_buf(), modules: Vec::new() };
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        let file = parse(root)?;
        let index = krate.add(Vec::new(), root.to_path_buf(), None);
        krate.read_items(index, &file.items, &dir)?;
        Ok(krate)
    }

    fn add(&mut self, path: Vec<String>, file: PathBuf, parent: Option<usize>) -> usize {
        self.modules.push(Module { path, file, parent, ..Module::default() });
        self.modules.len() - 1
    }

    /// `dir` is where this module's `mod x;` children live.
    fn read_items(&mut self, module: usize, items: &[syn::Item], dir: &Path) -> Result<(), Error> {
        let mut reexported = Vec::new();
        let mut used = BTreeSet::new();
        for item in items {
            if is_test_only(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => self.read_mod(module, m, dir)?,
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut leaves);
                    let line = u.use_token.span.start().line;
                    // A re-export (`pub use`) is the module's table of contents, not a dependency of
                    // its own (resolution follows it to the owner), unless the module uses the
                    // name itself: that is decided once the whole module is read.
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    for leaf in leaves {
                        let reference = Reference { segments: leaf.path.clone(), line };
                        match (&leaf.name, reexport) {
                            (_, false) => self.modules[module].references.push(reference),
                            (Some(name), true) => reexported.push((name.clone(), reference)),
                            (None, true) => {}
                        }
                        match leaf.name {
                            Some(name) if name != "_" => {
                                self.modules[module].imports.insert(name, leaf.path);
                            }
                            Some(_) => {}
                            None => self.modules[module].globs.push(leaf.path),
                        }
                    }
                }
                other => {
                    if let Some(name) = defined_name(other) {
                        self.modules[module].items.insert(name);
                    }
                    let mut names = Names::default();
                    names.visit_item(other);
                    self.modules[module].references.extend(names.found);
                    used.extend(names.idents);
                }
            }
        }
        for (name, reference) in reexported {
            if used.contains(&name) {
                self.modules[module].references.push(reference);
            }
        }
        Ok(())
    }

    fn read_mod(&mut self, parent: usize, m: &syn::ItemMod, dir: &Path) -> Result<(), Error> {
        let name = m.ident.to_string();
        let mut path = self.modules[parent].path.clone();
        path.push(name.clone());
        match &m.content {
            Some((_, items)) => {
                let file = self.modules[parent].file.clone();
                let child = self.add(path, file, Some(parent));
                self.modules[parent].children.insert(name.clone(), child);
                self.read_items(child, items, &dir.join(&name))
            }
            None => {
                let file = match path_attr(&m.attrs) {
                    Some(explicit) => dir.join(explicit),
                    None => {
                        let flat = dir.join(format!("{name}.rs"));
                        let nested = dir.join(&name).join("mod.rs");
                        if flat.is_file() {
                            flat
                        } else if nested.is_file() {
                            nested
                        } else {
                            return Err(Error::ModuleNotFound {
                                declared_in: self.modules[parent].file.clone(),
                                name,
                            });
                        }
                    }
                };
                let child_dir = if file.file_name().is_some_and(|f| f == "mod.rs") {
                    file.parent().unwrap_or(dir).to_path_buf()
                } else {
                    dir.join(&name)
                };
                let parsed = parse(&file)?;
                let child = self.add(path, file, Some(parent));
                self.modules[parent].children.insert(name, child);
                self.read_items(child, &parsed.items, &child_dir)
            }
        }
    }

    pub fn site(&self, module: usize, line: usize) -> Site {
        Site { file: self.modules[module].file.clone(), line }
    }
}

fn parse(file: &Path) -> Result<syn::File, Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Read { file: file.to_path_buf(), source })?;
    syn::parse_file(&text).map_err(|source| Error::Parse { file: file.to_path_buf(), source })
}

/// `#[cfg(test)]`, or a `cfg` whose condition needs `test` (`all(test, …)`).
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                let tokens = l.tokens.clone().into_iter().collect::<Vec<_>>();
                match tokens.as_slice() {
                    [TokenTree::Ident(i)] => i == "test",
                    [TokenTree::Ident(all), TokenTree::Group(g)] if all == "all" => {
                        g.stream().into_iter().any(|t| matches!(t, TokenTree::Ident(i) if i == "test"))
                    }
                    _ => false,
                }
            })
    })
}

pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn defined_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(i) => i.ident.to_string(),
        syn::Item::Enum(i) => i.ident.to_string(),
        syn::Item::Fn(i) => i.sig.ident.to_string(),
        syn::Item::Macro(i) => i.ident.as_ref()?.to_string(),
        syn::Item::Static(i) => i.ident.to_string(),
        syn::Item::Struct(i) => i.ident.to_string(),
        syn::Item::Trait(i) => i.ident.to_string(),
        syn::Item::TraitAlias(i) => i.ident.to_string(),
        syn::Item::Type(i) => i.ident.to_string(),
        syn::Item::Union(i) => i.ident.to_string(),
        _ => return None,
    })
}

/// One leaf of a `use` tree: the path, and the name it binds (`None` for a glob).
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
}

fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            // `use a::{self}` binds `a`.
            if name != "self" {
                path.push(name.clone());
            }
            let bound = if name == "self" { prefix.last().cloned().unwrap_or_default() } else { name };
            out.push(UseLeaf { path, name: Some(bound) });
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseLeaf { path, name: Some(r.rename.to_string()) });
        }
        syn::UseTree::Glob(_) => out.push(UseLeaf { path: prefix.clone(), name: None }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Every multi-segment path inside an item, macro bodies included (a `crate::x::y` inside
/// `format!` or `tokio::select!` is a dependency like any other). Nested `#[cfg(test)]` items
/// are skipped.
#[derive(Default)]
struct Names {
    found: Vec<Reference>,
    /// Every identifier, to tell a re-export the module also uses from one it only passes on.
    idents: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        if let syn::Item::Use(u) = item {
            let mut leaves = Vec::new();
            flatten_use(&u.tree, &mut Vec::new(), &mut leaves);
            let line = u.use_token.span.start().line;
            self.found.extend(leaves.into_iter().map(|l| Reference { segments: l.path, line }));
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let line = path.segments.first().map_or(0, |s| s.ident.span().start().line);
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.found.push(Reference { segments, line });
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_ident(&mut self, ident: &'ast proc_macro2::Ident) {
        self.idents.insert(ident.to_string());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        scan_tokens(mac.tokens.clone(), &mut self.found, &mut self.idents);
    }
}

/// `a::b::c` runs in a macro's tokens that start at `crate`, `self` or `super`.
fn scan_tokens(tokens: TokenStream, out: &mut Vec<Reference>, idents: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => scan_tokens(g.stream(), out, idents),
            TokenTree::Ident(other) if other != "crate" && other != "self" && other != "super" => {
                idents.insert(other.to_string());
            }
            TokenTree::Ident(first) if first == "crate" || first == "self" || first == "super" => {
                let line = first.span().start().line;
                let mut segments = vec![first.to_string()];
                let mut j = i + 1;
                while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                    (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    segments.push(next.to_string());
                    j += 3;
                }
                if segments.len() > 1 {
                    out.push(Reference { segments, line });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}
