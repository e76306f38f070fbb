//! The edge's module graph, read from the sources: which top-level modules name which others
//! (`crate::x` paths outside test code), and the cycles among them. There are none: the
//! request path runs app → mcp → (state, registry, forward) → (cache, transport), and
//! `transport` (pages, cursors, session and request-state seals, server → client request ids)
//! names none of the modules that use it. The test fails when a cycle appears; `KNOWN_CYCLES`
//! is where debt would be listed, and it stays empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Strongly connected sets of top-level modules, each sorted.
const KNOWN_CYCLES: &[&[&str]] = &[];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Module → the modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        let name = relative.to_string_lossy();
        if ["lib", "main"].contains(&top.as_str())
            || name.ends_with("tests.rs")
            || name.ends_with("_tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Test modules at the end of a file are not part of the graph.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let node = graph.entry(top.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let target: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let is_module =
                root.join(format!("{target}.rs")).exists() || root.join(&target).is_dir();
            if !target.is_empty() && target != top && is_module {
                node.insert(target);
            }
        }
    }
    graph
}

/// Tarjan's strongly connected components with more than one module.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: BTreeSet<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.insert(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: BTreeSet::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[test]
fn the_module_graph_has_no_cycles_but_the_known_ones() {
    let graph = graph();
    assert!(graph.len() > 10, "{graph:?}");
    let found = cycles(&graph);
    let known: BTreeSet<Vec<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    assert_eq!(
        found, known,
        "module cycles changed: shorten KNOWN_CYCLES when one is broken, never lengthen it"
    );
    // The configuration names no part of the request path.
    assert!(!graph["config"].contains("mcp"), "{:?}", graph["config"]);
    // The registry builds its precomputed pages with the transport's code, not the handlers';
    // the edge's state holds the transport's seals, not the handlers'.
    for (from, not) in [("registry", "mcp"), ("state", "mcp"), ("transport", "mcp")] {
        assert!(!graph[from].contains(not), "{from}: {:?}", graph[from]);
    }
    // Progressive disclosure builds on the tool, not on the registry that lists it.
    assert!(
        !graph["disclosure"].contains("registry"),
        "{:?}",
        graph["disclosure"]
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_nothing_else() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        cycles(&graph),
        BTreeSet::from([vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]])
    );
}
