#!/usr/bin/env python3
"""How the workspace reads (issue 33): long functions, file-level dependency cycles and error
answers built outside the error modules, per crate; and one-line doc comments that only restate
their item's name ("/// The tenant." over `tenant`), which tell a reader nothing.

    python3 scripts/structure.py            # print the figures
    python3 scripts/structure.py --list     # and every long function and every cycle
    python3 scripts/structure.py --check    # fail when a figure is worse than scripts/structure.json

A function's length is its lines from `fn` to its closing brace; test code (`tests/`, `benches/`,
`#[cfg(test)]` modules) is not counted. A file depends on another when it names it through
`crate::…`, `super::…` or `self::…` (in a `use` or a path); a cycle is a strongly connected
group of two or more files of one crate. An error answer outside the error modules is a use of
`StatusCode::…` (other than a success status), `ErrorData::…`/`ErrorData {` or a `Status::…(`
constructor in a file that is not
an error module (`error.rs`, `errors.rs`, `fault.rs`, `status.rs`, or a file under `error/`):
where the one error type should turn a fault into HTTP, JSON-RPC or gRPC. `--check` is a ratchet: the counts may go down (then
update the baseline with `--write`), never up; error answers outside the error modules must be
none at all.
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "scripts", "structure.json")
LIMITS = (60, 80, 100)
ERROR_MODULES = ("error.rs", "errors.rs", "fault.rs", "status.rs")
# A success status (200, 201, 202, 204) is not an error answer.
ERROR_ANSWER = re.compile(
    r"\bStatusCode::(?!(?:OK|CREATED|ACCEPTED|NO_CONTENT)\b)[A-Z_]+|\bErrorData(::|\s*\{)|\bStatus::[a-z_]+\("
)


def error_answers(path):
    """Error answers built in a file outside the error modules (0 in an error module)."""
    parts = os.path.normpath(path).split(os.sep)
    if parts[-1] in ERROR_MODULES or "error" in parts[:-1]:
        return 0
    code = without_tests(strip(open(path, encoding="utf-8").read()))
    return len(ERROR_ANSWER.findall(code))


# Doc comments that only restate the item's name ("/// The tenant." over `tenant: String`): words
# that do not count when comparing a one-line doc comment with the name.
FILLER = {"the", "a", "an", "its", "this", "of", "is", "are", "to", "for", "in", "on", "and", "or",
          "it", "returns", "return", "get", "gets"}
DOC = re.compile(r"\s*///\s*(.*)$")
ITEM = re.compile(
    r"\b(?:fn|struct|enum|trait|type|const|static|mod)\s+([A-Za-z0-9_]+)"
    r"|^\s*(?:pub(?:\([a-z]+\))?\s+)?([a-z_][a-z0-9_]*)\s*:"
    r"|^\s*([A-Z][A-Za-z0-9]*)\s*[,({]"
)


def name_words(text):
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text.lower()) if w and w not in FILLER]
    return [w[:-3] if w.endswith("ies") and len(w) > 5 else
            w[:-2] if w.endswith("es") and len(w) > 4 else
            w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words]


def restating_docs(path):
    """(line, comment, name) of each one-line doc comment whose words are all the item's name's."""
    lines = open(path, encoding="utf-8").read().splitlines()
    found = []
    for i, line in enumerate(lines):
        doc = DOC.match(line)
        if not doc or (i and DOC.match(lines[i - 1])) or (i + 1 < len(lines) and DOC.match(lines[i + 1])):
            continue
        j = i + 1
        while j < len(lines) and re.match(r"\s*#\[", lines[j]):
            j += 1
        item = ITEM.search(lines[j]) if j < len(lines) else None
        if not item:
            continue
        name = next(g for g in item.groups() if g)
        said = name_words(doc.group(1))
        if said and set(said) <= set(name_words(name)):
            found.append((i + 1, doc.group(1), name))
    return found


def crates():
    """(name, src folder) of every workspace crate with a src/ folder."""
    found = []
    for base, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "node_modules")]
        if "Cargo.toml" in files and os.path.isdir(os.path.join(base, "src")):
            text = open(os.path.join(base, "Cargo.toml"), encoding="utf-8").read()
            name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M)
            if name and "[package]" in text:
                found.append((name.group(1), os.path.join(base, "src")))
    return sorted(found)


def strip(text):
    """The text with comments, strings and char literals blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'r(#*)"', text[i : i + 10]) if c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if raw:
            end = '"' + raw.group(1)
            j = text.find(end, i + len(raw.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            lit = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|[^\\'])'", text[i : i + 12])
            if lit:
                out.append("' '")
                i += len(lit.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def without_tests(code):
    """The code with `#[cfg(test)]` items blanked (lines kept)."""
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
            depth, j, opened = 0, i, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or "{" in lines[j]
                if opened and depth <= 0 or (not opened and lines[j].rstrip().endswith(";") and j > i):
                    break
                j += 1
            for k in range(i, min(j + 1, len(lines))):
                lines[k] = ""
            i = j + 1
        else:
            i += 1
    return "\n".join(lines)


FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")


def functions(path):
    """(name, first line, lines) of every function of a file outside tests."""
    code = without_tests(strip(open(path, encoding="utf-8").read()))
    lines = code.split("\n")
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, j, opened = 0, i, False
        while j < len(lines):
            for ch in lines[j]:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                break
            if not opened and lines[j].rstrip().endswith(";"):
                break  # a declaration without a body (a trait's)
            j += 1
        if opened:
            found.append((m.group(1), i + 1, j - i + 1))
    return found


def module_files(src):
    """Module path (tuple) → file, for every .rs file under src."""
    files = {}
    for base, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if rel and rel[0] == "bin":
                continue
            files[tuple(rel)] = path
    return files


REF = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
GROUP = re.compile(r"\b(crate|super|self)::\{([^}]*)\}", re.S)


def dependencies(src):
    """File → set of files of the same crate it names."""
    tests = test_files(src)
    files = {k: v for k, v in module_files(src).items() if v not in tests}
    by_path = {v: k for k, v in files.items()}
    graph = {path: set() for path in files.values()}
    for module, path in files.items():
        code = without_tests(strip(open(path, encoding="utf-8").read()))
        # Inline modules (`mod x { … }`) are ignored: they belong to their file.
        refs = []
        for m in REF.finditer(code):
            refs.append((m.group(1), m.group(2).split("::")[1:]))
        for m in GROUP.finditer(code):
            for part in m.group(2).split(","):
                words = [w for w in re.split(r"::|\s+", part.strip()) if w and w != "self"]
                if words:
                    refs.append((m.group(1), [w.strip("{}") for w in words]))
        for root, names in refs:
            # `self::` names the module's children, `super::` its siblings (a `mod.rs`
            # stands for its folder, so the rule is the same for both kinds of file).
            base = () if root == "crate" else module if root == "self" else module[:-1]
            target = None
            for k in range(len(names), 0, -1):
                candidate = base + tuple(names[:k])
                if candidate in files:
                    target = files[candidate]
                    break
            if target and target != path:
                graph[path].add(target)
    return graph, by_path


def cycles(graph):
    """Strongly connected groups of two or more nodes (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def test_files(src):
    """Files that are test modules (`#[cfg(test)] mod x;`), with what they include."""
    found = set()
    for base, _, names in os.walk(src):
        for file in names:
            if not file.endswith(".rs"):
                continue
            path = os.path.join(base, file)
            folder = base if file in ("mod.rs", "lib.rs", "main.rs") else os.path.join(base, file[:-3])
            for m in TEST_MOD.finditer(open(path, encoding="utf-8").read()):
                if m.group(1):
                    found.add(os.path.normpath(os.path.join(base, m.group(1))))
                else:
                    found.add(os.path.join(folder, m.group(2) + ".rs"))
                    found.add(os.path.join(folder, m.group(2), "mod.rs"))
    return found


def measure():
    figures = {}
    details = {}
    for name, src in crates():
        long = []
        answers = []
        restating = []
        tests = test_files(src)
        for base, _, names in os.walk(src):
            for file in sorted(names):
                if file.endswith(".rs"):
                    path = os.path.join(base, file)
                    if path in tests:
                        continue
                    for line, comment, item in restating_docs(path):
                        restating.append((os.path.relpath(path, ROOT), line, comment, item))
                    found = error_answers(path)
                    if found:
                        answers.append((found, os.path.relpath(path, ROOT)))
                    for fn, line, length in functions(path):
                        if length > LIMITS[0]:
                            long.append((length, os.path.relpath(path, ROOT), line, fn))
        graph, _ = dependencies(src)
        groups = cycles(graph)
        figures[name] = {
            **{f"fns_over_{limit}": sum(1 for l in long if l[0] > limit) for limit in LIMITS},
            "file_cycles": len(groups),
            "files_in_cycles": sum(len(g) for g in groups),
            "error_answers": sum(n for n, _ in answers),
            "docs_restating": len(restating),
        }
        details[name] = (
            sorted(long, reverse=True),
            [[os.path.relpath(p, ROOT) for p in g] for g in groups],
            sorted(answers, reverse=True),
            restating,
        )
    return figures, details


def self_test():
    """The counters find a planted long function and a planted cycle, and skip tests."""
    import tempfile

    global ROOT
    saved = ROOT
    with tempfile.TemporaryDirectory() as root:
        src = os.path.join(root, "demo", "src")
        os.makedirs(os.path.join(src, "a"))
        open(os.path.join(root, "demo", "Cargo.toml"), "w").write('[package]\nname = "demo"\n')
        body = "\n".join(f"    let x{i} = {i}; // }} {{" for i in range(85))
        open(os.path.join(src, "lib.rs"), "w").write(
            "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n"
            f"pub fn long() {{\n{body}\n    let s = \"}}\";\n}}\n"
            "#[cfg(test)]\nmod inline {\n    fn also_long() {\n" + body + "\n    }\n}\n"
        )
        open(os.path.join(src, "a", "mod.rs"), "w").write("use crate::b::B;\npub struct A;\n")
        open(os.path.join(src, "b.rs"), "w").write("use super::a::A;\npub struct B;\n")
        open(os.path.join(src, "tests.rs"), "w").write(f"fn test_long() {{\n{body}\n}}\n")
        # Two error answers outside the error modules; the error module's own are not counted.
        open(os.path.join(src, "a", "mod.rs"), "a").write(
            "fn f() -> u16 { let _ = Status::internal(\"x\"); StatusCode::NOT_FOUND.as_u16() }\n")
        open(os.path.join(src, "error.rs"), "w").write("fn g() { Status::internal(\"x\"); }\n")
        # One doc comment that restates its item's name; one that says more.
        open(os.path.join(src, "b.rs"), "a").write(
            "/// The settings.\npub fn settings() {}\n/// Vectors kept in memory.\npub fn cache() {}\n")
        ROOT = root
        try:
            figures, _ = measure()
        finally:
            ROOT = saved
    expected = {"fns_over_60": 1, "fns_over_80": 1, "fns_over_100": 0, "file_cycles": 1,
                "files_in_cycles": 2, "error_answers": 2, "docs_restating": 1}
    assert figures == {"demo": expected}, figures
    print("structure: self-test passed (a planted long function, cycle, error answers and restating doc comment are found, tests skipped)")


def main():
    if "--self-test" in sys.argv:
        self_test()
        return
    figures, details = measure()
    keys = ["fns_over_60", "fns_over_80", "fns_over_100", "file_cycles", "files_in_cycles",
            "error_answers", "docs_restating"]
    print(f"{'crate':<24}" + "".join(f"{k:>17}" for k in keys))
    totals = {k: 0 for k in keys}
    for name, row in figures.items():
        print(f"{name:<24}" + "".join(f"{row[k]:>17}" for k in keys))
        for k in keys:
            totals[k] += row[k]
    print(f"{'total':<24}" + "".join(f"{totals[k]:>17}" for k in keys))
    if "--list" in sys.argv:
        for name, (long, groups, answers, restating) in details.items():
            for length, path, line, fn in long:
                print(f"  {length:>4} lines  {path}:{line}  {fn}")
            for group in groups:
                print(f"  cycle: {' ↔ '.join(group)}")
            for count, path in answers:
                print(f"  {count:>4} error answers outside the error modules  {path}")
            for path, line, comment, item in restating:
                print(f"  doc comment restating its name  {path}:{line}  /// {comment}  ({item})")
    if "--write" in sys.argv:
        with open(BASELINE, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {os.path.relpath(BASELINE, ROOT)}")
    if "--check" in sys.argv:
        baseline = json.load(open(BASELINE, encoding="utf-8"))
        worse = []
        for name, row in figures.items():
            for k in keys:
                allowed = baseline.get(name, {}).get(k, 0)
                if row[k] > allowed:
                    worse.append(f"{name}: {k} {row[k]} > {allowed} (scripts/structure.json)")
            # Not a ratchet: none, ever (the one error type decides every status and code).
            if row["error_answers"] and row["error_answers"] <= baseline.get(name, {}).get("error_answers", 0):
                worse.append(f"{name}: error_answers {row['error_answers']} > 0")
        if worse:
            print("structure got worse (split the function, break the cycle, build the error "
                  "answer in an error module, or say in the doc comment what the name does not; "
                  "see --list):")
            print("\n".join("  " + w for w in worse))
            sys.exit(1)
        print("structure: no figure worse than scripts/structure.json")


if __name__ == "__main__":
    main()
