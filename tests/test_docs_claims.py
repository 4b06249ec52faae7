"""The numbers and places the docs quote (issue 62, item 5): each is checked against what it quotes.

- docs/development.md's layout table lists every module of ``src/gece``, each once, and no module that is gone;
- the README's rebuild time is the sum of the parts it quotes, which are docs/dvc.md's measurements;
- docs/daily.md's worst re-scoring case is the one ``tests/test_findings.py`` measures;
- every benchmark id the docs name is one of params.yaml or one a page adds itself;
- docs/lmeval.md names the page and markdown the engine agreement table is written to;
- the way back to the baseline (docs/daily.md) leaves no table an experiment added.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from gece.io.paths import report_layout
from gece.report import findings
from gece.report.cells import ReportData
from gece.report.compare_tables import agreement_table

from .conftest import ROOT
from .test_findings import NEXT_WORST, WORST

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "src" / "gece"


def _read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


# ------------------------------------------------------------------ the layout table
def layout_table() -> list[str]:
    """The modules docs/development.md's "Code layout" table lists, relative to src/gece, in its order: a row's
    folder is the one its first cell names in backticks (none: the top of the package); in its modules cell,
    ```sub/`:`` moves into a folder below it."""
    text = _read("docs/development.md")
    section = text[text.index("## Code layout") :]
    table = next(part for part in section.split("\n\n") if part.startswith("| layer |"))
    rows = [line for line in table.splitlines() if "---" not in line]
    listed = []
    for row in rows[1:]:  # the header row names the columns
        layer, modules = row.split(" | ")[:2]
        folder = next(iter(re.findall(r"`([a-z_]+/)`", layer)), "")
        prefix = folder
        for token in re.findall(r"`([a-z_]+/)`:|`([a-z_]+\.py)`", modules):
            if token[0]:
                prefix = folder + token[0] if token[0] != folder else folder
            else:
                listed.append(prefix + token[1])
    return listed


def test_the_layout_table_lists_every_module_once():
    listed = layout_table()
    actual = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts and (p.name != "__init__.py" or p.parent == PACKAGE)
    }
    twice = sorted({m for m in listed if listed.count(m) > 1})
    assert not twice, f"docs/development.md lists these modules twice: {twice}"
    assert not sorted(actual - set(listed)), "modules the layout table of docs/development.md does not list"
    assert not sorted(set(listed) - actual), "modules the layout table of docs/development.md lists that are gone"


def test_the_layout_table_says_where_the_stages_live():
    """Every command that is a DVC stage has its module in the row the table says: pipeline/, but the stage
    ``code`` (tools/) and ``lmeval`` (lmeval/), which the pipeline row names."""
    from gece.code.closure import commands
    from gece.code.manifests import stage_commands

    modules = commands()
    outside = {modules[c] for c in stage_commands() if not modules[c].startswith("gece.pipeline.")}
    assert outside == {"gece.tools.stage_code", "gece.lmeval.stage"}
    row = next(line for line in _read("docs/development.md").splitlines() if line.startswith("| `pipeline/` |"))
    assert "`code` (`tools/stage_code.py`) and `lmeval` (`lmeval/stage.py`)" in row


# ------------------------------------------------------------------ numbers
def test_the_readme_rebuild_time_is_the_sum_of_its_parts():
    """README.md: the last full rebuild's minutes are its extract stages plus the stages after them, within the
    few minutes of prepare and annotate; the extract times are those docs/dvc.md measured for that rebuild."""
    text = " ".join(_read("README.md").split())
    m = re.search(
        r"the last one took (\d+) minutes on 2 cores \(extract (\d+) s for \S+, (\d+) s for \S+ and (\d+) s for "
        r".*?the (\d+) stages after extract (\d+) minutes",
        text,
    )
    assert m, "README.md: the rebuild sentence is not in the form this test reads"
    total, *extract, _, after = (int(g) for g in m.groups())
    assert 0 <= total - (sum(extract) / 60 + after) <= 2.5, f"README.md says {total} minutes for parts that add up to"
    dvc_md = " ".join(_read("docs/dvc.md").split())
    assert f"extract {extract[0]} s for smollm2-135m, {extract[1]} s for gemma-3-270m and {extract[2]} s for" in dvc_md


def test_the_worst_rescoring_case_in_daily_md_is_the_measured_one():
    text = " ".join(_read("docs/daily.md").split())
    assert f"moves at most {findings.MAX_ROWS_PER_RUN} of its keys" in text
    for (benchmark, run), n in (WORST, NEXT_WORST):
        assert f"{run} on {benchmark}, which moves {n}" in text or f"{run} on {benchmark}, moves {n}" in text, (
            benchmark,
            run,
            n,
        )


FAMILIES = re.compile(
    r"(?<![\w/.-])((?:winobias|winogender|genderlex|crows_pairs|winoqueer|synthbias)[a-z0-9_]*)\b(?![./-])"
)


def test_every_benchmark_the_docs_name_is_one_of_params_yaml():
    """A benchmark id a page names is an entry of params.yaml, or one the page adds itself (``+benchmarks.<id>``,
    ``benchmarks: {<id>: ...}`` in its own example); a file name (``.csv``) or a path part is no id."""
    known = set(yaml.safe_load(_read("params.yaml"))["benchmarks"])
    unknown = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        added = set(re.findall(r"benchmarks\.([a-z0-9_]+)=", text)) | set(re.findall(r"^\s*([a-z0-9_]+):", text, re.M))
        found = set(FAMILIES.findall(text)) - known - added - {"synthbias"}  # the family's own name
        if found:
            unknown[page.relative_to(ROOT).as_posix()] = sorted(found)
    assert not unknown, f"benchmark ids that params.yaml does not have: {unknown}"


# ------------------------------------------------------------------ places
def test_the_agreement_table_is_where_lmeval_md_says():
    data = ReportData(benchmarks=["winobias"], runs={"winobias": ["a", "b"]})
    entry = {"run": "a", "against": "b", "n": 3, "max_abs_lld_diff": 0.0, "flips": 0, "metric": "ece"}
    data.compare["winobias"] = {"agreement": [entry | {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0}]}
    doc = agreement_table(data)
    assert doc is not None and doc.title == "Engine agreement"
    text = " ".join(_read("docs/lmeval.md").split())
    for path in (report_layout.page_file(doc.name), report_layout.table_file(doc.name)):
        assert f"`reports/{path}`" in text, path


def test_the_way_back_to_the_baseline_leaves_no_table_an_experiment_added(tmp_path):
    """docs/daily.md's git lines, run in a repository where an experiment rewrote a committed table, added one and
    wrote a DVC-cached report: the committed table is back, the added one gone, the cached report left to DVC."""
    text = _read("docs/daily.md")
    block = text[text.index("**Back to the baseline.**") :]
    block = block[block.index("```bash\n") + 8 : block.index("\n```", block.index("```bash\n"))]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("git ")]
    assert len(commands) == 2, block

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / ".gitignore").write_text("/reports/metrics\n")
    for rel, content in (("params.yaml", "a: 1\n"), ("dvc.lock", "x\n"), ("reports/tables/overall.md", "old\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content)
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline")
    (tmp_path / "reports/tables/overall.md").write_text("new\n")
    (tmp_path / "reports/tables/agreement.md").write_text("added\n")
    (tmp_path / "reports/metrics").mkdir()
    (tmp_path / "reports/metrics/x.json").write_text("{}\n")
    for command in commands:
        subprocess.run(command, shell=True, cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "reports/tables/overall.md").read_text() == "old\n"
    assert not (tmp_path / "reports/tables/agreement.md").exists()
    assert (tmp_path / "reports/metrics/x.json").exists()  # DVC's to restore (dvc checkout), not git's
    assert sorted(p.name for p in Path(tmp_path / "reports/tables").iterdir()) == ["overall.md"]
