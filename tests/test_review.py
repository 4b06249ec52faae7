"""Review-sized experiments (issue 38, item 1): `gece diff` and `gece exp-summary` sum up what moved in
reports/summary.json per section, metric family and benchmark in one screen (40 lines at 100 columns), count
what `dvc metrics diff` shows as changed (non-zero), rank changes within a family only, and never cut a run id.
The inputs are constructed before/after summaries in the shape of the committed reports/summary.json."""

from __future__ import annotations

import copy
import json
import random
import re

import pytest
from rich.console import Console

from gece.cli import main
from gece.io.files.json_reader import flatten
from gece.tools import diff, experiments

from .conftest import ROOT

LONG_ID = "paper-deepseek-r1-distill-llama-8b-instruct-v2.5"  # a long run id, with a dot


def _summary() -> dict:
    """A summary in the shape of reports/summary.json: every section, two benchmarks, three runs."""
    runs = ["smollm2-135m", "gemma-3-270m", LONG_ID]
    benches = ["winobias", "genderlex_person"]
    head = {"n": 771, "ece": 0.06, "gender_ece": 0.065, "macro_ce": 0.45, "brier": 0.19, "accuracy": 0.71}
    return {
        "runs": {b: {m: dict(head) for m in runs} for b in benches},
        "calibration": {b: {m: {"best_ece_split": 0.03, "best_ece_crossfit": 0.04} for m in runs} for b in benches},
        "binning": {b: {m: {"ece_min": 0.05, "ece_max": 0.07} for m in runs} for b in benches},
        "neutral": {"gemma-3-270m": {"genderlex_person": {"ece_change": -0.03, "gender_ece_change": -0.02}}},
        "special_tokens": {"gemma-3-270m": {b: {"ece_change": 0.29, "mean_confidence_change": 0.2} for b in benches}},
        "compare": {
            b: {"ece_significant": 3, "gender_ece_significant": 2, "brier_significant": 3, "accuracy_significant": 2}
            for b in benches
        },
        "groups": {b: {m: {"gap_identity": 0.014, "gap_soft": None} for m in runs} for b in benches},
    }


def _n_bins_like(old: dict) -> dict:
    """What 15 bins instead of 10 does: the binned errors move, MacroCE, Brier, accuracy and n do not; one
    significance count moves; some values move by float noise only (DVC shows a change of 0)."""
    new = copy.deepcopy(old)
    for b, by_run in new["runs"].items():
        for m, row in by_run.items():
            row["ece"] += 0.004 if m != LONG_ID else -0.031  # the largest ECE change, on the long id
            row["gender_ece"] += 0.002
            row["brier"] += 3e-7  # float noise: shown as 0 by dvc metrics diff, not counted
        for m in by_run:
            new["calibration"][b][m]["best_ece_split"] += 0.001
            new["groups"][b][m]["gap_identity"] -= 0.0004
    new["neutral"]["gemma-3-270m"]["genderlex_person"]["ece_change"] += 0.002
    new["compare"]["winobias"]["ece_significant"] += 1
    new["groups"]["winobias"]["smollm2-135m"]["gap_soft"] = 0.5  # null -> a number: a change DVC shows as "-"
    return new


# the values a review of _summary() against _n_bins_like() compares: 86 keys, of which 5 gap_soft are null on both
# sides, which DVC does not read as values (neither gece diff nor dvc exp show, so gece exp-summary, counts them)
COMPARED = 81


def _dvc_nonzero(old: dict, new: dict) -> int:
    """How many values `dvc metrics diff` shows with a non-zero change: DVC's own diff, rounded as it prints."""
    from dvc.utils.diff import diff as dvc_diff

    shown = dvc_diff({"s.json": {"data": old}}, {"s.json": {"data": new}})["s.json"]
    return sum(1 for v in shown.values() if "diff" in v and round(v["diff"], 5) != 0)


