"""Daily use: a review-sized `dvc metrics diff`, `gece diff`, the findings that open the page and the CLI."""

from __future__ import annotations

import copy
import json
import re
import subprocess

import pytest
import yaml

from gece.cli import build_parser, main
from gece.io.files.json_reader import flatten
from gece.io.schemas.summary_report import SummaryReport
from gece.io.settings.params import load_params
from gece.pipeline import report as report_stage
from gece.pipeline import report_data
from gece.report import cells as report_cells
from gece.report import findings, identity, verdicts
from gece.report import markdown as report_md
from gece.report.protocol import claimed
from gece.tools import diff

from .conftest import ROOT
from .report_data import report_text
from .test_report import parse_page


def _load(root):
    """The reports under ``root`` as the page and the summary stage read them."""
    params = load_params(root / "params.yaml")
    return report_data.load_report_data(params, root / "reports", root / "artifacts" / "scores", root / "reports", root)


@pytest.fixture(scope="module")
def references(reference_reports):
    """The reference runs' reports, built afresh (tests/conftest.py: reference_reports): on every clone."""
    return _load(reference_reports)


@pytest.fixture(scope="module")
def shipped(workspace_reports):
    """The workspace's reports of every run (DVC-cached, after `make repro`); skipped on a clean clone."""
    return _load(ROOT)


@pytest.fixture(params=["reference", "workspace"])
def reports(request):
    """(the reports, which): the reference runs' on every clone, and every run's where `make repro` put them."""
    return request.getfixturevalue("references" if request.param == "reference" else "shipped"), request.param


# ------------------------------------------------------------------- dvc metrics diff
def test_dvc_yaml_declares_only_the_summary_as_metrics():
    stages_ = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = [
        next(iter(m)) if isinstance(m, dict) else m
        for s in stages_.values()
        for m in (s.get("metrics") or s.get("do", {}).get("metrics") or [])
    ]
    assert declared == ["reports/summary.json"]
    assert stages_["summary"]["cmd"] == "gece -q summary --out reports/summary.json"


def _perturb(obj, factor: float = 1.001):
    """Every float of ``obj`` scaled (a re-scored run: every value moves)."""
    if isinstance(obj, dict):
        return {k: _perturb(v, factor) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_perturb(v, factor) for v in obj]
    if isinstance(obj, float):
        return obj * factor
    return obj


def rescored(data: report_cells.ReportData, b: str, m: str) -> report_cells.ReportData:
    """``data`` as if model ``m`` had been re-scored on benchmark ``b``: every report that depends on that run
    moves (metrics, calibration, binning, neutral wording, special tokens, every comparison with m, whose
    significance flips)."""
    new = copy.deepcopy(data)
    key = (b, m)
    for store in (new.metrics, new.calibration, new.binning):
        if key in store:
            store[key] = _perturb(store[key])
    if m in new.neutral and b in new.neutral[m]:
        new.neutral[m][b] = _perturb(new.neutral[m][b])
    for with_, rep in new.special_tokens.items():
        side = "with" if with_ == m else "without" if new.special_pairs.get(with_) == m else None
        if side and b in rep:
            rep[b][side] = _perturb(rep[b][side])
    for pair in new.compare.get(b, {}).get("pairs", []):
        if m in (pair["a"], pair["b"]):
            for cell in pair["metrics"].values():
                cell.update(_perturb(cell))
                cell["significant_holm"] = not cell["significant_holm"]
    return new


# the worst cases of re-scoring one run: (benchmark, run) -> summary keys that move (docs/daily.md quotes them,
# tests/test_docs_claims.py checks): the referent protocol's run with a special-token variant (its headline with
# the skill numbers and their intervals, calibration, binning, the compare counts and the special-token change),
# then the variant itself
WORST = (("synthbias_referent", "gemma-3-270m"), 27)
NEXT_WORST = (("synthbias_referent", "gemma-3-270m-nobos"), 26)


def _rescored_counts(data: report_cells.ReportData) -> tuple[int, dict]:
    """(the number of summary values, {(b, m): how many of them move when run m is re-scored on b})."""
    before = flatten(findings.summary(data))
    counts = {}
    for b in data.benchmarks:
        for m in data.runs[b]:
            after = flatten(findings.summary(rescored(data, b, m)))
            assert set(after) == set(before)
            counts[(b, m)] = sum(after[k] != before[k] for k in before)
    return len(before), counts


