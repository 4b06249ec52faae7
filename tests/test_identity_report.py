"""Identity benchmarks (y = 1 for every pair) in the summary, the tables, the page and the findings: honest names,
both scoring rules side by side, the first-word split, and the gaps the findings refuse to headline (issue 36)."""

from __future__ import annotations

import numpy as np
import pytest

from gece.io.paths import report_layout
from gece.io.schemas.summary_report import SummaryReport
from gece.report import findings, gaps, group_tables, identity
from gece.report import html as report_html
from gece.report import markdown as report_md
from gece.report import tables as report_tables
from gece.report.cells import ReportData, resolve
from gece.stats import metrics

N = 400
MODELS = ("m1", "m2")


def _run(p: np.ndarray, y: np.ndarray, seed: int) -> tuple[dict, list[dict]]:
    """The metrics report and the reliability bins of one run, from the real metric functions."""
    rng = np.random.default_rng(seed)
    gm = np.where(rng.random(len(p)) < 0.5, "male", "female")
    gl = np.where(gm == "male", "female", "male")
    rep = metrics.summarize(p, y, gm, gl, draws=200, seed=0)
    return rep, metrics.reliability_table(p, y).records()


def _scores(seed: int, shift: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.beta(2, 2, N) + shift, 0.001, 0.999)


@pytest.fixture(scope="module")
def data() -> tuple[ReportData, dict]:
    """A benchmark cp with y = 1 for every pair under rules sentence and shared (variant cp_shared), and a benchmark
    wb whose labels vary; m1 prefers the stereotype under both rules, m2 only under sentence."""
    d = ReportData(
        benchmarks=["wb", "cp", "cp_shared"],
        runs={b: list(MODELS) for b in ("wb", "cp", "cp_shared")},
        rules={"wb": "target", "cp": "sentence", "cp_shared": "shared"},
        variants={"cp": ["cp_shared"]},
    )
    ones = np.ones(N)
    p = {
        ("cp", "m1"): _scores(1, 0.15),
        ("cp_shared", "m1"): _scores(2, 0.10),
        ("cp", "m2"): _scores(3, 0.08),
        ("cp_shared", "m2"): _scores(4, -0.12),
    }
    for i, ((b, m), q) in enumerate(p.items()):
        d.metrics[(b, m)], d.bins[(b, m)] = _run(q, ones, i)
    for i, m in enumerate(MODELS):
        q = _scores(10 + i, 0.0)
        y = (np.random.default_rng(20 + i).random(N) < q).astype(float)
        d.metrics[("wb", m)], d.bins[("wb", m)] = _run(q, y, 30 + i)
    # counts and standard errors from the metrics stage (clusters): present for m1, absent for m2 (older reports)
    d.metrics[("cp", "m1")].update(
        n_distinct=350, n_clusters=40, pct_stereotype_se_clustered=0.05, pct_stereotype_se_rows=0.02
    )
    return d, p


# ------------------------------------------------------------------------ constant y
def test_constant_y_is_read_from_the_bins():
    assert identity.constant_label([{"count": 3, "accuracy": 1.0}, {"count": 0, "accuracy": None}]) == 1
    assert identity.constant_label([{"count": 3, "accuracy": 0.0}]) == 0
    assert identity.constant_label([{"count": 3, "accuracy": 1.0}, {"count": 2, "accuracy": 0.5}]) is None
    assert identity.constant_label([{"count": 3, "accuracy": 1.0}, {"count": 2, "accuracy": 0.0}]) is None
    assert identity.constant_label(None) is None and identity.constant_label([]) is None


def test_which_benchmarks_have_constant_y(data):
    d, _ = data
    assert [b for b in d.benchmarks if identity.claims(d, b)] == ["cp", "cp_shared"]
    assert identity.identity_benchmarks(d) == ["cp"]  # cp_shared is a variant of cp


