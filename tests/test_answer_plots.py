"""The first-screen figures (issue 51): the compact letter display on constructed cases, the points and their CSV
against the metrics JSON, the drawn SVG positions against the CSV, the palette under colour-blindness simulations,
determinism and the page's size budget."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from gece.catalog import metric_defs
from gece.io.paths import report_layout
from gece.report import answer_plots, compare_tables, forest
from gece.report.cells import ReportData, resolve
from gece.report.first_screen import PAGE_BUDGET, calibration_finding, headlines, rules_finding
from gece.stats.intervals import holm
from gece.stats.letters import compact_letters

from .conftest import ROOT


# ------------------------------------------------------------------------ compact letter display
def _differ(k: int, pairs: list[tuple[int, int]]) -> np.ndarray:
    d = np.zeros((k, k), dtype=bool)
    for i, j in pairs:
        d[i, j] = d[j, i] = True
    return d


def test_compact_letters_of_constructed_cases():
    assert compact_letters(_differ(4, [(0, 2), (0, 3), (1, 3)])) == ["a", "ab", "bc", "c"]
    assert compact_letters(_differ(3, [])) == ["a", "a", "a"]  # nothing differs: one group
    assert compact_letters(_differ(3, [(0, 1), (0, 2), (1, 2)])) == ["a", "b", "c"]  # all differ
    # only the ends differ: the middle is tied with both (Piepho 2004, the insert-absorb example's shape)
    assert compact_letters(_differ(4, [(0, 3)])) == ["a", "ab", "ab", "b"]


@pytest.mark.parametrize("seed", range(40))
def test_two_items_share_a_letter_exactly_when_they_do_not_differ(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 9))
    upper = np.triu(rng.random((k, k)) < rng.random(), 1)
    differ = upper | upper.T
    letters = compact_letters(differ)
    share = np.array([[bool(set(a) & set(b)) for b in letters] for a in letters])
    assert np.array_equal(share, ~differ)
    assert letters[0].startswith("a")


# ------------------------------------------------------------------------ points
def _cell(significant: bool) -> dict:
    """A compared metric whose p-value survives Holm over the 6 pairs of 4 runs (6 × 0.001) or not (0.5), and Holm
    over the metrics of the pair (``significant_holm``, which the comparison matrix reads) alike."""
    return {"p_value": 0.001 if significant else 0.5, "significant_holm": significant}


def _data() -> ReportData:
    """Four runs: a and b scored, r and r2 released; only a and r2 differ in ECE after Holm over the panel's 6 pairs,
    every pair but a–b in Gender-ECE."""
    data = ReportData(benchmarks=["wb"], runs={"wb": ["r2", "b", "a", "r"]}, references={"r", "r2"})
    for m, ece in (("a", 0.05), ("b", 0.10), ("r", 0.20), ("r2", 0.21)):
        data.metrics[("wb", m)] = {
            "ece": ece,
            "ece_ci_low": ece - 0.02,
            "ece_ci_high": ece + 0.03,
            "gender_ece": ece * 2,
            "gender_ece_ci_low": ece,
            "gender_ece_ci_high": ece * 3,
        }
    names = ["a", "b", "r", "r2"]
    data.compare["wb"] = {
        "alpha": 0.05,
        "pairs": [
            {
                "a": x,
                "b": y,
                "metrics": {"ece": _cell((x, y) == ("a", "r2")), "gender_ece": _cell((x, y) != ("a", "b"))},
            }
            for i, x in enumerate(names)
            for y in names[i + 1 :]
        ],
    }
    return data


def test_the_letters_control_over_every_pair_of_the_panel():
    """Holm over the 6 pairs of 4 runs, by hand: p = 0.001, 0.01, 0.02, 0.3, 0.4, 0.5 adjust to 0.006, 0.05, 0.08, ...:
    only the first pair differs at 0.05, though three are below 0.05 alone (and the compare report's own Holm, over
    the metrics of one pair, may call them significant); a run scored twice is not in the family."""
    data = _data()
    ps = {("a", "b"): 0.001, ("a", "r"): 0.01, ("a", "r2"): 0.02, ("b", "r"): 0.3, ("b", "r2"): 0.4, ("r", "r2"): 0.5}
    for pair in data.compare["wb"]["pairs"]:
        pair["metrics"]["ece"] = {"p_value": ps[(pair["a"], pair["b"])], "significant_holm": True}
    assert holm(list(ps.values())) == pytest.approx([0.006, 0.05, 0.08, 0.9, 0.9, 0.9])
    differ = forest.differ_matrix(data, "wb", ["a", "b", "r", "r2"], "ece")
    assert [(i, j) for i in range(4) for j in range(i + 1, 4) if differ[i, j]] == [(0, 1)]
    # b–r2 as one run scored twice: out of the family, 5 pairs: 0.005, 0.04, 0.06, ...: a–r differs too
    data.compare["wb"]["pairs"][4]["identical"] = True
    differ = forest.differ_matrix(data, "wb", ["a", "b", "r", "r2"], "ece")
    assert [(i, j) for i in range(4) for j in range(i + 1, 4) if differ[i, j]] == [(0, 1), (0, 2)]


def test_calibration_points_are_sorted_with_holm_letters_and_released_marked():
    points = forest.calibration_points(_data(), "wb")
    ece = [p for p in points if p.panel == "ece"]
    assert [(p.model, p.letters, p.released) for p in ece] == [
        ("a", "a", False),
        ("b", "ab", False),
        ("r", "ab", True),
        ("r2", "b", True),
    ]
    assert (ece[1].value, ece[1].low, ece[1].high) == (0.10, 0.10 - 0.02, 0.10 + 0.03)
    gece = [p for p in points if p.panel == "gender_ece"]
    assert [p.letters for p in gece] == ["a", "a", "b", "c"]
    assert calibration_finding("wb", points) == (
        "wb: lowest ECE a 0.050 [0.030, 0.080], not distinguishable after Holm from b, r; lowest Gender-ECE a "
        "0.100 [0.050, 0.150], not distinguishable after Holm from b."
    )


def _gap_data() -> ReportData:
    """:func:`_data` with gender gaps: by predicted gender a (−0.30, Holm interval [−0.40, −0.20]: away from 0) and
    r (0.05 [−0.02, 0.12]); by human gender every run 0.10 [0.01, 0.19], b's undefined (no interval either)."""
    data = _data()
    for m in ("a", "b", "r", "r2"):
        data.metrics[("wb", m)] |= {"gap_true": 0.10, "gap_true_ci_low_holm": 0.01, "gap_true_ci_high_holm": 0.19}
    data.metrics[("wb", "b")] |= {"gap_true": None, "gap_true_ci_low_holm": None, "gap_true_ci_high_holm": None}
    data.metrics[("wb", "a")] |= {"gap_pred": -0.30, "gap_pred_ci_low_holm": -0.40, "gap_pred_ci_high_holm": -0.20}
    data.metrics[("wb", "r")] |= {"gap_pred": 0.05, "gap_pred_ci_low_holm": -0.02, "gap_pred_ci_high_holm": 0.12}
    return data