def test_review_counts_what_dvc_metrics_diff_shows_as_changed():
    old = _summary()
    new = _n_bins_like(old)
    r = diff.review(diff.leaves(old, new, "reports/summary.json"), diff.DEFAULT_TOL)
    assert r.moved == _dvc_nonzero(old, new) == 26
    assert r.other == 1 and r.hidden == 6  # gap_soft null -> 0.5; the Brier noise
    fam = {g.name: g for g in r.by_family}
    assert list(fam) == [
        "runs · ECE-like",
        "runs · Gender-ECE",
        "calibration · ECE-like",
        "neutral · ECE-like",
        "compare · counts",
        "groups · gender gap",
    ]
    ece = fam["runs · ECE-like"]
    assert (ece.moved, ece.total, ece.up, ece.down) == (6, 12, 4, 2)  # ece moved, macro_ce did not
    assert ece.largest is not None and ece.largest.delta == pytest.approx(-0.031)
    assert ece.where == diff.Place("runs", "winobias", LONG_ID, "ece")  # the dotted id whole
    assert fam["compare · counts"].largest.delta == 1 and fam["compare · counts"].where.run == ""
    assert fam["neutral · ECE-like"].where == diff.Place("neutral", "genderlex_person", "gemma-3-270m", "ece_change")
    assert fam["groups · gender gap"].other == 1
    bench = {g.name: g for g in r.by_benchmark}
    assert bench["winobias"].families == {"ECE-like": 6, "Gender-ECE": 3, "gender gap": 3, "counts": 1}
    assert sum(g.moved for g in r.by_benchmark) == sum(g.moved for g in r.by_family) == r.moved
    # a tolerance replaces DVC's rule
    assert diff.review(diff.leaves(old, new), 0.0).moved == r.moved + 6
    assert diff.review(diff.leaves(old, new), 0.01).moved == 3  # the long id's ECEs, the count


@pytest.mark.parametrize(
    ("leaf", "family"),
    [
        ("ece", "ECE-like"),
        ("macro_ce", "ECE-like"),
        ("best_ece_crossfit", "ECE-like"),
        ("ece_min", "ECE-like"),
        ("ece_change", "ECE-like"),
        ("ece_ci_low", "ECE-like"),
        ("gender_ece", "Gender-ECE"),
        ("gender_ece_change", "Gender-ECE"),
        ("gap_identity", "gender gap"),
        ("gap_pred", "gender gap"),
        ("bias_gap", "gender gap"),
        ("brier", "Brier"),
        ("accuracy", "accuracy/shares"),
        ("mean_confidence_change", "accuracy/shares"),
        ("stereotype_share", "accuracy/shares"),
        ("n", "counts"),
        ("n_ties", "counts"),
        ("ece_significant", "counts"),
        ("whatever", "other"),
    ],
)
def test_families_come_from_the_metric_table(leaf, family):
    assert diff.family(leaf) == family


def _column(text: str, i: int) -> str:
    """Column ``i`` of a boxed rich table as one string: a folded cell's lines put back together."""
    return "".join(line.split("│")[i + 1].strip() for line in text.splitlines() if line.count("│") > i + 1)


def _render(width: int, fn) -> str:
    console = Console(width=width, record=True, soft_wrap=False, emoji=False, file=open("/dev/null", "w"))  # noqa: SIM115
    fn(console)
    return console.export_text()


def test_the_review_footer_wraps_at_the_terminal_width():
    """gece's console soft-wraps (ids are never broken by rich), so the footer line wraps itself: at 100 columns no
    line of ``gece diff`` is wider than 100 (it printed 129 columns after a real n_bins experiment)."""
    old = json.loads((ROOT / "reports" / "summary.json").read_text())
    new = copy.deepcopy(old)
    new["runs"]["winobias"]["smollm2-135m"]["ece"] += 0.01
    r = diff.review(diff.leaves(old, new, "reports/summary.json"), None)
    console = Console(width=100, record=True, soft_wrap=True, emoji=False, file=open("/dev/null", "w"))  # noqa: SIM115
    diff.print_review(r, "HEAD -> workspace: what moved", console, "--all lists them, --json for a script.")
    assert max(len(line) for line in console.export_text().splitlines()) <= 100


