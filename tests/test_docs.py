"""The documentation: README.md stays short, every relative link in README.md and docs/*.md
resolves (file and heading), no page cites a file outside the repository, and every module a page, docstring
or comment cites exists."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

from .conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")


def _text(page: Path) -> str:
    """The page without code blocks and code spans (links there are examples, not links)."""
    return CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -")
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(_text(page))]


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    broken = []
    for link in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / unquote(path)).resolve() if path else page
        if not target.is_relative_to(ROOT):
            broken.append(f"{link}: outside the repository")
        elif not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_pages_link_each_other():
    """Every page of docs/ is reachable from README.md."""
    linked = {(ROOT / unquote(link.partition("#")[0])).resolve() for link in _links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_cites_a_file_outside_the_repository(page: Path):
    text = page.read_text(encoding="utf-8")
    cited = re.findall(r"\bSPEC\b|\bLAYOUT\.md\b|\.\./shared/(?!dvc-store|data\b)\S+", text)
    assert not cited, f"{page.relative_to(ROOT)} cites {cited}"


PACKAGE = ROOT / "src" / "gece"
# a module path: folders, then a .py file (src/gece/io/settings/params.py, gece/cli.py, pipeline/runs.py,
# tests/conftest.py)
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.py)\b")
# a dotted name in the package: gece.stats.metrics, gece.stats.metrics.summarize
DOTTED = re.compile(r"(?<![\w./-])(gece(?:\.[A-Za-z_]\w*)+)")
# where a cited path may be relative to: the repository, the package, src/, the tests (a list of test modules)
PATH_ROOTS = (ROOT, PACKAGE, PACKAGE.parent, ROOT / "tests")
SOURCES = [*PAGES, *sorted(PACKAGE.rglob("*.py"))]


def _path_exists(cited: str) -> bool:
    """``cited`` is a file of the repository (read from one of ``PATH_ROOTS``) or of an installed package
    (``dvc/stage/run.py``: a comment that cites DVC's own code)."""
    if any((base / cited).is_file() for base in PATH_ROOTS):
        return True
    top, _, rest = cited.partition("/")
    spec = importlib.util.find_spec(top) if top.isidentifier() else None
    return bool(spec and spec.submodule_search_locations) and any(
        (Path(d) / rest).is_file() for d in spec.submodule_search_locations
    )


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    """The names a module binds at its top level: functions, classes, assignments and imports."""
    names = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


@cache
def _package_text() -> str:
    return "\n".join(f.read_text(encoding="utf-8") for f in sorted(PACKAGE.rglob("*.py")))


def _dotted_exists(cited: str) -> bool:
    """``cited`` is a module of the package, or a name its longest module prefix defines at top level, or
    ``gece.<key>``, a key of a file's ``gece.`` metadata that the code writes (``gece.source``)."""
    parts = cited.split(".")
    for i in range(len(parts), 0, -1):
        base = PACKAGE.parent.joinpath(*parts[:i])
        module = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
        if module is not None:
            rest = parts[i:]
            if not rest or rest[0].startswith("__") or rest[0] in _top_level_names(module):
                return True
            return i == 1 and len(rest) == 1 and f'"{rest[0]}"' in _package_text()
    return False


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cited_module_exists(source: Path):
    """Every module path (``src/gece/io/settings/params.py``, ``pipeline/runs.py``) and dotted name
    (``gece.stats.metrics``)
    that README.md, docs/*.md or a docstring or comment of src/ cites names a file or module that exists."""
    text = source.read_text(encoding="utf-8")
    missing = [m.group(1) for m in MODULE_PATH.finditer(text) if not _path_exists(m.group(1))]
    missing += [m.group(1) for m in DOTTED.finditer(text) if not _dotted_exists(m.group(1))]
    assert not missing, f"{source.relative_to(ROOT)} cites what does not exist: {sorted(set(missing))}"