def test_rescoring_one_run_moves_at_most_30_metrics(reports):
    """`dvc metrics diff` lists one row per flattened key that changed: re-scoring any one model on any one
    benchmark changes at most MAX_ROWS_PER_RUN keys of reports/summary.json, however much its values move."""
    data, which = reports
    n, counts = _rescored_counts(data)
    assert max(counts.values()) <= findings.MAX_ROWS_PER_RUN == 30
    if which == "reference":  # 18 runs: headline, calibration, binning, and the 4 compare counts of 6 runs
        assert 150 < n < 300 and len(counts) == 18
        assert counts[("winobias", "paper-gpt-j-6b")] == 5 + 2 + 2 + 4
        return
    assert 300 < n < 850  # all runs (522 values when written; 741 with SynthBias's three benchmarks)
    assert counts[WORST[0]] == max(counts.values()) == WORST[1]
    assert counts[NEXT_WORST[0]] == NEXT_WORST[1]
    # headline, calibration, binning, and 3 of the 4 compare counts (which ones move depends on the resamples)
    assert counts[("winobias", "paper-gpt-j-6b")] == 5 + 2 + 2 + 3


def test_summary_values_come_from_the_reports(shipped):
    s = findings.summary(shipped)
    rep = shipped.metrics[("winobias", "smollm2-135m")]
    assert s["runs"]["winobias"]["smollm2-135m"] == {k: rep[k] for k in findings.HEADLINE}
    cal = shipped.calibration[("winobias", "smollm2-135m")]["crossfit"]["methods"]
    assert s["calibration"]["winobias"]["smollm2-135m"]["best_ece_crossfit"] == min(
        x["metrics"]["ece"] for x in cal.values() if x["status"] == "ok"
    )
    st = shipped.special_tokens["gemma-3-270m"]["winobias"]
    assert s["special_tokens"]["gemma-3-270m"]["winobias"]["ece_change"] == st["without"]["ece"] - st["with"]["ece"]
    assert s == json.loads((ROOT / "reports" / "summary.json").read_text())  # the committed file is up to date


def test_the_committed_summary_holds_the_reference_runs_as_built_afresh(references):
    """On every clone: the reference runs' lines of the committed reports/summary.json (headline, calibration,
    binning, groups: one run's own numbers) equal those of their reports built afresh by the stage commands."""
    committed = json.loads((ROOT / "reports" / "summary.json").read_text())
    s = findings.summary(references)
    checked = 0
    for section in ("runs", "calibration", "binning", "groups"):
        for b, per_run in s[section].items():
            for m, line in per_run.items():
                assert committed[section][b][m] == line, (section, b, m)
                checked += 1
    assert checked == 4 * 18
    assert s["runs"]["winobias"]["paper-gpt-j-6b"]["ece"] == pytest.approx(0.15764973445164981, abs=1e-12)


# ------------------------------------------------------------------------ gece diff
def test_moved_hides_changes_within_the_tolerance():
    old = {"a": {"x": 0.1, "y": 0.2, "n": 5, "s": "k"}, "gone": 1.0}
    new = {"a": {"x": 0.1 + 1e-9, "y": 0.25, "n": 6, "s": "j"}, "added": 2.0}
    changes, hidden = diff.moved(old, new, 1e-6)
    assert hidden == 1
    assert [(c.key, c.old, c.new) for c in changes] == [
        ("a.y", 0.2, 0.25),
        ("a.n", 5, 6),
        ("a.s", "k", "j"),
        ("gone", 1.0, None),
        ("added", None, 2.0),
    ]
    assert changes[0].delta == pytest.approx(0.05) and changes[2].delta is None


