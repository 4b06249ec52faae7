"""The import closure of a gece module, read from the source with :mod:`ast` (nothing is imported), and the
hash of what a closure's code does.

The closure of a module is every file of the package that Python may execute when that module is
imported and its functions run: the module itself, every gece module it imports, at module level or
lazily (inside a function, a method, an ``if`` or ``try`` block), the ``__init__.py`` of every
package traversed on the way, and, recursively, their closures. ``gece stage-deps`` writes it as the
code deps of each DVC stage in dvc.yaml (:mod:`gece.tools.stage_deps`), and tests/test_stage_deps.py
checks them.

:func:`code_hash` is the sha256 of a closure's syntax trees (:func:`gece.code.syntax.canonical_source`, the same text
on every Python version): comments, blank lines, line breaks and, optionally, docstrings do not count, so an edit that
cannot change what the code computes leaves it unchanged. Extract stores it in every token file's fingerprint
(:func:`gece.scoring.extraction.scoring_code`), and reuses a token file by content while it holds.

Import forms followed (``P`` is the package of the importing module):

- ``import gece.<m>`` / ``import gece.<m> as y``: gece/__init__.py and gece/<m>.py (or gece/<m>/__init__.py)
- ``from gece.<m> import y``: gece.<m>, and gece.<m>.<y> too when y is a submodule (else y is an attribute)
- ``from . import x``, ``from .x import y``, ``from ..x import y``: the same, relative to ``P``
  (any depth; ``from . import x`` in a package's __init__.py is relative to that package)
- ``importlib.import_module("gece.<m>")`` (also ``import_module(".<m>", "gece")``) with literal strings,
  and ``__import__("gece.<m>")``
- imports under ``if TYPE_CHECKING:`` are followed too (pydantic may resolve annotations at run time)

Not followed: stdlib and third-party imports, imports of a computed name (``import_module(name)``),
``from gece.<m> import *`` beyond gece.<m> itself, and package data (``importlib.resources.files("gece.<m>")``,
CSS, templates): a stage that reads package data declares those files (``package_data``, gece.cmd.stage).

``python -m gece.code.closure`` prints the closure of every ``gece`` subcommand; ``python -m gece.code.closure
gece.stats.metrics ...`` prints the closure of the modules named.
"""

from __future__ import annotations

import ast
import hashlib
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from gece.code.syntax import source_hash

SRC = Path(__file__).resolve().parents[2]  # the folder holding the package (src/ in a checkout)
ROOT = SRC.parent  # the repository root in a checkout: paths are reported relative to it
PACKAGE = "gece"