# ------------------------------------------------------------------------- summary
def test_summary_uses_the_honest_names_with_their_values(data):
    d, p = data
    s = findings.summary(d)
    SummaryReport.model_validate(s)
    assert list(s["runs"]["cp"]["m1"]) == [
        "n",
        "n_distinct",
        "n_clusters",
        "stereotype_share",
        "shortfall",
        "shortfall_gender",
        "brier",
    ]
    assert list(s["runs"]["cp"]["m2"]) == ["n", "stereotype_share", "shortfall", "shortfall_gender", "brier"]
    assert list(s["runs"]["wb"]["m1"]) == list(findings.HEADLINE)  # labels vary: the calibration names stay
    for b, m in p:
        q, row = p[(b, m)], s["runs"][b][m]
        assert row["shortfall"] == pytest.approx(1 - q.mean(), abs=1e-12)
        assert row["shortfall"] == pytest.approx(metrics.ece(q, np.ones(N)), abs=1e-12)
        assert row["stereotype_share"] == np.mean(q > 0.5)
        # Gender-ECE under y = 1: the unweighted mean of 1 − mean p over the pairs predicted male and female
        gm = np.where(np.random.default_rng(list(p).index((b, m))).random(N) < 0.5, "male", "female")
        pred_male = np.where(q > 0.5, gm == "male", gm == "female")
        expected = 0.5 * ((1 - q[pred_male].mean()) + (1 - q[~pred_male].mean()))
        assert row["shortfall_gender"] == pytest.approx(expected, abs=1e-12)
    assert s["runs"]["cp"]["m1"]["n_distinct"] == 350 and s["runs"]["cp"]["m1"]["n_clusters"] == 40


def test_summary_rules_section_is_the_difference_of_the_rules(data):
    d, p = data
    rules = findings.summary(d)["rules"]
    assert list(rules) == ["cp"] and list(rules["cp"]) == list(MODELS)
    for m in MODELS:
        r = rules["cp"][m]
        a, b = p[("cp", m)], p[("cp_shared", m)]
        assert r["stereotype_share_sentence"] == np.mean(a > 0.5) and r["stereotype_share_shared"] == np.mean(b > 0.5)
        assert r["stereotype_share_shared_minus_sentence"] == pytest.approx(np.mean(b > 0.5) - np.mean(a > 0.5))
        assert r["shortfall_shared_minus_sentence"] == pytest.approx(a.mean() - b.mean(), abs=1e-12)
        assert set(r) == {
            f"{k}_{rule}" for k in ("stereotype_share", "shortfall") for rule in ("sentence", "shared")
        } | {"stereotype_share_shared_minus_sentence", "shortfall_shared_minus_sentence"}


# ------------------------------------------------------------------------ findings
def test_findings_say_whether_the_share_holds_under_both_rules(data):
    d, p = data
    f = findings.findings(d)
    assert [b.benchmark for b in f.benchmarks] == ["wb"] and [b.benchmark for b in f.identity] == ["cp"]
    cp = f.identity[0]
    assert cp.n_distinct == [350] and cp.n_clusters == [40]
    share_shared_m2 = np.mean(p[("cp_shared", "m2")] > 0.5)
    assert np.mean(p[("cp", "m1")] > 0.5) > 0.5 and np.mean(p[("cp_shared", "m1")] > 0.5) > 0.5
    assert np.mean(p[("cp", "m2")] > 0.5) > 0.5 > share_shared_m2

    def side(b: str, m: str) -> str:  # by the cluster-resampled interval, as the page decides it
        rep = d.metrics[(b, m)]
        lo, hi = rep["pct_stereotype_ci_low"], rep["pct_stereotype_ci_high"]
        return "above 0.5" if lo > 0.5 else "below 0.5" if hi < 0.5 else "not distinguishable from 0.5"

    def shown(b: str, m: str) -> str:
        rep = d.metrics[(b, m)]
        return f"{rep['pct_stereotype']:.3f} [{rep['pct_stereotype_ci_low']:.3f}, {rep['pct_stereotype_ci_high']:.3f}]"

    assert side("cp", "m1") == side("cp_shared", "m1") == side("cp", "m2") == "above 0.5"
    assert side("cp_shared", "m2") != "above 0.5"
    assert cp.rules == (
        "holds under both rules (sentence, shared) for m1: above 0.5; differs between the rules for m2 (above 0.5 "
        f"under sentence, {shown('cp', 'm2')}; shared {shown('cp_shared', 'm2')}, {side('cp_shared', 'm2')})"
    )
    line = findings.identity_sentence(cp)
    assert line.startswith("cp (400 pairs, 350 distinct, 40 clusters, 2 models; y = 1 for every pair): ")
    assert "stereotype share (p > 0.5) " in line and "1 − mean p (the paper's identity ECE) " in line
    assert "ECE best" not in line