def test_the_gender_gaps_are_drawn_with_their_holm_intervals_beside_the_letters():
    data = _gap_data()
    points = forest.calibration_points(data, "wb")
    gaps = [(p.panel, p.model, p.value, p.low, p.high, p.letters, p.ci_suffix) for p in points if p.panel[:3] == "gap"]
    assert gaps == [  # in the ECE order of the runs; no letters; the interval at Holm's level
        ("gap_pred", "a", -0.30, -0.40, -0.20, "", "_holm"),
        ("gap_pred", "r", 0.05, -0.02, 0.12, "", "_holm"),
        ("gap_true", "a", 0.10, 0.01, 0.19, "", "_holm"),
        ("gap_true", "r", 0.10, 0.01, 0.19, "", "_holm"),
        ("gap_true", "r2", 0.10, 0.01, 0.19, "", "_holm"),
    ]
    rows = list(csv.DictReader(io.StringIO(forest.points_csv(points))))
    reports = {report_layout.metrics_file("wb", m): data.metrics[("wb", m)] for m in ("a", "b", "r", "r2")}
    assert check_rows(rows, reports.__getitem__) == len(rows)
    groupings = forest.gap_titles(data, "wb")
    svg = answer_plots.calibration_svg("calibration_wb", "wb", points, groupings=groupings)
    assert check_svg_against_csv(svg, "calibration_wb", rows) == 3 * len(rows)
    assert "by predicted gender" in svg and "by human gender" in svg
    assert calibration_finding("wb", points, groupings).endswith(
        "; ECE female − male by predicted gender away from 0 after Holm in 1 of 2 runs (a -0.300); ECE female − male "
        "by human gender away from 0 after Holm in 3 of 3 runs (a +0.100, r +0.100, r2 +0.100)."
    )
    data.synthbias["wb"] = "type2"  # its y is the labour-statistics majority: the panel says so
    assert forest.gap_titles(data, "wb")["gap_true"] == "labour-statistics majority gender"


