"""Terminal output that never loses an id (issue 38): the one table printer (gece.base.terminal_table.Table) at several
widths with the longest real run ids, every command's table through it, and a ``--json`` wherever a table is
printed."""

from __future__ import annotations

import ast
import json
from io import StringIO

import pytest
from rich.console import Console

from gece import cli
from gece.base.terminal_table import Table
from gece.cmd import command, run_tables

from .conftest import ROOT
from .test_cli_fuzz import PARSERS

IDS = ["paper-deepseek-r1-distill-llama-8b", "gemma-3-270m-nobos", "smollm2-135m"]
KEYS = ["n", "ece", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"]
WIDTHS = (40, 80, 100, 200)


def _render(table: Table, width: int) -> str:
    c = Console(width=width, file=StringIO(), soft_wrap=True, emoji=False)
    c.print(table)
    return c.file.getvalue()


def _rows() -> dict[str, dict]:
    return {run: {"n": 837, **{k: 0.1 + i / 100 for i, k in enumerate(KEYS[1:])}} for run in IDS}


@pytest.mark.parametrize("width", WIDTHS)
def test_rows_table_never_cuts_an_id(width):
    text = _render(run_tables.rows_table("runs", "run", _rows(), KEYS), width)
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    for run in IDS:  # whole, on one line: in its row or in the legend
        assert sum(line.count(run) for line in text.splitlines()) == 1, (run, text)
    legend = [line for line in text.splitlines() if line.startswith("#")]
    if legend:  # the keys stand in the rows, once each, and the legend gives them their ids in row order
        assert legend == [f"#{i} {run}" for i, run in enumerate(IDS, 1)]
        assert all(sum(f"│ #{i} " in line for line in text.splitlines()) == 1 for i in range(1, 4))
    if width >= 80:  # the numbers stay on one line too (at 40 columns they fold)
        assert all(f"{v:.4f}" in text for v in _rows()[IDS[0]].values() if isinstance(v, float))


def test_rows_table_widths():
    """At 200 and 100 columns the ids stay in the rows; at 80 the longest real id needs the legend."""
    assert "#1" not in _render(run_tables.rows_table("runs", "run", _rows(), KEYS), 200)
    assert "#1" not in _render(run_tables.rows_table("runs", "run", _rows(), KEYS), 100)
    narrow = _render(run_tables.rows_table("runs", "run", _rows(), KEYS), 80)
    assert "#1 paper-deepseek-r1-distill-llama-8b" in narrow
    assert "gemma-3-2…" not in narrow


@pytest.mark.parametrize("width", WIDTHS)
def test_ids_among_other_words_stay_whole(width):
    """A cell with an id and numbers (gece summary's best and worst): the numbers wrap, the id does not."""
    table = Table(title="findings")
    table.add_column("benchmark", ids=True)
    table.add_column("metric")
    for col in ("best", "worst"):
        table.add_column(col, ids=True)
    table.add_row("genderlex_someone", "Gender-ECE", f"{IDS[2]} 0.065 [0.041, 0.093]", f"{IDS[1]} 0.386 [0.33, 0.43]")
    table.add_row("winobias", "ECE", f"{IDS[0]} 0.065 [0.041, 0.093]", f"{IDS[1]} 0.429 [0.394, 0.463]")
    text = _render(table, width)
    assert "…" not in text
    if width >= 80:
        for word in ("genderlex_someone", *IDS):
            assert word in text, (word, text)


@pytest.mark.parametrize("width", (80, 100, 200))
def test_gece_summary_keeps_every_id_at_any_width(width, full_reports, tmp_path, monkeypatch, capsys):
    """The findings ``gece summary`` prints (on the tests' complete reports tree, tests/report_data.py: the
    pipeline's per-run reports are DVC outputs a clean clone lacks): the same ids, whole, at 80, 100 and 200
    columns."""
    monkeypatch.chdir(full_reports)
    monkeypatch.setattr(command.out, "width", 200)
    assert cli.main(["summary", "--out", str(tmp_path / "summary.json")]) == 0
    wide = capsys.readouterr().out
    monkeypatch.setattr(command.out, "width", width)
    assert cli.main(["summary", "--out", str(tmp_path / "summary.json")]) == 0
    text = capsys.readouterr().out
    assert "…" not in text
    ids = ["tiny-lm-nobos", "tiny-lm", "genderlex_someone", "genderlex_person", "paper-gpt-j-6b", "paper-gemma-2-9b"]
    shown = [i for i in ids if i in wide]  # the findings name the best and worst runs, not every run
    assert {"tiny-lm-nobos", "genderlex_someone"} <= set(shown)
    for run in shown:
        assert text.count(run) == wide.count(run), run


def test_no_table_bypasses_the_printer():
    """Every table the commands print is a gece.base.terminal_table.Table: no module but terminal_table.py imports
    rich's."""
    offenders = []
    for path in sorted((ROOT / "src" / "gece").rglob("*.py")):
        if path.name == "terminal_table.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "rich.table":
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


# every command that prints a table (found in its module's source below, and checked against this list)
TABLE_COMMANDS = [
    "metrics",
    "calibrate",
    "ablate",
    "neutral",
    "special-tokens",
    "prompts",
    "compare",
    "groups",
    "summary",
    "try",
    "diff",
    "exp-summary",
]
PRINTS_TABLE = ("Table(", "rows_table(", "print_metrics(", "print_review(")


def _prints_table(name: str) -> bool:
    """Whether the command's module, or its printing module beside it (``<module>_output.py``), draws a table."""
    path = ROOT / "src" / "gece" / (cli.COMMANDS[name].removeprefix("gece.").replace(".", "/") + ".py")
    beside = path.with_name(path.stem.split("_")[0] + "_output.py")
    texts = [p.read_text(encoding="utf-8") for p in (path, beside) if p.is_file()]
    return any(call in text for text in texts for call in PRINTS_TABLE)


def test_the_table_commands_are_listed():
    assert [name for name in cli.COMMANDS if _prints_table(name)] == TABLE_COMMANDS


@pytest.mark.parametrize("name", TABLE_COMMANDS)
def test_every_table_has_a_json_output(name):
    options = {o for a in PARSERS[name]._actions for o in a.option_strings}
    assert "--json" in options, f"gece {name} prints a table but has no --json"


JSON_RUNS = {  # the commands given --json here (the others' --json is tested with their modules)
    "neutral": (["neutral", "--model", "tiny-lm-nobos", "--out", "{out}"], lambda d: d),
    "special-tokens": (["special-tokens", "--model", "tiny-lm", "--out", "{out}"], lambda d: d),
    "ablate": (
        [
            "ablate",
            "artifacts/scores/winogender/tiny-lm.parquet",
            "--sample-size-out",
            "{out}",
            "--binning-out",
            "{out2}",
        ],
        lambda d: d["sample_size"],
    ),
}


@pytest.mark.parametrize("name", JSON_RUNS)
def test_json_is_what_the_stage_writes(name, full_reports, tmp_path, monkeypatch, capsys):
    """``--json`` prints the report the command writes, and no table (on the tests' complete reports tree)."""
    monkeypatch.chdir(full_reports)
    argv, part = JSON_RUNS[name]
    out, out2 = tmp_path / "out.json", tmp_path / "out2.json"
    argv = [a.format(out=out, out2=out2) for a in argv]
    assert cli.main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert part(printed) == json.loads(out.read_text())
    if name == "ablate":
        assert printed["binning"] == json.loads(out2.read_text())
