"""The documentation: README.md stays short, every relative link in README.md and docs/*.md
resolves (file and heading), and no page cites a file outside the repository."""

from __future__ import annotations

import re
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
