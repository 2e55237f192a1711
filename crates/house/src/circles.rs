//! The import graph between one crate's files, and its cycles (strongly connected components of
//! more than one file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::tree::Crate;
use crate::Site;

/// One import that holds a cycle together: `site` names something that `to` defines.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub site: Site,
    pub to: PathBuf,
}

#[derive(Debug)]
pub struct Circle {
    pub files: Vec<PathBuf>,
    /// Every import from one of `files` into another.
    pub edges: Vec<Edge>,
}

impl Circle {
    /// The edges grouped by the pair of files they join, each with its sites.
    pub fn pairs(&self) -> Vec<(&PathBuf, &PathBuf, Vec<&Site>)> {
        let mut pairs: BTreeMap<(&PathBuf, &PathBuf), Vec<&Site>> = BTreeMap::new();
        for edge in &self.edges {
            pairs.entry((&edge.site.file, &edge.to)).or_default().push(&edge.site);
        }
        pairs.into_iter().map(|((from, to), sites)| (from, to, sites)).collect()
    }
}

/// The file-to-file edges, each with every site that makes it.
pub fn edges(krate: &Crate) -> BTreeMap<(PathBuf, PathBuf), Vec<Site>> {
    let mut edges: BTreeMap<(PathBuf, PathBuf), Vec<Site>> = BTreeMap::new();
    for (index, module) in krate.modules.iter().enumerate() {
        for reference in &module.references {
            let Some(target) = krate.resolve(index, &reference.segments) else { continue };
            let to = &krate.modules[target].file;
            if *to != module.file {
                edges.entry((module.file.clone(), to.clone())).or_default().push(krate.site(index, reference.line));
            }
        }
    }
    for sites in edges.values_mut() {
        sites.sort();
        sites.dedup();
    }
    edges
}

/// The cycles among a crate's files, each with the imports inside it.
pub fn circles(krate: &Crate) -> Vec<Circle> {
    let edges = edges(krate);
    let files: Vec<PathBuf> =
        krate.modules.iter().map(|m| m.file.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let index: BTreeMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (f, i)).collect();
    let mut next = vec![Vec::new(); files.len()];
    for (from, to) in edges.keys() {
        next[index[from]].push(index[to]);
    }
    strongly_connected(&next)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|component| {
            let members: BTreeSet<&PathBuf> = component.iter().map(|&i| &files[i]).collect();
            let mut inside = Vec::new();
            for ((from, to), sites) in &edges {
                if members.contains(from) && members.contains(to) {
                    inside.extend(sites.iter().map(|s| Edge { site: s.clone(), to: to.clone() }));
                }
            }
            inside.sort();
            Circle { files: members.into_iter().cloned().collect(), edges: inside }
        })
        .collect()
}

/// Tarjan's algorithm, iterative (a deep module tree must not overflow the stack).
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = next.len();
    let (mut order, mut low, mut on_stack) = (vec![UNSEEN; n], vec![0; n], vec![false; n]);
    let (mut stack, mut components, mut counter) = (Vec::new(), Vec::new(), 0);
    for start in 0..n {
        if order[start] != UNSEEN {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        order[start] = counter;
        low[start] = counter;
        counter += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if let Some(&w) = next[v].get(*child) {
                *child += 1;
                if order[w] == UNSEEN {
                    order[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(order[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == order[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}
