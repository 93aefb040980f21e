//! Checks that the library's modules import one another in one direction only, as
//! `docs/layout.md` says: no two top-level modules (`api`, `service`, `jobs`, `store`, …)
//! reach each other through any chain of `crate::` paths, and within a folder no two of its
//! modules do (through `crate::` or `super::` paths). Test modules (`#[cfg(test)] mod …`) are
//! not part of the graph; a module and the folder that holds it may name each other (a
//! `mod.rs` re-exports what its modules define, and they use its shared types).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path below `crate`, e.g. `["service", "worlds"]`.
type ModPath = Vec<String>;

/// Every `.rs` file under `src/` as its module path and its text without comments and tests.
fn sources() -> Vec<(ModPath, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(ModPath, String)>) {
        for entry in std::fs::read_dir(dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).expect("under src").with_extension("");
            let mut module: ModPath = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((module, code_of(&text)));
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    // The binary's own modules are not the library's.
    out.retain(|(module, _)| !matches!(module[0].as_str(), "main" | "cli" | "lib"));
    out
}

/// `text` without line comments and without its test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths a file names: `crate::a::b::…`, each item of `crate::{…}` groups, and,
/// for a module inside a folder, `super::…` resolved against that folder.
fn references(module: &[String], code: &str) -> Vec<ModPath> {
    let path = regex::Regex::new(r"\bcrate::((?:\w+::)*\w+)").expect("a valid pattern");
    let group = regex::Regex::new(r"\bcrate::\{([^}]*)\}").expect("a valid pattern");
    let sup = regex::Regex::new(r"(?:^|[^\w:])super::((?:\w+::)*\w+)").expect("a valid pattern");
    let split = |s: &str| s.split("::").map(|p| p.trim().to_owned()).collect::<ModPath>();
    let mut out: Vec<ModPath> = path.captures_iter(code).map(|c| split(&c[1])).collect();
    for c in group.captures_iter(code) {
        out.extend(c[1].split(',').map(str::trim).filter(|s| !s.is_empty()).map(split));
    }
    if module.len() >= 2 {
        let parent = &module[..module.len() - 1];
        out.extend(sup.captures_iter(code).map(|c| [parent, &split(&c[1])[..]].concat()));
    }
    out
}

/// A cycle in `edges`, as the nodes along it, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

/// The import graph at one level: top-level modules (`folder` `None`), or the modules directly
/// inside one folder.
fn graph(files: &[(ModPath, String)], folder: Option<&str>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    // The node a module path belongs to at this level (None: outside it).
    let node = |path: &[String]| -> Option<String> {
        match folder {
            None => path.first().cloned(),
            Some(folder) => {
                let inside = path.len() >= 2 && path[0] == folder;
                // `folder::item` where `item` is a type the folder's mod.rs holds: the folder.
                (inside && modules.contains(&path[..2])).then(|| path[1].clone())
            }
        }
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in files {
        let Some(from) = node(module) else { continue };
        for target in references(module, code) {
            if let Some(to) = node(&target)
                && to != from
            {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

#[test]
fn no_two_modules_import_each_other() {
    let files = sources();
    assert!(files.len() > 50, "the walk found only {} files", files.len());
    let top = graph(&files, None);
    // The checker itself sees the known layers.
    assert!(
        top["api"].contains("service") && top["service"].contains("store"),
        "{top:?}"
    );
    if let Some(found) = cycle(&top) {
        panic!("top-level modules import each other: {}", found.join(" → "));
    }
    let folders: BTreeSet<&str> = (files.iter())
        .filter(|(m, _)| m.len() >= 2)
        .map(|(m, _)| m[0].as_str())
        .collect();
    for folder in folders {
        if let Some(found) = cycle(&graph(&files, Some(folder))) {
            panic!("modules of {folder}/ import each other: {}", found.join(" → "));
        }
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let files = vec![
        (vec!["a".to_owned()], "use crate::b::Thing;".to_owned()),
        (
            vec!["b".to_owned(), "x".to_owned()],
            "fn f() { crate::c::g() }".to_owned(),
        ),
        (vec!["b".to_owned()], "pub mod x;".to_owned()),
        (vec!["c".to_owned()], code_of("use crate::{a::Other, d}; // crate::zzz")),
    ];
    let top = graph(&files, None);
    assert_eq!(cycle(&top).unwrap(), ["a", "b", "c", "a"]);
    assert!(
        !top.contains_key("zzz") && !top.values().any(|t| t.contains("zzz")),
        "comments are skipped"
    );
    let siblings = vec![
        (vec!["p".to_owned(), "x".to_owned()], "use super::y::Y;".to_owned()),
        (vec!["p".to_owned(), "y".to_owned()], "use crate::p::x::X;".to_owned()),
        (vec!["p".to_owned()], "pub use x::X;".to_owned()),
    ];
    assert_eq!(cycle(&graph(&siblings, Some("p"))).unwrap(), ["x", "y", "x"]);
    let tests_only = "use crate::a::A;\n#[cfg(test)]\nmod tests {\n use crate::b::B;\n}\n";
    assert_eq!(references(&["c".to_owned()], &code_of(tests_only)), [vec!["a", "A"]]);
}