@dataclass(frozen=True)
class Tree:
    """Where a package's source lies: ``root`` (paths are reported relative to it), ``src`` (the folder
    holding the top-level package) and ``package`` (its name; imports of other packages are ignored)."""

    root: Path = ROOT
    src: Path = SRC
    package: str = PACKAGE

    def file(self, module: str) -> Path | None:
        """The file of a module name (``a.b`` -> src/<a>/<b>.py or src/<a>/<b>/__init__.py), None if there is none."""
        base = self.src.joinpath(*module.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
        return None

    def module(self, path: Path) -> str:
        """The module name of a file under ``src``."""
        parts = list(path.resolve().relative_to(self.src.resolve()).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def rel(self, path: Path) -> str:
        """``path`` relative to the repository root, with forward slashes (as dvc.yaml spells deps)."""
        return path.resolve().relative_to(self.root.resolve()).as_posix()

    def ours(self, module: str) -> bool:
        return module == self.package or module.startswith(self.package + ".")


# ------------------------------------------------------------------------ one file's imports
@dataclass(frozen=True)
class Import:
    """One import of a module by a file: ``module`` (absolute name, which may not exist), ``names`` (the
    names of ``from module import names``: each may be a submodule), ``module_level`` (False inside a
    function or lambda, or under ``if TYPE_CHECKING:``: it does not run when the file is imported) and
    ``line``."""

    module: str
    names: tuple[str, ...]
    module_level: bool
    line: int


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _absolute(importer: str, is_package: bool, level: int, module: str | None) -> str | None:
    """The absolute name of ``from <level dots><module> import ...`` in module ``importer``."""
    if level == 0:
        return module
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        return None  # beyond the top-level package: an ImportError at run time
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def file_imports(path: Path, tree: Tree, skip_functions: Collection[str] = ()) -> list[Import]:
    """Every import of ``path`` (any package; callers filter), in source order. Top-level functions named in
    ``skip_functions`` are not read (their imports are left out)."""
    importer = tree.module(path)
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, module_level: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(alias.name, (), module_level, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            name = _absolute(importer, is_package, node.level, node.module)
            if name is not None:
                found.append(
                    Import(name, tuple(a.name for a in node.names if a.name != "*"), module_level, node.lineno)
                )
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            name, anchor = _literal(node.args[0]), _literal(node.args[1]) if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "package":
                    anchor = _literal(kw.value)
            if name is not None and name.startswith(".") and anchor is not None:
                level = len(name) - len(name.lstrip("."))
                name = _absolute(anchor, True, level, name[level:] or None)
            if name is not None and not name.startswith("."):
                found.append(Import(name, (), module_level, node.lineno))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, module_level)
            return
        inner = module_level and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    body = ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in skip_functions:
            continue
        visit(stmt, True)
    return found


def targets(imp: Import, tree: Tree) -> list[str]:
    """The existing modules of the package that ``imp`` names (without their parent packages):
    the longest existing prefix of ``imp.module``, and each of ``imp.names`` that is a submodule."""
    if not tree.ours(imp.module):
        return []
    parts = imp.module.split(".")
    while parts and tree.file(".".join(parts)) is None:
        parts.pop()
    if not parts:
        return []
    module = ".".join(parts)
    out = [module]
    if module == imp.module:
        out += [f"{module}.{n}" for n in imp.names if tree.file(f"{module}.{n}") is not None]
    return out


def with_parents(module: str) -> Iterator[str]:
    """``a.b.c`` -> a, a.b, a.b.c: importing a module runs every package's __init__.py on the way."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


# ------------------------------------------------------------------------------ closure
def closure(
    roots: Iterable[str | Path], tree: Tree = Tree(), skip_functions: Mapping[str, Collection[str]] | None = None
) -> set[str]:
    """Repository-relative paths (``src/gece/...``) of every file that importing and running ``roots``
    (module names or files) may execute. ``skip_functions`` maps a module name to top-level functions
    of it whose imports are not followed."""
    skip = skip_functions or {}
    todo: list[str] = []
    for r in roots:
        name = tree.module(Path(r)) if isinstance(r, Path) else r
        if tree.file(name) is None:
            raise ValueError(f"{r}: no such module under {tree.src}")
        todo += with_parents(name)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = tree.file(name)
        assert path is not None
        for imp in file_imports(path, tree, skip.get(name, ())):
            for target in targets(imp, tree):
                todo += (m for m in with_parents(target) if m not in seen)
    return {tree.rel(tree.file(m)) for m in seen}  # type: ignore[arg-type]


def module_graph(tree: Tree = Tree(), module_level_only: bool = True) -> dict[str, dict[str, Import]]:
    """Every module of the package -> {module it imports: the (first) import statement}. With
    ``module_level_only``, only the imports that run when the module is imported (not inside functions,
    not under TYPE_CHECKING). Parent packages are not edges (``import a.b.c`` is an edge to a.b.c only)."""
    graph: dict[str, dict[str, Import]] = {}
    for path in sorted(tree.src.joinpath(tree.package).rglob("*.py")):
        name = tree.module(path)
        edges = graph.setdefault(name, {})
        for imp in file_imports(path, tree):
            if imp.module_level or not module_level_only:
                for target in targets(imp, tree):
                    if target != name:
                        edges.setdefault(target, imp)
    return graph


def describe_cycle(cycle: list[str], graph: Mapping[str, Mapping[str, Import]]) -> str:
    """``a -> b (a line 3) -> a (b line 9, in a function)``."""
    steps = [cycle[0]]
    for a, b in pairwise(cycle):
        imp = graph[a][b]
        steps.append(f"{b} ({a} line {imp.line}{'' if imp.module_level else ', in a function'})")
    return " -> ".join(steps)


def cycles(graph: Mapping[str, Mapping[str, object]]) -> list[tuple[list[str], list[str]]]:
    """Each strongly connected component of more than one module (Tarjan), sorted, with one shortest cycle
    through its first module: ``([a, b, c], [a, b, a])``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    found = []
    for comp in sorted(comps):
        members = set(comp)
        start = comp[0]
        # the shortest path start -> ... -> start inside the component (breadth first)
        prev: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in prev:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, {})):
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [start]
        v = prev[start]
        while v != start:
            path.append(v)
            v = prev[v]
        path.append(start)
        found.append((comp, path[::-1]))
    return found