def test_the_review_fits_one_screen_even_when_everything_moves():
    """The committed summary with every number moved: still under 40 lines at 100 columns, no id cut."""
    old = json.loads((ROOT / "reports" / "summary.json").read_text())
    new = copy.deepcopy(old)
    rng = random.Random(0)

    def shake(o):
        for k, v in o.items():
            if isinstance(v, dict):
                shake(v)
            elif isinstance(v, int | float):
                o[k] = v + rng.uniform(-0.02, 0.02)

    shake(new)
    r = diff.review(diff.leaves(old, new, "reports/summary.json"), None)
    assert r.moved == _dvc_nonzero(old, new)
    text = _render(100, lambda c: diff.print_review(r, "HEAD -> workspace: what moved", c, "--all lists them."))
    assert len(text.splitlines()) <= 40, text
    assert "…" not in text
    runs = {g.where.run for g in r.by_family if g.where and g.where.run}
    flat = "".join(text.split())
    for run in runs:  # an id folded in its column is still whole, read column by column
        assert run in text or all(part in flat for part in run.split("-")), run


def test_gece_diff_prints_the_review_and_the_detail_one_flag_away(tmp_path, monkeypatch, capsys):
    old = _summary()
    new = _n_bins_like(old)
    monkeypatch.setattr(
        diff, "compared", lambda o, n, paths: (diff.leaves(old, new, "reports/summary.json"), 1), raising=True
    )
    console = Console(width=80, record=True, soft_wrap=True, emoji=False)
    monkeypatch.setattr("gece.cmd.command.out", console)
    assert main(["diff"]) == 0
    text = console.export_text()
    assert len(text.splitlines()) <= 40 and "…" not in text
    assert "runs · ECE-like" in text and "-0.031" in text
    assert f"{_dvc_nonzero(old, new)} of {COMPARED} values moved; 1 added, removed or not a number" in text
    assert main(["diff", "--all"]) == 0
    text = console.export_text()
    assert f"runs.winobias.{LONG_ID}.ece" in _column(text, 0) and "…" not in text  # folded, not cut
    capsys.readouterr()
    assert main(["diff", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["moved"] == _dvc_nonzero(old, new) and len(got["changes"]) == got["moved"] + got["other_changes"]
    assert got["families"][0]["largest"]["run"] == LONG_ID


def _entry(rev: str, name: str | None, summary: dict, n_bins: int) -> dict:
    params = {"metrics": {"n_bins": n_bins, "seed": 0}}
    return {
        "rev": rev,
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": params}},
            "metrics": {"reports/summary.json": {"data": summary}},
        },
    }


def _shown() -> tuple[list, dict, dict]:
    old = _summary()
    new = _n_bins_like(old)
    base = _entry("a" * 40, "main", old, 10)
    base["experiments"] = [{"revs": [_entry("b" * 40, "tidy-dace", new, 15)]}]
    return [_entry("workspace", None, new, 15), base], old, new


def test_exp_summary_counts_each_experiment_against_its_baseline():
    shown, old, new = _shown()
    found = experiments.rows(shown)
    assert [(r.name, r.baseline) for r in found] == [("workspace", "main"), ("main", None), ("tidy-dace", "main")]
    done = experiments.reviews(found)
    assert [(r.name, rv.moved) for r, _, rv in done] == [("workspace", _dvc_nonzero(old, new))] * 1 + [
        ("tidy-dace", _dvc_nonzero(old, new))
    ]
    got = experiments.as_json(found, ["metrics.n_bins"], None)
    exp = got["rows"][2]
    assert exp["params"] == {"metrics.n_bins": 15} and exp["review"]["moved"] == len(
        [c for c in exp["changes"] if c["change"] is not None]
    )


def test_gece_diff_and_exp_summary_count_the_same_values_for_the_same_change():
    """A null is no value for DVC, which leaves it out of dvc exp show: gece diff leaves it out too, so both
    commands review the same values (741 and 693 on the committed summary against an older one, before)."""
    shown, old, new = _shown()
    by_diff = diff.review(diff.leaves(old, new, "reports/summary.json"), None)
    (_, _, by_exp), *_ = experiments.reviews(experiments.rows(shown))
    assert by_diff.total == by_exp.total == COMPARED
    assert (by_diff.moved, by_diff.other, by_diff.hidden) == (by_exp.moved, by_exp.other, by_exp.hidden)
    assert sum(v is None for v in flatten(old).values()) == 6  # one of them turns 0.5: added, not compared


def test_exp_summary_ranks_within_a_family_never_counts_beside_eces():
    shown, *_ = _shown()
    found = experiments.rows(shown)
    _, cols, left = experiments.table(found, max_metrics=3)
    # the count moved by 1 and the ECEs by 0.031 at most: ranked by spread, the count would come first
    assert [diff.family(k.rsplit(".", 1)[-1]) for k in cols].count("counts") <= 1
    assert any(k.endswith(f".{LONG_ID}.ece") for k in cols)
    assert len(cols) + left == 27  # every key that moved (gap_soft: null -> 0.5)


def test_exp_summary_fits_one_screen(monkeypatch, capsys):
    shown, old, new = _shown()
    monkeypatch.setattr(experiments, "exp_show_json", lambda *a: shown)
    console = Console(width=100, record=True, soft_wrap=True, emoji=False)
    monkeypatch.setattr("gece.cmd.command.out", console)
    assert main(["exp-summary"]) == 0
    text = console.export_text()
    assert len(text.splitlines()) <= 40, text
    assert "tidy-dace: the same metrics as workspace" in text and "…" not in text
    # the long run id stays whole (gece.base.terminal_table.Table), so the family's label wraps at its space instead
    assert LONG_ID in text and "runs ·" in text and "ECE-like" in text
    assert f"{_dvc_nonzero(old, new)} of {COMPARED} values moved" in text
    assert main(["exp-summary", "--all", "--max-metrics", "2"]) == 0
    assert f"{27} metrics of reports/summary.json moved" in " ".join(console.export_text().split())
    capsys.readouterr()
    assert main(["exp-summary", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["review"]["moved"] == _dvc_nonzero(old, new)


def _documented_exp_show() -> list[list[str]]:
    """The `dvc exp show` command lines of docs/daily.md's code blocks, as argument lists."""
    import shlex

    text = (ROOT / "docs" / "daily.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [x for b in blocks for x in b.splitlines() if x.startswith("dvc exp show")]
    return [shlex.split(x.split(" > ")[0], comments=True) for x in lines]


def test_the_documented_dvc_exp_show_command_lines_parse_and_keep_real_columns():
    import yaml
    from dvc.cli import parse_args

    from gece.io.files.json_reader import flatten

    commands = _documented_exp_show()
    assert len(commands) >= 4
    summary = json.loads((ROOT / "reports" / "summary.json").read_text())
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    columns = ["Experiment", "Created", *flatten(summary), *flatten(params)]
    used = set()
    for argv in commands:
        args = parse_args(argv[1:])  # DVC's own parser: an unknown option or a missing value exits
        assert args.func.__name__ == "CmdExperimentsShow"
        used |= {a for a in argv if a.startswith("--")}
        for pattern in (args.keep or []) + (args.drop or []):
            assert any(re.match(pattern, c) for c in columns), (argv, pattern)
        if args.keep:  # what is kept is a parameter or a metric, beyond the experiment's name
            keep = re.compile("|".join(args.keep))
            assert any(keep.match(c) for c in [*flatten(summary), *flatten(params)]), argv
    assert {"--only-changed", "--drop", "--keep", "--md", "--csv", "--precision"} <= used