def _grouping(groups: list[tuple[str, int, int, float]], gap: float, lo: float, hi: float) -> dict:
    """An identity-protocol grouping result: groups (name, n, n_distinct, 1 − mean p); the gap between the first
    two."""
    return {
        "grouping": "bias_type",
        "protocol": "identity",
        "n": sum(g[1] for g in groups),
        "n_left_out": 0,
        "left_out": None,
        "groups": [
            {"group": g, "n": n, "n_distinct": k, "ece": e, "ci_low": e / 2, "ci_high": e, "reason": None}
            for g, n, k, e in groups
        ],
        "reason": None,
        "gap": {
            "gap": gap,
            "ci_low": lo,
            "ci_high": hi,
            "high": groups[0][0],
            "low": groups[1][0],
            "n_groups": len(groups),
            "reason": None,
            "p_perm": 0.001,
        },
    }


def _groups(runs: dict) -> dict:
    return {
        "benchmark": "cp",
        "n_bins": 10,
        "binning": "equal_width",
        "draws": 100,
        "seed": 0,
        "level": 0.95,
        "min_size": 10,
        "runs": runs,
    }


def test_gaps_below_the_thresholds_are_not_findings(data):
    d, _ = data
    assert (gaps.GAP_MIN_DISTINCT, gaps.GAP_MAX_WIDTH) == (50, 0.3)
    small = _grouping([("a", 200, 40, 0.6), ("b", 300, 300, 0.3)], 0.5, 0.3, 0.5)  # 40 distinct < 50
    wide = _grouping([("a", 200, 200, 0.6), ("b", 300, 300, 0.3)], 0.4, 0.1, 0.45)  # 0.35 wide > 0.3
    kept = _grouping([("a", 120, 60, 0.5), ("b", 300, 290, 0.3)], 0.2, 0.1, 0.4)  # 60 distinct; 0.3 wide: kept
    assert gaps.gap_refusal(small) == "its smaller group has 40 distinct pairs (fewer than 50)"
    assert gaps.gap_refusal(wide) == "its interval is 0.35 wide (wider than 0.3)"
    assert gaps.gap_refusal(kept) is None
    older = _grouping([("a", 120, 0, 0.5), ("b", 300, 0, 0.3)], 0.2, 0.1, 0.4)
    for g in older["groups"]:
        del g["n_distinct"]  # a report without distinct counts: the pairs count instead
    assert gaps.gap_refusal(older) is None

    d2 = ReportData(**{**d.__dict__, "groups": {}})
    d2.groups = {
        "cp": _groups({"m1": [small], "m2": [kept], "m3": [wide]}),
        "cp_shared": _groups({"m2": [_grouping([("a", 120, 60, 0.35), ("b", 300, 290, 0.4)], 0.05, 0.0, 0.1)]}),
    }
    d2.runs = {**d.runs, "cp": [*MODELS, "m3"]}
    effect = dict(findings.findings(d2).effects)["gaps between groups"]
    assert effect == (
        "cp by bias_type: 3 of 3 runs with a gap at p < 0.05 (permutation); largest m2 0.200 [0.100, 0.400] in "
        "1 − mean p, a (120 pairs, 60 distinct) vs b (300 pairs, 290 distinct); only under sentence (a − b under "
        "shared: -0.050); 2 of the gaps not a finding (small group or wide interval, marked † in the groups table)."
    )
    # the groups table still shows them, marked, and labels the cells as what they are
    doc = group_tables.groups_doc(d2.groups, {"cp", "cp_shared"})
    table = doc.tables[0]
    assert table.heading == "cp: identity protocol, by bias_type: 1 − mean p per group, not calibration"
    gap_row = table.rows[-1]
    assert [c.mark for c in gap_row.cells] == ["†", "", "†"]
    assert gaps.GAP_MARK_NOTE in table.note and "1 − mean p of the group" in table.note


def test_a_gap_that_keeps_its_sign_holds_under_both_rules(data):
    d, _ = data
    kept = _grouping([("a", 120, 60, 0.5), ("b", 300, 290, 0.3)], 0.2, 0.1, 0.4)
    d2 = ReportData(**{**d.__dict__, "groups": {}})
    d2.groups = {
        "cp": _groups({"m1": [kept]}),
        "cp_shared": _groups({"m1": [_grouping([("a", 120, 60, 0.45), ("b", 300, 290, 0.4)], 0.05, 0.0, 0.1)]}),
    }
    effect = dict(findings.findings(d2).effects)["gaps between groups"]
    assert effect.endswith("; holds under both rules (a − b under shared: +0.050).")