# ------------------------------------------------------------------ what the code does
def code_hash(files: Iterable[str], tree: Tree = Tree(), docstrings: bool = True) -> str:
    """sha256 over ``files`` (repository-relative, as :func:`closure` returns them), each by its path below the
    package's folder and its canonical syntax tree (:func:`gece.code.syntax.canonical_source`, the same on every
    Python version): a renamed module changes it, a comment does not."""
    h = hashlib.sha256()
    for rel in sorted(files):
        path = tree.root / rel
        h.update(path.resolve().relative_to(tree.src.resolve()).as_posix().encode() + b"\0")
        h.update(bytes.fromhex(source_hash(path, docstrings)))
    return h.hexdigest()


# -------------------------------------------------------------------- gece subcommands
def commands(tree: Tree = Tree()) -> dict[str, str]:
    """cli.py's ``COMMANDS`` (subcommand -> module that implements it), read with ast."""
    path = tree.file(f"{tree.package}.cli")
    if path is None:
        raise ValueError(f"{tree.package}/cli.py does not exist")
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        target = (
            stmt.target
            if isinstance(stmt, ast.AnnAssign)
            else (stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
        )
        if isinstance(target, ast.Name) and target.id == "COMMANDS" and stmt.value is not None:
            try:  # name -> (module, help)
                return {
                    name: value[0] if isinstance(value, tuple) else value
                    for name, value in ast.literal_eval(stmt.value).items()
                }
            except ValueError:
                raise ValueError(
                    f"{tree.rel(path)}:{stmt.lineno}: COMMANDS is not a literal dict "
                    "(gece.code.closure reads it without importing it)"
                ) from None
    raise ValueError(f"{tree.rel(path)} has no COMMANDS")


def command_closure(command: str, tree: Tree = Tree()) -> set[str]:
    """The files that ``gece <command>`` may run: closure(cli.py, gece/__init__.py) | closure(its module)."""
    mapping = commands(tree)
    if command not in mapping:
        raise KeyError(f"gece {command}: not a key of COMMANDS in cli.py ({', '.join(sorted(mapping))})")
    return closure([f"{tree.package}.cli", tree.package, mapping[command]], tree)


def command_names(tree: Tree = Tree()) -> list[str]:
    return sorted(commands(tree))


def main(argv: list[str]) -> int:
    tree = Tree()
    if argv:
        for name in argv:
            print(f"{name}:")
            for path in sorted(closure([name], tree)):
                print(f"  - {path}")
        return 0
    print("# the code of each gece subcommand, from the COMMANDS of cli.py: its stages' code deps in dvc.yaml")
    for command in command_names(tree):
        print(f"{command}:")
        for path in sorted(command_closure(command, tree)):
            print(f"  - {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
