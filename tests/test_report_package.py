"""The report package: its page's style sheet and skeleton are package data that a wheel ships."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from gece.report import html as report_html

ROOT = Path(__file__).resolve().parents[1]


def test_every_data_file_of_the_report_package_is_declared_package_data():
    """A file setuptools does not know of is left out of the wheel: the installed page would then fail."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    data = sorted(
        p.name for p in (ROOT / "src" / "gece" / "report").iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")
    )
    assert data == ["page.css", "page.html"]
    assert sorted(declared["gece.report"]) == data
    for name in data:
        assert files("gece.report").joinpath(name).is_file()


def test_the_page_template_has_exactly_the_fields_render_html_fills():
    template = report_html._page_template()
    assert sorted(template.get_identifiers()) == sorted(
        ["css", "title", "heading", "n_benchmarks", "n_models", "n_runs", "nav", "content"]
    )
    assert template.is_valid()
    assert report_html.page_css().startswith(":root") and "$" not in report_html.page_css()