def test_gece_diff_against_a_git_revision(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def git(*a):
        return subprocess.run(["git", *a], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "root")
    (tmp_path / "reports").mkdir()
    summary = {"runs": {"winobias": {"m": {"ece": 0.1, "brier": 0.2}}}}
    (tmp_path / "reports" / "summary.json").write_text(json.dumps(summary))
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    summary["runs"]["winobias"]["m"] = {"ece": 0.1 + 3e-8, "brier": 0.25}  # float noise and one real change
    (tmp_path / "reports" / "summary.json").write_text(json.dumps(summary))
    assert main(["diff"]) == 0  # the summary: one family moved, with its run
    text = " ".join(capsys.readouterr().out.split())  # the footer wraps at the terminal's width
    assert "runs · Brier" in text and "+0.05" in text and "runs · ECE-like" not in text
    assert "1 of 2 values moved; 0 added, removed or not a number (+N); 1 changed without moving" in text
    assert main(["diff", "--all"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "runs.winobias.m.brier" in text and "runs.winobias.m.ece" not in text
    assert "1 value moved (non-zero in dvc metrics diff) in 1 file; 1 other value changed without moving" in text
    assert main(["diff", "--tol", "0", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [c["key"] for c in got["changes"]] == ["runs.winobias.m.ece", "runs.winobias.m.brier"]
    assert got["moved"] == 2 and [f["name"] for f in got["families"]] == ["runs · ECE-like", "runs · Brier"]
    assert main(["diff", "--old", "HEAD~1", "--new", "HEAD", "--all"]) == 0
    assert "reports/summary.json" in capsys.readouterr().out  # the file was added in HEAD
    assert main(["diff", "--old", "no-such-rev"]) == 2


# --------------------------------------------------------------------------- findings
def test_findings_rank_the_models_with_their_intervals(reports):
    shipped, which = reports
    f = findings.findings(shipped)
    # the benchmarks whose labels vary are ranked by ECE, but a protocol's (its own numbers answer there, and rank
    # only runs with skill); those with y = 1 for every pair are identity findings
    scored = [b for b in shipped.benchmarks if any((b, m) in shipped.metrics for m in shipped.runs[b])]
    ranked = [b for b in scored if not identity.claims(shipped, b) and b not in claimed(shipped)]
    assert [b.benchmark for b in f.benchmarks] == ranked
    wb = f.benchmarks[0]
    eces = {m: shipped.metrics[("winobias", m)]["ece"] for m in shipped.runs["winobias"]}
    assert wb.best["ece"].model == min(eces, key=eces.get) and wb.worst["ece"].model == max(eces, key=eces.get)
    rep = shipped.metrics[("winobias", wb.best["ece"].model)]
    assert (wb.best["ece"].low, wb.best["ece"].high) == (rep["ece_ci_low"], rep["ece_ci_high"])
    line = findings.benchmark_sentence(wb)
    n_models = 6 if which == "reference" else 9
    assert line.startswith(f"winobias (771 pairs, {n_models} models): ECE best ")
    assert f"[{rep['ece_ci_low']:.3f}, " in line
    if which == "reference":  # no identity benchmark, no special-token variant: the rest needs every run
        assert f.identity == [] == identity.identity_benchmarks(shipped)
        return
    constant = ["crows_pairs", "winoqueer", "synthbias_type1"]  # y = 1 for every pair (SynthBias: type1's "he")
    assert [b.benchmark for b in f.identity] == constant == identity.identity_benchmarks(shipped)
    topics = [t for t, _ in f.effects]
    assert topics[:3] == ["the same run twice", "special tokens", "Brier ranking"]
    whole = "crows_pairs, crows_pairs_shared, winoqueer, winoqueer_shared"
    assert dict(f.effects)["the same run twice"].startswith(f"gemma-3-270m-nobos is gemma-3-270m on {whole} ")
    # counted once: 2 runs on the whole-sentence benchmarks; 3 on SynthBias type1 (target rule: the BOS changes p)
    assert [b.models for b in f.identity] == [2, 2, 3]
    special = dict(f.effects)["special tokens"]
    assert "gemma-3-270m has a higher ECE on 7 of 7 benchmarks" in special
    # the reason comes from the runs' extract metadata (artifacts/, present where the report stage runs)
    assert f"gemma-3-270m-nobos is gemma-3-270m on {whole}, the same score on every pair" in special


def test_kendall_tau():
    assert findings._kendall_tau(list("abc"), list("abc")) == 1.0
    assert findings._kendall_tau(list("abc"), list("cba")) == -1.0
    assert findings._kendall_tau(["a"], ["a"]) is None


def test_the_page_opens_with_the_findings(built_report):
    reports, _result = built_report
    text = (reports / "index.html").read_text(encoding="utf-8")
    assert text.index('id="findings"') < text.index('id="tables"') < text.index('id="diagrams"')
    assert 'class="text best"' in text  # the findings mark the best
    assert 'class="num best"' in report_text(reports)  # and so do the tables, on their pages
    page = parse_page(reports / "index.html")
    assert page.images
    assert text.count('loading="lazy"') == text.count("<img ") and 'width="' in text


def test_unchanged_figures_are_not_drawn_again(built_report, full_reports):
    reports, result = built_report
    params = load_params(full_reports / "params.yaml")
    again = report_stage.report_stage(
        params, reports, full_reports / "artifacts" / "scores", data_dvc=ROOT / "data.dvc", root=full_reports
    )
    assert again["figures"] == result["figures"] and sorted(again["reused"]) == sorted(
        f for f in result["figures"] if not f.startswith("figures/sample_size/")
    )
    stale = reports / "figures" / "reliability" / "winobias" / "gone.png"
    stale.write_bytes(b"\x89PNG\r\n\x1a\n")
    report_stage.report_stage(
        params, reports, full_reports / "artifacts" / "scores", data_dvc=ROOT / "data.dvc", root=full_reports
    )
    assert not stale.exists()  # a figure of a removed run is removed


# ------------------------------------------------------------------------------- CLI
def test_verdicts_in_words():
    cell = {
        "diff": -0.045,
        "ci_low": -0.07,
        "ci_high": -0.02,
        "p_value": 0.001,
        "significant": True,
        "significant_holm": True,
    }
    assert verdicts.verdict("A", "B", "ece", cell) == (
        "A is better calibrated than B on ECE by 0.045 [0.020, 0.070], p = 0.001, also after Holm's correction"
    )
    acc = dict(cell, diff=-0.03, p_value=0.0004, significant_holm=False)
    assert verdicts.verdict("A", "B", "accuracy", acc) == (
        "B agrees with the human judgements more often than A on "
        "human alignment by 0.030 [0.020, 0.070], p < 0.001, not "
        "after Holm's correction"
    )
    same = dict(cell, diff=0.01, ci_low=-0.02, ci_high=0.04, p_value=0.41, significant=False)
    assert verdicts.verdict("A", "B", "brier", same) == (
        "A and B do not differ significantly on Brier: A − B = +0.010 [-0.020, +0.040], p = 0.410"
    )


def test_compare_markdown_is_proofread(references):
    one = dict(references.compare["winobias"], pairs=references.compare["winobias"]["pairs"][:1])
    text = report_md.compare_markdown(one)
    assert "with 1 model pair and 4 differences in the table" in text and "p=" not in text
    assert ", p = " in text or ", p < 0.001" in text


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_help_describes_its_arguments_and_ends_with_examples(name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    sub = _subcommands()[name]
    for action in sub._actions:
        assert action.help, f"gece {name}: {action.dest} has no help text"
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "\nexamples:\n  " in text and text.rstrip().splitlines()[-1].strip().startswith(("gece ", "dvc "))
    assert "{params:" not in text


def test_help_shows_the_defaults_of_params_yaml(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit):
        main(["metrics", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 10 from params.yaml metrics.n_bins)" in text
    assert "(default: equal_width from params.yaml metrics.binning)" in text


# ------------------------------------------------------------------ dvc exp run -S
@pytest.mark.parametrize(
    "overrides, changed",
    [
        (["metrics.n_bins=15"], ["-  n_bins: 10", "+  n_bins: 15"]),
        (
            ["extract.limit=20"],
            [
                (
                    "-  limit:                # (empty: none) score only the first N pairs of each "
                    "benchmark (smoke runs)"
                ),
                (
                    "+  limit: 20             # (empty: none) score only the first N pairs of each "
                    "benchmark (smoke runs)"
                ),
            ],
        ),
        (["+registry.smollm2-135m.limit=50"], ["+    limit: 50"]),
    ],
)
def test_params_yaml_survives_dvc_exp_run_set_param(overrides, changed, tmp_path):
    """params.yaml is in the layout DVC writes back (`dvc exp run -S` calls dvc.utils.hydra.apply_overrides):
    an experiment changes only the lines it sets, comments and all; a no-op rewrite changes nothing."""
    import difflib

    from dvc.utils.hydra import apply_overrides

    original = (ROOT / "params.yaml").read_text()
    path = tmp_path / "params.yaml"
    path.write_text(original)
    apply_overrides(str(path), ["metrics.n_bins=10"])  # the same value: DVC rewrites the whole file
    assert path.read_text() == original
    apply_overrides(str(path), overrides)
    diff_lines = [
        x
        for x in difflib.unified_diff(original.splitlines(), path.read_text().splitlines(), lineterm="")
        if x[:1] in "+-" and not x.startswith(("+++", "---"))
    ]
    assert diff_lines == changed
    load_params(path)  # still valid


def _exp(rev, name, n_bins, ece, noise=0.0):
    return {
        "rev": rev,
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": {"metrics": {"n_bins": n_bins, "seed": 0}}}},
            "metrics": {
                "reports/summary.json": {"data": {"runs": {"winobias": {"m": {"ece": ece, "brier": 0.2 + noise}}}}}
            },
        },
    }


def test_exp_summary_keeps_what_differs():
    from gece.tools import experiments

    base = _exp("a" * 40, "main", 10, 0.10)
    base["experiments"] = [{"revs": [_exp("b" * 40, "tidy-dace", 15, 0.13, noise=1e-9)]}]
    rows = experiments.rows([_exp("workspace", None, 15, 0.13), base])
    assert [r.name for r in rows] == ["workspace", "main", "tidy-dace"]
    params, metrics, left = experiments.table(rows)
    assert params == ["metrics.n_bins"] and metrics == ["runs.winobias.m.ece"] and left == 0  # brier: noise
    assert experiments.table(rows, tol=0.0)[1] == ["runs.winobias.m.ece", "runs.winobias.m.brier"]
    assert experiments.table(rows, tol=0.0, max_metrics=1) == (["metrics.n_bins"], ["runs.winobias.m.ece"], 1)
    assert experiments.table(rows, keep="brier$")[1] == []


def test_findings_name_the_group_gaps_and_the_annotators():
    from gece.report.cells import ReportData

    def grouping(name, gap, p):
        return {
            "grouping": name,
            "protocol": "identity",
            "n": 100,
            "n_left_out": 0,
            "left_out": None,
            "groups": [{"group": "a", "n": 80, "n_distinct": 60}, {"group": "b", "n": 100}],
            "reason": None,
            "gap": {
                "gap": gap,
                "ci_low": gap / 2,
                "ci_high": gap * 2,
                "high": "a",
                "low": "b",
                "n_groups": 2,
                "reason": None,
                "p_perm": p,
            },
        }

    data = ReportData(benchmarks=["wq"], runs={"wq": ["m1", "m2"]})
    data.groups["wq"] = {
        "runs": {
            "m1": [grouping("bias_type", 0.2, 0.001), grouping("pred_gender", 0.5, 0.001)],
            "m2": [grouping("bias_type", 0.1, 0.3)],
        }
    }
    data.annotations["wq"] = {
        "alpha": {"binary": 0.12463, "nominal": 0.63394},
        "kappa": {"binary": 0.12452},
        "n_annotated": 1505,
        "n_annotators": 287,
    }
    effects = dict(findings.findings(data).effects)
    assert effects["gaps between groups"] == (
        "wq by bias_type: 1 of 2 runs with a gap at p < 0.05 (permutation); largest m1 0.200 [0.100, 0.400] in ECE, "
        "a (80 pairs, 60 distinct) vs b (100 pairs, 100 distinct)."
    )
    assert effects["annotators"].startswith(
        "wq: Krippendorff's α 0.12 on whether the writer's bias type is "
        "recognised (0.63 on the label itself), Fleiss' κ 0.12; 1505 pairs"
    )
    assert findings.summary(data)["groups"] == {
        "wq": {"m1": {"gap_identity": 0.2, "gap_soft": None}, "m2": {"gap_identity": 0.1, "gap_soft": None}}
    }


def test_what_does_not_apply_is_null_in_the_summary_never_0():
    """A metric no pair of runs has a test of (Gender-ECE where no side is gendered) counts null, not 0; a largest gap
    between groups of a grouping with one group large enough is null, not the 0 of one group against itself."""
    from gece.report.cells import ReportData

    def cell(p):
        return {"p_value": p, "significant_holm": p is not None and p < 0.01}

    data = ReportData(benchmarks=["sb"], runs={"sb": ["a", "b", "c"]})
    data.compare["sb"] = {
        "pairs": [
            {"a": x, "b": y, "metrics": {"ece": cell(p), "gender_ece": cell(None)}}
            for x, y, p in (("a", "b", 0.001), ("a", "c", 0.2), ("b", "c", 0.003))
        ]
    }
    one = {"gap": 0.0, "n_groups": 1, "high": "male", "low": "male", "reason": "one group: nothing to compare"}
    data.groups["sb"] = {
        "runs": {"a": [{"grouping": "pred_gender", "protocol": "identity", "groups": [{}, {}], "gap": one}]}
    }
    s = findings.summary(data)
    assert s["compare"]["sb"] == {"ece_significant": 2, "gender_ece_significant": None}
    assert s["groups"] == {"sb": {"a": {"gap_identity": None, "gap_soft": None}}}
    SummaryReport.model_validate(s)


# ------------------------------------------------------------------ issue 38: rough edges of the tables
def test_the_committed_tables_write_p_once():
    """The committed markdown tables themselves, not only what the code renders today."""
    tables = sorted((ROOT / "reports" / "tables").glob("*.md"))
    assert "gender_gap.md" in [t.name for t in tables]
    for path in tables:
        text = path.read_text(encoding="utf-8")
        assert "p=p" not in text and "p = p" not in text, path.name


def test_gender_gap_notes_write_p_once(references):
    from gece.report.stat_tables import gender_gap_table

    text = report_md.doc_markdown(gender_gap_table(references))
    assert "p=p" not in text and "p = p" not in text
    assert re.search(r"\] p (=|<) 0\.\d{3}, Holm p (=|<) 0\.\d{3}, perm\. p (=|<) 0\.\d{3}", text)


def test_the_compare_tables_share_one_label_per_metric(references, monkeypatch):
    """reports/compare/<b>.md, reports/tables/compare.md and `gece compare`'s terminal table label each metric
    as the registry does."""
    from rich.console import Console

    from gece.catalog import metric_defs
    from gece.cmd import command
    from gece.pipeline import compare as compare_stage
    from gece.report.compare_tables import compare_table

    result = references.compare["winobias"]
    keys = list(result["pairs"][0]["metrics"])
    labels = [metric_defs.label(k) for k in keys]
    header = report_md.compare_markdown(result).split("\n| A | B | ")[1].split("\n")[0]
    assert header == " | ".join(["pairs", *labels]) + " |"
    doc = compare_table(references)
    pairs = next(t for t in doc.tables if t.label_columns == ["A", "B"])  # after the matrices, the pair list
    assert [c.label for c in pairs.columns] == ["pairs", *(f"Δ {x}" for x in labels)]
    console = Console(width=400, record=True, soft_wrap=True, emoji=False, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(command, "out", console)
    compare_stage._print_compare(result)
    text = console.export_text()
    assert all(f"Δ {x}" in text for x in labels)


def test_gece_compare_never_cuts_a_run_id_at_80_columns(references, monkeypatch):
    """Issue 38, item 4: the terminal table keeps a long run id whole (here: a key and a legend) instead of
    "gemma-3-2…"."""
    from rich.console import Console

    from gece.cmd import command
    from gece.pipeline import compare as compare_stage

    long_id = "paper-deepseek-r1-distill-llama-8b-instruct"
    result = copy.deepcopy(references.compare["winobias"])
    result["pairs"] = result["pairs"][:2]
    result["pairs"][0]["a"] = long_id
    console = Console(width=80, record=True, soft_wrap=False, emoji=False, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(command, "out", console)
    compare_stage._print_compare(result)
    text = console.export_text()
    assert "…" not in text
    for run in (long_id, result["pairs"][1]["a"]):  # whole, on one line: in its row or in the table's legend
        assert any(run in line for line in text.splitlines()), run
    legend = [line for line in text.splitlines() if line.startswith("#")]
    assert f"#1 {long_id}" in legend  # too long for 80 columns beside the differences: a key and a legend