def test_the_svg_is_compact_and_draws_the_same():
    """Every style a class defined once in the SVG's style sheet, no clip paths, no xlink, no font repeated: the
    drawn positions are those of the CSV all the same."""
    points = forest.calibration_points(_gap_data(), "wb")
    svg = answer_plots.calibration_svg("calibration_wb", "wb", points)
    assert not re.search(r' style="|clip-path|xlink|font-family|<g>\n<g>', svg)
    classes = set(re.findall(r' class="(s[0-9a-f]{6})"', svg))
    assert classes and all(svg.count(f".{c}{{") == 1 for c in classes)
    assert answer_plots.compact(svg) == svg  # nothing left to shorten


# per rule variant its first-word parts: (group, stereotype share, interval); "later" of cp_shared has none (a groups
# report from before the intervals, or a part under groups.min_size)
PARTS = {
    "cp": [("initial", 0.8, 0.75, 0.85), ("later", 0.6, 0.55, 0.65)],
    "cp_shared": [("initial", 0.55, 0.45, 0.65), ("later", 0.35, None, None)],
}


def _rules_data() -> ReportData:
    data = ReportData(
        benchmarks=["cp", "cp_shared"],
        runs={"cp": ["m"], "cp_shared": ["m"]},
        rules={"cp": "sentence", "cp_shared": "shared"},
        variants={"cp": ["cp_shared"]},
    )
    for b, share in (("cp", 0.7), ("cp_shared", 0.45)):
        data.metrics[(b, "m")] = {
            "pct_stereotype": share,
            "pct_stereotype_ci_low": share - 0.1,
            "pct_stereotype_ci_high": share + 0.1,
        }
        groups = [
            {"group": g, "pct_stereotype": x}
            | ({"pct_stereotype_ci_low": lo, "pct_stereotype_ci_high": hi} if lo else {})
            for g, x, lo, hi in PARTS[b]
        ]
        data.groups[b] = {
            "runs": {
                "m": [
                    {"grouping": "bias_type", "protocol": "identity", "groups": []},
                    {"grouping": "first_diff", "protocol": "identity", "groups": groups},
                ]
            }
        }
    return data


