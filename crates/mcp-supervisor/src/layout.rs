//! The library's layout, held by tests: every public module in lib.rs's
//! table of contents, no import cycle between the top-level modules, and no
//! file too long to read (docs/ARCHITECTURE.md, "Layout").

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};
/// Every public module is in the table of contents above (but one
/// hidden from the docs: not part of the library's surface).
#[test]
fn every_public_module_is_listed() {
    let source = include_str!("lib.rs");
    let listed = |name: &str| source.contains(&format!("//! - [`{name}`]"));
    let lines: Vec<&str> = source.lines().collect();
    let modules = lines.iter().enumerate().filter_map(|(at, line)| {
        let hidden = at > 0 && lines[at - 1] == "#[doc(hidden)]";
        let name = line.strip_prefix("pub mod ")?.strip_suffix(';')?;
        (!hidden).then_some(name)
    });
    for name in modules {
        assert!(listed(name), "lib.rs's layout does not list `{name}`");
    }
    assert!(listed("tallies"));
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file belongs to (`gateway` for
/// `src/gateway/direct.rs`, `heavy` for `src/heavy.rs`).
fn top_module(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).expect("under src");
    let first = relative.components().next().expect("a file");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_owned()
}

/// The top-level modules `text` names as `crate::name`, in paths and in
/// `use crate::{a, b::c}` groups (comments left out).
fn named_modules(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |rest: &str| -> String {
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            named.insert(ident(rest));
            continue;
        };
        // The group's items at its own depth: each starts after `{` or `,`.
        let mut depth = 1;
        let mut item_start = true;
        for (offset, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => item_start = true,
                c if c.is_whitespace() => {}
                _ if item_start && depth == 1 => {
                    named.insert(ident(&group[offset..]));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    named
}

/// A cycle in `edges`, if there is one, as the modules along it.
fn a_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

/// The library's top-level modules import one another in one direction
/// only: each floor uses the floors below it (docs/ARCHITECTURE.md,
/// "Layout").
#[test]
fn no_import_cycle_between_top_level_modules() {
    let root = src();
    let files = sources(&root);
    let modules: BTreeSet<String> = files.iter().map(|file| top_module(&root, file)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = top_module(&root, file);
        let text = std::fs::read_to_string(file).expect("a source file");
        for to in named_modules(&text) {
            if to != from && modules.contains(&to) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    assert!(
        edges
            .get("gateway")
            .is_some_and(|to| to.contains("registry")),
        "the walk found the gateway's imports: {edges:?}"
    );
    if let Some(cycle) = a_cycle(&edges) {
        panic!(
            "the top-level modules import in a cycle: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_import_walk_reads_paths_and_groups_and_skips_comments() {
    let text = "use crate::{\n    a::B,\n    c::{d, e::F},\n    g,\n};\n// crate::h\nfn x() { crate::i::j(); }";
    let named: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(named, ["a", "c", "g", "i"]);
    let edges = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(a_cycle(&edges).unwrap(), ["a", "b", "c", "a"]);
}

/// No file of the library is longer than this.
const MAX_LINES: usize = 800;

/// Every file of the library reads on a few screens (docs/ARCHITECTURE.md,
/// "Layout").
#[test]
fn no_file_is_longer_than_the_limit() {
    let root = src();
    let too_long: Vec<String> = sources(&root)
        .into_iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(&file)
                .expect("a source file")
                .lines()
                .count();
            let name = file
                .strip_prefix(&root)
                .expect("under src")
                .display()
                .to_string();
            (lines > MAX_LINES).then(|| format!("{name}: {lines} lines"))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "over {MAX_LINES} lines: {}",
        too_long.join(", ")
    );
}
