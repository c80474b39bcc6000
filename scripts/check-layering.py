#!/usr/bin/env python3
"""The layering of the workspace: no import circles between modules, and crates import only the crates
below them. `make lint` runs it (with `--self-test` first).

Modules. In each crate's src/ (policy/, controller/, filter/, module/, proto/), the module tree is read
from the `mod` declarations (files and inline `mod x { }`), and every path that names the crate's own
modules is resolved: `use crate::…`, `use super::…`, `use self::…`, `use child::…`, and `crate::…`,
`super::…`, `self::…` in expressions and types. A name a module imports (`use`, `pub use`) is followed to
where it comes from, so `super::Trace` re-exported from a sibling is an import of that sibling. An
import from module A into module B is an edge between the two children of their closest common
ancestor that hold them: between top-level modules (files and folders directly under src/), or between
the sub-modules of one module. Imports of an ancestor (`super::X` for an item of the parent itself) and
of one's own descendants are not edges: a parent and its children are one unit. A circle in any of these
graphs is an error. Test-only code (`#[cfg(test)]` modules and items) is left out: tests may drive any
layer. Comments, strings and `$crate` in macros are ignored; a glob import (`use x::*`) is an import of
the module it names, not of what that module re-exports.

Crates. Each crate's `[dependencies]`, `[build-dependencies]` and `[target.*.dependencies]` on
workspace crates must be in ALLOWED_CRATES below: `proto` (the ext_authz messages) imports none;
`policy`, the engine, only `proto`; the hosts (`filter`, `module`) only the engine and `proto`; the CLI
and controller (`controller`) never a host.

Exit status 0 when all is in order, 1 with one message per problem. `--self-test` runs the checker on a
small fixture with known circles and crate imports instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The crates whose modules are checked, and the workspace crates each may import (by folder).
ALLOWED_CRATES = {
    "proto": set(),
    "policy": {"proto"},
    "filter": {"policy", "proto"},
    "module": {"policy", "proto"},
    "controller": {"policy", "proto"},
}


# ----------------------------------------------------------------------------------------------------
# Tokens: identifiers, `::` and single punctuation characters, with their line; comments, strings and
# character literals dropped.


@dataclass
class Token:
    text: str
    line: int


def tokenize(src: str) -> list[Token]:
    out: list[Token] = []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
        elif c in "rb" and _raw_string_at(src, i):
            j = _raw_string_at(src, i)
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            line += src.count("\n", i, j)
            i = j + 1
        elif c == "'" or (c == "b" and src.startswith("b'", i)):
            j = i + (2 if c == "b" else 1)
            if j < n and src[j] == "\\":  # '\n', '\u{1F600}'
                j += 2
                while j < n and src[j] != "'":
                    j += 1
                i = j + 1
            elif j + 1 < n and src[j + 1] == "'":  # 'x'
                i = j + 2
            else:  # a lifetime or label: 'a
                out.append(Token("'", line))
                i = j
        elif c.isalpha() or c == "_":
            if src.startswith("r#", i):  # a raw identifier: r#type
                i += 2
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            out.append(Token(src[i:j], line))
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] in "_."):
                if src[j] == "." and not (j + 1 < n and src[j + 1].isdigit()):
                    break
                j += 1
            out.append(Token("0", line))
            i = j
        elif src.startswith("::", i):
            out.append(Token("::", line))
            i += 2
        else:
            out.append(Token(c, line))
            i += 1
    return out


def _raw_string_at(src: str, i: int) -> int:
    """The end of the raw string (r"…", r#"…"#, br"…") starting at i, or 0."""
    j = i + 1 if src[i] == "r" else i + 2 if src.startswith("br", i) else 0
    if not j:
        return 0
    hashes = 0
    while j < len(src) and src[j] == "#":
        hashes, j = hashes + 1, j + 1
    if j >= len(src) or src[j] != '"':
        return 0
    end = src.find('"' + "#" * hashes, j + 1)
    return len(src) if end < 0 else end + 1 + hashes


# ----------------------------------------------------------------------------------------------------
# The module tree and the paths each module uses.

ModPath = tuple[str, ...]


@dataclass
class Use:
    """A path naming something of the crate, as written in module `scope`."""

    scope: ModPath
    path: list[str]  # the segments, from `crate`, `super`, `self` or a name in scope
    file: Path
    line: int


@dataclass
class Module:
    path: ModPath
    children: set[str] = field(default_factory=set)
    # Names the module imports at its top level: name -> path as written (with its scope).
    imports: dict[str, Use] = field(default_factory=dict)


@dataclass
class Crate:
    name: str
    root: Path
    modules: dict[ModPath, Module] = field(default_factory=dict)
    uses: list[Use] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def is_test_cfg(attr: list[Token]) -> bool:
    """`#[cfg(test)]` or `#[cfg(all(test, …))]`: compiled for tests only (`any(test, …)` is not)."""
    words = [t.text for t in attr]
    return words[:4] == ["cfg", "(", "test", ")"] or words[:6] == ["cfg", "(", "all", "(", "test", ","]


def read_crate(name: str, crate_dir: Path) -> Crate:
    src = crate_dir / "src"
    root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
    crate = Crate(name, root)
    crate.modules[()] = Module(())
    read_file(crate, root, (), src)
    return crate


def read_file(crate: Crate, file: Path, mod_path: ModPath, child_dir: Path) -> None:
    """Reads `file`, the body of module `mod_path`, whose `mod x;` children are in `child_dir`."""
    tokens = tokenize(file.read_text())
    Parser(crate, file, tokens).module_body(0, len(tokens), mod_path, child_dir)


class Parser:
    def __init__(self, crate: Crate, file: Path, tokens: list[Token]):
        self.crate, self.file, self.t = crate, file, tokens

    def text(self, i: int) -> str:
        return self.t[i].text if i < len(self.t) else ""

    def matching(self, i: int) -> int:
        """The index just past the bracket closing the one at i."""
        opening = self.t[i].text
        closing = {"{": "}", "(": ")", "[": "]"}[opening]
        depth = 0
        while i < len(self.t):
            if self.t[i].text == opening:
                depth += 1
            elif self.t[i].text == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i

    def item_end(self, i: int, end: int) -> int:
        """The index just past the item starting at i: its `;` or its closing brace."""
        while i < end:
            if self.t[i].text == ";":
                return i + 1
            if self.t[i].text == "{":
                return self.matching(i)
            if self.t[i].text in "([":
                i = self.matching(i)
                continue
            i += 1
        return end

    def module_body(self, i: int, end: int, mod_path: ModPath, child_dir: Path) -> None:
        """The items of module `mod_path` in tokens [i, end)."""
        module = self.crate.modules[mod_path]
        test_only = False
        while i < end:
            tok = self.text(i)
            if tok == "#" and self.text(i + 1) == "!" and self.text(i + 2) == "[":
                i = self.matching(i + 2)
                continue
            if tok == "#" and self.text(i + 1) == "[":
                close = self.matching(i + 1)
                attr = self.t[i + 2 : close - 1]
                test_only = test_only or is_test_cfg(attr)
                if attr and attr[0].text == "path":
                    where = f"{self.file}:{attr[0].line}"
                    self.crate.errors.append(f"{where}: #[path] is not read by this script")
                i = close
                continue
            start = i
            if tok == "pub":  # pub, pub(crate), pub(in crate::x)
                i += 1
                if self.text(i) == "(":
                    i = self.matching(i)
            if test_only:
                i = self.item_end(i, end)
                test_only = False
            elif self.text(i) == "mod" and self.text(i + 2) in (";", "{"):
                name = self.text(i + 1)
                child = mod_path + (name,)
                module.children.add(name)
                self.crate.modules.setdefault(child, Module(child))
                if self.text(i + 2) == ";":
                    self.child_file(child, name, child_dir)
                    i += 3
                else:
                    close = self.matching(i + 2)
                    self.module_body(i + 3, close - 1, child, child_dir / name)
                    i = close
            elif self.text(i) == "use":
                i = self.use_item(i + 1, mod_path, record=True)
            else:  # any other item: the paths in it
                item_end = self.item_end(i, end)
                self.paths_in(start, item_end, mod_path)
                i = item_end

    def child_file(self, child: ModPath, name: str, child_dir: Path) -> None:
        for file in (child_dir / f"{name}.rs", child_dir / name / "mod.rs"):
            if file.exists():
                read_file(self.crate, file, child, child_dir / name)
                return
        self.crate.errors.append(
            f"{self.file}: no file for `mod {name};` ({child_dir / name}.rs or {child_dir / name}/mod.rs)"
        )

    def use_item(self, i: int, scope: ModPath, record: bool) -> int:
        """A `use` tree starting at i (after `use`); returns the index past its `;`. Every path is kept:
        whether its first segment is a module of the crate is known once the whole tree is read."""
        end = i
        while end < len(self.t) and self.t[end].text != ";":
            end += 1
        if self.text(i) == "::":  # `use ::std::…`: an external crate
            return end + 1
        for segments, alias, line in self.use_tree(i, end, []):
            if not segments:
                continue
            use = Use(scope, segments, self.file, line)
            self.crate.uses.append(use)
            if record and segments[-1] != "*":
                is_self = segments[-1] == "self" and len(segments) > 1
                bound = alias or (segments[-2] if is_self else segments[-1])
                if bound != "_":
                    self.crate.modules[scope].imports[bound] = use
        return end + 1

    def use_tree(self, i: int, end: int, prefix: list[str]) -> list[tuple[list[str], str | None, int]]:
        """The paths of a use tree in tokens [i, end): (segments, alias, line)."""
        out = []
        segments = list(prefix)
        line = self.t[i].line if i < len(self.t) else 0
        while i < end:
            tok = self.text(i)
            if tok == "{":
                close = self.matching(i)
                # Split the group on its top-level commas.
                j, part = i + 1, i + 1
                while j < close - 1:
                    if self.text(j) in "{([":
                        j = self.matching(j)
                        continue
                    if self.text(j) == ",":
                        out += self.use_tree(part, j, segments)
                        part = j + 1
                    j += 1
                if part < close - 1:
                    out += self.use_tree(part, close - 1, segments)
                return out
            if tok == "as":
                return out + [(segments, self.text(i + 1), line)]
            if tok != "::":
                segments.append(tok)
            i += 1
        return out + [(segments, None, line)]

    def paths_in(self, i: int, end: int, scope: ModPath) -> None:
        """`crate::…`, `super::…`, `self::…` paths, and `use` in function bodies."""
        while i < end:
            tok = self.text(i)
            before = self.text(i - 1) if i else ""
            attribute = tok == "#" and self.text(i + 1) == "["
            if attribute and is_test_cfg(self.t[i + 2 : self.matching(i + 1) - 1]):
                # A test-only statement or item inside a body.
                i = self.item_end(self.matching(i + 1), end)
            elif tok == "use" and before in ("{", "}", ";", "]", ""):
                i = self.use_item(i + 1, scope, record=False)
            elif tok in ("crate", "super", "self") and self.text(i + 1) == "::" and before not in ("$", "::"):
                segments, line = [tok], self.t[i].line
                while self.text(i + 1) == "::" and is_ident(self.text(i + 2)):
                    segments.append(self.text(i + 2))
                    i += 2
                self.crate.uses.append(Use(scope, segments, self.file, line))
                i += 1
            else:
                i += 1


def is_ident(text: str) -> bool:
    return bool(text) and (text[0].isalpha() or text[0] == "_")


# ----------------------------------------------------------------------------------------------------
# Resolving paths to modules, and the graphs.


def resolve(crate: Crate, use: Use, seen: frozenset = frozenset()) -> ModPath | None:
    """The module that holds what `use` names (following imports), or None if outside the crate."""
    path = list(use.path)
    if path[0] == "crate":
        here, rest = (), path[1:]
    elif path[0] in ("super", "self"):
        here = use.scope
        while path and path[0] in ("super", "self"):
            if path.pop(0) == "super":
                if not here:
                    return None
                here = here[:-1]
        rest = path
    elif path[0] in crate.modules[use.scope].children:
        here, rest = use.scope, path
    else:
        return None
    for k, segment in enumerate(rest):
        module = crate.modules[here]
        if segment in module.children:
            here = here + (segment,)
            continue
        if segment in ("*", "self"):
            return here
        imported = module.imports.get(segment)
        key = (here, segment)
        if imported is not None and key not in seen and imported is not use:
            target = resolve(crate, imported, seen | {key})
            if target is not None:
                return target
        return here
    return here


@dataclass
class Edge:
    example: Use
    count: int = 1


def graphs(crate: Crate) -> dict[ModPath, dict[str, dict[str, Edge]]]:
    """For each module with children: child -> child -> an example import."""
    out: dict[ModPath, dict[str, dict[str, Edge]]] = {}
    for use in crate.uses:
        target = resolve(crate, use)
        if target is None:
            continue
        source = use.scope
        k = 0
        while k < len(source) and k < len(target) and source[k] == target[k]:
            k += 1
        if k == len(source) or k == len(target):
            continue  # within one module, or between a module and its ancestor
        edges = out.setdefault(source[:k], {}).setdefault(source[k], {})
        if target[k] in edges:
            edges[target[k]].count += 1
        else:
            edges[target[k]] = Edge(use)
    return out


def strongly_connected(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(graph: dict[str, dict[str, Edge]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first node: [a, b, …, a]."""
    start = component[0]
    inside = set(component)
    previous = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, {})):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return component


def module_name(crate: Crate, path: ModPath) -> str:
    return "::".join((crate.name,) + path)


def check_modules(crate: Crate, repo: Path) -> list[str]:
    problems = list(crate.errors)
    for parent, graph in sorted(graphs(crate).items()):
        for component in strongly_connected(graph):
            cycle = shortest_cycle(graph, component)
            where = f"in {module_name(crate, parent)}" if parent else "between top-level modules"
            lines = [f"{crate.name}: import circle {where}: {' -> '.join(cycle)}"]
            if len(component) > len(cycle) - 1:
                lines.append(f"  (one circle of those between {', '.join(component)})")
            for a, b in zip(cycle, cycle[1:]):
                edge = graph[a][b]
                use = edge.example
                more = f" (and {edge.count - 1} more)" if edge.count > 1 else ""
                where = f"{os.path.relpath(use.file, repo)}:{use.line}"
                lines.append(f"  {a} -> {b}: {where} uses {'::'.join(use.path)}{more}")
            problems.append("\n".join(lines))
    return problems


def check_crates(repo: Path, allowed: dict[str, set[str]]) -> list[str]:
    """Each crate's dependencies on workspace crates against `allowed`."""
    workspace = tomllib.loads((repo / "Cargo.toml").read_text())["workspace"]["members"]
    by_dir = {(repo / m).resolve(): m for m in workspace}
    problems = []
    for name in sorted(allowed):
        manifest = tomllib.loads((repo / name / "Cargo.toml").read_text())
        tables = [(t, manifest.get(t, {})) for t in ("dependencies", "build-dependencies")]
        for target, spec in manifest.get("target", {}).items():
            tables += [(f"target.{target}.dependencies", spec.get("dependencies", {}))]
        for table, deps in tables:
            for dep, spec in sorted(deps.items()):
                if not isinstance(spec, dict) or "path" not in spec:
                    continue
                member = by_dir.get((repo / name / spec["path"]).resolve())
                if member is None or member == name:
                    continue
                if member not in allowed[name]:
                    may = ", ".join(sorted(allowed[name])) or "no workspace crate"
                    problems.append(
                        f"{name}/Cargo.toml [{table}]: {name} imports {dep} ({member}/), "
                        f"but may import only {may} (scripts/check-layering.py, ALLOWED_CRATES)"
                    )
    return problems


def check(repo: Path, allowed: dict[str, set[str]]) -> list[str]:
    problems = check_crates(repo, allowed)
    for name in sorted(allowed):
        problems += check_modules(read_crate(name, repo / name), repo)
    return problems


# ----------------------------------------------------------------------------------------------------
# The self-test: a fixture workspace with known circles.

FIXTURE = {
    "Cargo.toml": '[workspace]\nmembers = ["low", "high", "host"]\n',
    "low/Cargo.toml": '[package]\nname = "low"\n[dependencies]\nhigh = { path = "../high" }\n',
    "high/Cargo.toml": '[package]\nname = "high"\n[dependencies]\nlow = { path = "../low" }\n',
    "host/Cargo.toml": '[package]\nname = "host"\n[dependencies]\nhigh = { path = "../high" }\n',
    "host/src/lib.rs": "",
    "high/src/lib.rs": "",
    # Top level: a -> b by `use`, b -> a in an expression; c is only used from a string, a comment and a
    # test module, and imports a through a re-export in b.
    "low/src/lib.rs": "pub mod a;\npub mod b;\nmod c;\nmod d;\n#[cfg(test)]\nmod tests;\n",
    "low/src/a.rs": "use crate::b::{self, B};\npub struct A;\n"
    "fn f() { let _ = \"crate::c::X\"; } // crate::c::X\n",
    "low/src/b.rs": "pub use crate::a::A as Again;\npub struct B;\nfn g() -> crate::a::A { crate::a::A }\n",
    "low/src/c.rs": "pub fn c() -> super::b::Again { todo!() }\n#[cfg(test)]\nfn t() { crate::d::D; }\n",
    "low/src/tests.rs": "use crate::c::c;\nuse crate::d::D;\n",
    # Inside d/: x -> y through `super::Y` (re-exported by d), y -> x by `super::x::`; z <-> w in an
    # inline module; the parent using its children and they it is no circle.
    "low/src/d.rs": "mod x;\nmod y;\npub use y::Y;\npub struct D;\nfn h() -> x::X { x::X }\n"
    "mod z { pub struct Z(super::w::W); }\nmod w { pub struct W; fn f(_: super::z::Z) {} }\n",
    "low/src/d/x.rs": "use super::{Y, D};\npub struct X;\n",
    "low/src/d/y.rs": "pub struct Y;\nfn k() { let _ = super::x::X; let _ = 'x'; let _ = '\\''; }\n"
    "fn l<'a>(s: &'a str) {}\n",
}


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, text in FIXTURE.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        problems = check(root, {"low": set(), "high": {"low"}, "host": {"low"}})
    text = "\n".join(problems)
    expected = [
        "low/Cargo.toml [dependencies]: low imports high (high/), but may import only no workspace crate",
        "host/Cargo.toml [dependencies]: host imports high (high/), but may import only low",
        "low: import circle between top-level modules: a -> b -> a",
        "a -> b: low/src/a.rs:1 uses crate::b::self",
        "b -> a: low/src/b.rs:1 uses crate::a::A (and 2 more)",
        "low: import circle in low::d: x -> y -> x",
        "x -> y: low/src/d/x.rs:1 uses super::Y",
        "y -> x: low/src/d/y.rs:2 uses super::x::X",
        "low: import circle in low::d: w -> z -> w",
    ]
    missing = [e for e in expected if e not in text]
    # c imports a (through b's re-export) and nothing imports c outside strings, comments and tests.
    unexpected = [p for p in problems if " c " in p or "-> c" in p or "c ->" in p]
    if missing or unexpected or len(problems) != 5:
        print("check-layering self-test FAILED. Reported:\n" + text, file=sys.stderr)
        for e in missing:
            print(f"missing: {e}", file=sys.stderr)
        for p in unexpected:
            print(f"unexpected: {p}", file=sys.stderr)
        return 1
    print(f"check-layering self-test: ok ({len(problems)} problems of the fixture reported)")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(f"usage: {argv[0]} [--self-test]", file=sys.stderr)
        return 2
    problems = check(REPO, ALLOWED_CRATES)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(
            f"check-layering: {len(problems)} problem(s). Move what two modules share one floor down "
            "(into a module both import, or the lower of the two), so imports go one way only.",
            file=sys.stderr,
        )
        return 1
    print(f"check-layering: no import circles in {', '.join(sorted(ALLOWED_CRATES))}; crate imports in order")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
