//! A path as written in one module, to the module that defines what it names.
//!
//! Imports and re-exports are followed (`pub use inner::Thing` leads to `inner`), so an edge
//! points at the file that owns the item, not at the module that passes it on. Paths that leave
//! the crate (`std::…`, another crate) resolve to nothing.

use crate::tree::Crate;

/// How many imports a name may pass through: re-export chains are short, and a cycle of imports
/// (which rustc refuses) must not loop here.
const MAX_HOPS: usize = 16;

impl Crate {
    /// The module whose file defines what `segments`, written in `from`, names.
    pub fn resolve(&self, from: usize, segments: &[String]) -> Option<usize> {
        self.resolve_hops(from, segments, MAX_HOPS)
    }

    fn resolve_hops(&self, from: usize, segments: &[String], hops: usize) -> Option<usize> {
        let hops = hops.checked_sub(1)?;
        let (first, rest) = segments.split_first()?;
        let (mut at, rest): (usize, &[String]) = match first.as_str() {
            "crate" => (0, rest),
            "self" => (from, rest),
            "super" => {
                let mut at = self.modules[from].parent?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    at = self.modules[at].parent?;
                    rest = &rest[1..];
                }
                (at, rest)
            }
            name => {
                if let Some(&child) = self.modules[from].children.get(name) {
                    (child, rest)
                } else if let Some(target) = self.modules[from].imports.get(name) {
                    // `use crate::config; … config::Witness`: continue from where the import leads.
                    let mut full = target.clone();
                    full.extend(rest.iter().cloned());
                    return self.resolve_hops(from, &full, hops);
                } else {
                    return None;
                }
            }
        };
        let mut rest = rest;
        while let Some((next, tail)) = rest.split_first() {
            match self.modules[at].children.get(next) {
                Some(&child) => {
                    at = child;
                    rest = tail;
                }
                None => break,
            }
        }
        match rest.first() {
            None => Some(at),
            Some(name) => Some(self.owner(at, name, hops).unwrap_or(at)),
        }
    }

    /// The module that defines `name` as seen from `module`: itself, or where its imports lead.
    fn owner(&self, module: usize, name: &str, hops: usize) -> Option<usize> {
        let m = &self.modules[module];
        if m.items.contains(name) {
            return Some(module);
        }
        if let Some(target) = m.imports.get(name) {
            return self.resolve_hops(module, target, hops);
        }
        for glob in &m.globs {
            let Some(source) = self.resolve_hops(module, glob, hops) else { continue };
            if source == module {
                continue;
            }
            if let Some(owner) = self.owner(source, name, hops.checked_sub(1)?) {
                return Some(owner);
            }
        }
        None
    }
}