# --------------------------------------------------------------------- tables, page
def _first_diff(b: str, m: str, initial: tuple, later: tuple) -> dict:
    def group(name, n, k, e, share):
        return {
            "group": name,
            "n": n,
            "n_distinct": k,
            "ece": e,
            "ci_low": e - 0.05,
            "ci_high": e + 0.05,
            "reason": None,
            "pct_stereotype": share,
            "pct_stereotype_ci_low": share - 0.05,
            "pct_stereotype_ci_high": share + 0.05,
        }

    r = _grouping([("initial", *initial[:3]), ("later", *later[:3])], 0.1, 0.0, 0.2)
    r["grouping"] = "first_diff"
    r["groups"] = [group("initial", *initial), group("later", *later)]
    return r


def test_identity_tables_and_page(data, tmp_path):
    d, p = data
    d3 = ReportData(**{**d.__dict__, "groups": {}})
    d3.groups = {
        "cp": _groups({"m1": [_first_diff("cp", "m1", (150, 140, 0.30, 0.70), (250, 200, 0.45, 0.55))]}),
        "cp_shared": _groups({"m1": [_first_diff("cp_shared", "m1", (150, 140, 0.48, 0.51), (250, 200, 0.44, 0.56))]}),
    }
    docs = {doc.name: doc for doc in report_tables.build_tables(d3)}
    ident = docs["identity"]
    rules, first_word = ident.tables
    assert [r.label for r in rules.rows] == [["m1", "sentence"], ["m1", "shared"], ["m2", "sentence"], ["m2", "shared"]]
    cols = [c.key for c in rules.columns]
    ratio = rules.rows[0].cells[cols.index("se_ratio")].value
    assert ratio == pytest.approx(2.5)  # 0.05 / 0.02: the clustered interval is 2.5 times as wide
    diff = rules.rows[1].cells[cols.index("diff")].value
    assert diff == pytest.approx(np.mean(p[("cp_shared", "m1")] > 0.5) - np.mean(p[("cp", "m1")] > 0.5))
    assert rules.rows[3].cells[cols.index("side")].value == "below 0.5"
    assert rules.rows[2].cells[cols.index("n_distinct")].value is None  # absent in m2's report: shown as –
    # every cell with a pointer shows the value at that pointer of its row's file
    sources = {report_layout.metrics_file(b, m): d3.metrics[(b, m)] for b, m in d3.metrics}
    sources |= {report_layout.groups_file(b): rep for b, rep in d3.groups.items()}
    checked = 0
    for table in (rules, first_word):
        for row in table.rows:
            for cell in row.cells:
                for attr, pointer in cell.ref.items():
                    assert getattr(cell, attr) == resolve(sources[row.source], pointer)
                    checked += 1
    assert checked > 30
    assert [r.label for r in first_word.rows] == [["m1", "sentence"], ["m1", "shared"]]
    fw_cols = [c.key for c in first_word.columns]
    assert first_word.rows[0].cells[fw_cols.index("initial_share")].value == 0.70
    assert first_word.rows[1].cells[fw_cols.index("later_shortfall")].value == 0.44
    # the overall table calls the constant-y benchmark's numbers by their names and ranks nothing there
    overall = {t.heading.split(" ")[0]: t for t in docs["overall"].tables}
    assert [c.label for c in overall["cp"].columns][:3] == [
        "pairs",
        "stereotype share (p > 0.5)",
        "1 − mean p (the paper's identity ECE)",
    ]
    assert all(c.worst is None for c in overall["cp"].columns)
    assert "ECE" in [c.label for c in overall["wb"].columns]
    assert not any(t.heading.startswith("cp") for t in docs["grouped"].tables)
    page = report_html.render_html(d3, list(docs.values()), {})
    assert 'class="findings identity"' in page and "holds under both rules (sentence, shared) for m1" in page
    md = report_md.doc_markdown(ident)
    assert "how much of it is the first word" in md and "| m1 | shared |" in md


def test_first_word_table_without_the_grouping_says_so(data):
    d, _ = data
    table = identity.first_word_table(d, "cp")
    assert table.rows[0].cells[0].value.startswith("no groups report of cp, cp_shared has the grouping first_diff")