def test_rule_points_hold_each_rule_and_each_first_word_part():
    points = forest.rule_points(_rules_data(), "cp")
    assert [(p.benchmark, p.panel, p.rule, p.value, p.low, p.high) for p in points[1:3]] == [
        ("cp", "initial", "sentence", 0.8, 0.75, 0.85),
        ("cp", "later", "sentence", 0.6, 0.55, 0.65),
    ]
    assert [(p.benchmark, p.panel, p.rule, round(p.value, 3), p.low is None) for p in points] == [
        ("cp", "all", "sentence", 0.7, False),
        ("cp", "initial", "sentence", 0.8, False),
        ("cp", "later", "sentence", 0.6, False),
        ("cp_shared", "all", "shared", 0.45, False),
        ("cp_shared", "initial", "shared", 0.55, False),
        ("cp_shared", "later", "shared", 0.35, True),
    ]
    assert points[1].pointer == "/runs/m/1/groups/0/pct_stereotype"


def test_the_rule_figure_draws_the_first_word_intervals_of_its_csv():
    """The dumbbell of a constructed case: every CSV value and interval end is the one at its pointer (the groups
    report's ``pct_stereotype_ci_low`` / ``_high`` for the first-word parts), every drawn position is the CSV's."""
    data = _rules_data()
    points = forest.rule_points(data, "cp")
    rows = list(csv.DictReader(io.StringIO(forest.points_csv(points))))
    reports = {report_layout.groups_file(b): data.groups[b] for b in ("cp", "cp_shared")}
    reports |= {report_layout.metrics_file(b, "m"): data.metrics[(b, "m")] for b in ("cp", "cp_shared")}
    assert check_rows(rows, reports.__getitem__) == 5  # every interval but cp_shared's later part
    svg = answer_plots.rules_svg("rules_cp", "cp", points)
    assert check_svg_against_csv(svg, "rules_cp", rows) == 6 + 2 * 5
    assert answer_plots.svg_id("rules_cp", "later", 5, "ci") not in svg  # no interval, none drawn
    assert rules_finding(data, "cp", points) == (
        "cp: under the sentence rule the stereotype share is above 0.5 for 1 of 1 runs (first word differs: above "
        "0.5 for 1 of 1 runs; start alike: above 0.5 for 1 of 1 runs); under the shared rule the stereotype share "
        "is not distinguishable from 0.5 for 1 of 1 runs (first word differs: not distinguishable from 0.5 for 1 "
        "of 1 runs; start alike: below 0.5 for 1 of 1 runs)."
    )


# ------------------------------------------------------------------------ the SVG
def test_svg_is_deterministic_inline_and_without_scripts_or_dates():
    points = forest.calibration_points(_data(), "wb")
    one, two = (answer_plots.calibration_svg("calibration_wb", "wb", points) for _ in range(2))
    assert one == two and one.startswith("<svg") and one.rstrip().endswith("</svg>")
    assert not re.search(r"<script|dc:date|<\?xml|href=\"http", one)
    rules = answer_plots.rules_svg("rules_cp", "cp", forest.rule_points(_rules_data(), "cp"))
    # the ids of one figure never collide with another's (hash salted by the figure's name)
    ids = lambda s: set(re.findall(r' id="([^"]+)"', s))  # noqa: E731
    assert not ids(one) & ids(rules)


def drawn(svg: str, name: str, panel: str, row: int) -> tuple[float, float | None, float | None]:
    """The x of a plotted value's marker and of its interval's ends, read back from the SVG."""
    point = re.search(
        rf'<g id="{re.escape(answer_plots.svg_id(name, panel, row, "point"))}">.*?<use [^>]*x="([-\d.]+)"', svg, re.S
    )
    ci = re.search(
        rf'<g id="{re.escape(answer_plots.svg_id(name, panel, row, "ci"))}">\s*<path d="M ([-\d.]+) '
        r"[-\d.]+ L ([-\d.]+) ",
        svg,
        re.S,
    )
    assert point, (name, panel, row)
    return float(point.group(1)), *((float(ci.group(1)), float(ci.group(2))) if ci else (None, None))


def check_svg_against_csv(svg: str, name: str, rows: list[dict]) -> int:
    """Per panel, the drawn x positions are one linear map of the CSV's values (to 1/50 of a point). Returns the
    number of values checked."""
    checked = 0
    for panel in dict.fromkeys(r["panel"] for r in rows):
        values, xs = [], []
        for i, r in enumerate(rows):
            if r["panel"] != panel:
                continue
            x, lo, hi = drawn(svg, name, panel, i)
            values.append(float(r["value"])), xs.append(x)
            if r["ci_low"]:
                values += [float(r["ci_low"]), float(r["ci_high"])]
                xs += [lo, hi]
        slope, intercept = np.polyfit(values, xs, 1)
        assert slope > 0
        assert np.max(np.abs(np.polyval([slope, intercept], values) - xs)) < 0.02, (name, panel)
        checked += len(values)
    return checked


def test_the_figures_equal_their_csv_and_the_metrics_json(built_report):
    """Every CSV value is the value at its JSON pointer in its report; every drawn position is that value."""
    reports, _ = built_report
    assert check_page(reports) == 5  # the five gender benchmarks of the test tree


def test_the_committed_page_equals_the_workspace_reports(workspace_reports):
    """The same on the committed index.html (both kinds of figure: forest plots, a protocol's among them, and the
    rules' dumbbells)."""
    assert check_page(workspace_reports) >= 2


def check_rows(rows: list[dict], load) -> int:
    """Every CSV row's value is the value at its pointer in its report (``load(file)``), its interval the report's
    ``<pointer>_ci_low<ci_suffix>`` / ``_ci_high<ci_suffix>`` (``_holm``: a gender gap's interval at Holm's level),
    present exactly where the report has one (at Holm's level for a gender gap and a prompt's change). Returns the
    intervals checked."""
    intervals = 0
    for r in rows:
        rep = load(r["file"])
        assert float(r["value"]) == resolve(rep, r["pointer"])
        parent, key = resolve(rep, r["pointer"].rsplit("/", 1)[0] or ""), r["pointer"].rsplit("/", 1)[1]
        suffix = r["ci_suffix"]
        prompts = Path(r["file"]).parent == Path(report_layout.prompts_file("m")).parent
        held = key in metric_defs.GAPS or prompts  # intervals at Holm's level
        assert suffix == (forest.HOLM_CI if held else ""), (r["file"], key)
        ends = (parent.get(f"{key}_ci_low{suffix}"), parent.get(f"{key}_ci_high{suffix}"))
        if r["ci_low"]:
            assert (float(r["ci_low"]), float(r["ci_high"])) == ends
            intervals += 1
        else:
            assert ends == (None, None), (r["file"], r["pointer"])
    return intervals


def check_page(reports: Path) -> int:
    """Check every first-screen figure of ``reports/index.html`` against its CSV and the CSV against the reports;
    returns the number of figures."""
    page = (reports / "index.html").read_text(encoding="utf-8")
    figures = re.findall(r'<figure class="answer" id="([^"]+)" data-csv="([^"]+)">(.*?)</figure>', page, re.S)
    checked = 0
    for name, path, body in figures:
        rows = list(csv.DictReader(io.StringIO((reports / path).read_text(encoding="utf-8"))))
        assert rows
        check_rows(rows, lambda file: json.loads((reports / file).read_text(encoding="utf-8")))
        checked += check_svg_against_csv(body, name, rows)
        assert re.search(r'role="img" aria-label="[^"]*(lowest ECE|stereotype share|Brier skill) [^"]+"', body)
    assert checked > 10 * len(figures)
    return len(figures)


def test_one_point_recomputed_from_the_metrics_json(built_report):
    """The first figure's top point is the lowest ECE of its benchmark with its interval, as the metrics JSON
    says (computed here without the figure code)."""
    reports, _ = built_report
    rows = list(csv.DictReader(io.StringIO((reports / "figures" / "calibration_winobias.csv").read_text())))
    eces = {p.stem: json.loads(p.read_text()) for p in (reports / "metrics" / "winobias").glob("*.json")}
    best = min(eces, key=lambda m: eces[m]["ece"])
    top = rows[0]
    assert (top["panel"], top["model"]) == ("ece", best)
    assert [float(top[k]) for k in ("value", "ci_low", "ci_high")] == [
        eces[best][k] for k in ("ece", "ece_ci_low", "ece_ci_high")
    ]


def test_the_committed_page_keeps_its_size_budget():
    page = ROOT / "reports" / "index.html"
    assert page.stat().st_size <= PAGE_BUDGET


# ------------------------------------------------------------------------ colour-blind safety
# Machado, Oliveira and Fernandes (2009), severity 1.0, applied to linear RGB
CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
    "normal": np.eye(3).tolist(),
}
MIN_DELTA_E = 20.0  # CIE76 ΔE between the colours a reader must tell apart, under every simulation


def _lab(hex_colour: str, matrix) -> np.ndarray:
    srgb = np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    linear = np.clip(np.asarray(matrix) @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("vision", sorted(CVD))
@pytest.mark.parametrize(
    "pair", [(answer_plots.SCORED, answer_plots.RELEASED), answer_plots.RULE_COLORS], ids=["source", "rule"]
)
def test_the_palette_stays_distinct_under_colour_blindness(vision, pair):
    a, b = (_lab(c, CVD[vision]) for c in pair)
    assert np.linalg.norm(a - b) >= MIN_DELTA_E


def test_the_palette_check_tells_red_from_green_apart_only_with_normal_vision():
    """The simulation is not vacuous: pure red and green, far apart for normal vision, nearly merge for a
    deuteranope."""
    red, green = "#D00000", "#00A000"
    assert np.linalg.norm(_lab(red, CVD["normal"]) - _lab(green, CVD["normal"])) > 80
    assert np.linalg.norm(_lab(red, CVD["deuteranopia"]) - _lab(green, CVD["deuteranopia"])) < MIN_DELTA_E


# ------------------------------------------------------------------------ the matrix and the terminal
def test_the_comparison_matrix_is_row_minus_column_marked_by_holm():
    data = _data()
    pairs = data.compare["wb"]["pairs"]
    for pair in pairs:
        pair["metrics"]["ece"]["diff"] = data.metrics[("wb", pair["a"])]["ece"] - data.metrics[("wb", pair["b"])]["ece"]
    del pairs[3]  # b–r: a pair the report lacks
    t = compare_tables.matrix_table(data, "wb", "ece")
    assert [r.label[0] for r in t.rows] == ["a", "b", "r", "r2"] == [c.key for c in t.columns]
    a, b, r2 = t.rows[0].cells, t.rows[1].cells, t.rows[3].cells
    assert (a[3].value, a[3].mark, a[3].tone) == (0.05 - 0.21, "▼", "lower")  # a − r2, the one pair that differs
    assert (r2[0].value, r2[0].mark, r2[0].tone) == (-(0.05 - 0.21), "▲", "higher")
    assert (a[1].value, a[1].mark, b[0].value) == (0.05 - 0.10, "", 0.10 - 0.05)
    assert a[0].value == "·" and b[2].value is None  # the diagonal; the missing pair
    assert t.markdown  # 4 runs: the markdown holds it


def test_headlines_name_the_best_run_its_ties_and_the_rule_verdicts():
    (wb,) = headlines(_data())
    assert (wb.benchmark, wb.best, wb.tied, wb.gap) == ("wb", "a 0.050 [0.030, 0.080]", "b, r", "none")
    data = _rules_data()
    for b in ("cp", "cp_shared"):  # y = 1 for every pair: an identity benchmark
        data.bins[(b, "m")] = [{"count": 10, "accuracy": 1.0}]
    (cp,) = headlines(data)
    assert cp.rules == "sentence: > 0.5 in 1/1; shared: ≈ 0.5 in 1/1"
