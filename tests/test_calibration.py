"""Calibrators and protocols (gece.stats.calibration) and the calibrate stage."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from gece.base.errors import GeceError
from gece.cli import main
from gece.io.files.json_reader import read_json
from gece.io.files.readers import read_table
from gece.io.schemas.calibration_files import CalibratedRow, CalibrationBinsReport, CalibrationReport
from gece.io.schemas.pair_rows import ScoreRow
from gece.io.settings.params import CalibrateParams, Params, load_params
from gece.io.settings.sections import MetricsParams
from gece.pipeline import calibrate as calibrate_stage
from gece.pipeline import metrics as metrics_stage
from gece.stats import calibration as cal
from gece.stats import metrics

from .conftest import ROOT


# ---------------------------------------------------------------------- fixtures
def miscalibrated(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The known case: y ~ Bernoulli(q), the model reports p = σ(3 · logit(q)) (overconfident)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.98, n)
    y = (rng.uniform(size=n) < q).astype(np.float64)
    return cal.sigmoid(3.0 * cal.logit(q)), y, q


@pytest.fixture(scope="module")
def synthetic():
    p_fit, y_fit, _ = miscalibrated(3000, seed=1)
    p_eval, y_eval, _ = miscalibrated(3000, seed=2)
    return p_fit, y_fit, p_eval, y_eval


class Recorder(cal.Calibrator):
    """Identity calibrator that records every array it is given."""

    name = "recorder"
    calls: ClassVar[list[tuple[str, np.ndarray, np.ndarray | None]]] = []

    def fit(self, p, y):
        Recorder.calls.append(("fit", np.array(p), np.array(y)))
        return cal.FitResult("ok", {"n": len(p)})

    def predict(self, p):
        Recorder.calls.append(("predict", np.array(p), None))
        return np.asarray(p, dtype=np.float64)


# ------------------------------------------------------------------- calibrators
def test_logit_clips_and_sigmoid_inverts():
    p = np.array([0.0, 1e-15, 0.3, 0.5, 1.0])
    z = cal.logit(p)
    assert np.isfinite(z).all()
    assert z[0] == pytest.approx(np.log(cal.EPS), rel=1e-9)
    assert cal.sigmoid(z)[2:4] == pytest.approx([0.3, 0.5])


@pytest.mark.parametrize("method", cal.METHODS)
def test_every_method_halves_held_out_ece_on_the_known_case(synthetic, method):
    p_fit, y_fit, p_eval, y_eval = synthetic
    before = metrics.ece(p_eval, y_eval)
    c = cal.CALIBRATORS[method]()
    res = c.fit(p_fit, y_fit)
    after = metrics.ece(c.predict(p_eval), y_eval)
    assert res.status == "ok", res.reason
    assert before == pytest.approx(0.146, abs=0.01)  # the miscalibration is real
    assert after <= before / 2, (method, before, after)
    assert after < 0.04


def test_parametric_methods_recover_the_known_map(synthetic):
    p_fit, y_fit, _, _ = synthetic
    t = cal.TemperatureScaling()
    assert t.fit(p_fit, y_fit).params["T"] == pytest.approx(3.0, rel=0.1)
    pl = cal.PlattScaling()
    params = pl.fit(p_fit, y_fit).params
    assert params["a"] == pytest.approx(1 / 3, rel=0.1)
    assert params["b"] == pytest.approx(0.0, abs=0.1)
    # beta with a = b = 1/3, c = 0 is the same map
    b = cal.BetaCalibration()
    params = b.fit(p_fit, y_fit).params
    assert params["a"] == pytest.approx(1 / 3, rel=0.15)
    assert params["b"] == pytest.approx(1 / 3, rel=0.15)


def test_split_protocol_halves_ece_for_every_method():
    p, y, _ = miscalibrated(4000, seed=0)
    out = cal.run_split(p, y, cal.METHODS, fraction=0.5, seed=0)
    ev = out.eval_idx
    before = metrics.ece(p[ev], y[ev])
    for name, m in out.methods.items():
        assert m.status == "ok", (name, m.reason)
        assert metrics.ece(m.scores[ev], y[ev]) <= before / 2, name
        assert np.isnan(m.scores[out.fit_idx]).all()  # no in-sample scores


def test_histogram_bins_and_empty_bin_fallback():
    h = cal.HistogramBinning(n_bins=4, binning="equal_width")
    p = np.array([0.1, 0.15, 0.2, 0.8, 0.9, 0.95])
    y = np.array([0, 0, 1, 1, 1, 0])
    res = h.fit(p, y)
    assert res.params["counts"] == [3, 0, 0, 3]
    assert res.params["n_empty"] == 2
    # bins (0, .25], (.25, .5], (.5, .75], (.75, 1]: means 1/3, empty -> center, empty -> center, 2/3
    assert h.predict(np.array([0.05, 0.3, 0.6, 0.99])) == pytest.approx([1 / 3, 0.375, 0.625, 2 / 3])
    eq = cal.HistogramBinning(n_bins=2)  # equal-mass: median split of the fit p
    eq.fit(p, y)
    assert eq.predict(np.array([0.0, 0.5, 1.0])) == pytest.approx([1 / 3, 1 / 3, 2 / 3])


# ------------------------------------------------------------ degenerate / failed
def one_sided(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The model says 'male' for every pair, more strongly when the human says 'female'."""
    rng = np.random.default_rng(seed)
    y = np.tile([0.0, 1.0], n // 2)
    z = np.where(y == 1, 1.0, 3.0) + rng.normal(0, 0.3, n)
    return cal.sigmoid(z), y


def test_temperature_running_to_its_bound_is_degenerate():
    p, y = one_sided()
    t = cal.TemperatureScaling()
    res = t.fit(p, y)
    assert res.status == "degenerate"
    assert res.params["T"] == pytest.approx(cal.TemperatureScaling.T_MAX, rel=1e-2)
    assert "upper bound" in res.reason
    assert np.abs(t.predict(p) - 0.5).max() < 1e-3  # p' collapsed onto 0.5


def test_temperature_collapsing_towards_one_half_is_degenerate():
    # the model says 'male' for 99% of pairs, barely more strongly when it is right (gemma-2-9b on
    # winobias behaves so): no temperature can shift, so T grows until p' hugs 0.5
    rng = np.random.default_rng(0)
    y = np.tile([0.0, 1.0], 200)
    p = cal.sigmoid(3.0 + 0.2 * (2 * y - 1) + rng.normal(0, 1, y.size))
    t = cal.TemperatureScaling()
    res = t.fit(p, y)
    assert res.status == "degenerate" and "collapsed towards 0.5" in res.reason
    assert res.params["T"] == pytest.approx(18.76, abs=0.01)  # finite: not at its bound
    assert res.params["median_margin"] == pytest.approx(0.0393, abs=1e-4)
    # a genuinely informative run stays ok
    p2, y2, _ = miscalibrated(400, seed=5)
    assert t.fit(p2, y2).status == "ok"


def test_reversing_maps_are_degenerate():
    p, y = one_sided()
    platt = cal.PlattScaling().fit(p, y)
    assert platt.status == "degenerate" and platt.params["a"] < 0
    beta = cal.BetaCalibration().fit(p, y)
    assert beta.status == "degenerate"
    assert min(beta.params["a"], beta.params["b"]) < 0


def test_constant_output_is_degenerate():
    # y does not depend on p at all, and is lower for higher p: PAVA pools everything
    p = np.linspace(0.1, 0.9, 200)
    y = (p < 0.5).astype(np.float64)
    iso = cal.IsotonicCalibration().fit(p, y)
    assert iso.status == "degenerate" and "constant output" in iso.reason
    assert iso.params["n_levels"] == 1
    hist = cal.HistogramBinning(n_bins=4).fit(p, np.tile([0.0, 1.0], 100))
    assert hist.status == "degenerate"


def test_failures_are_reported_not_raised():
    p = np.linspace(0.1, 0.9, 50)
    y = np.ones(50)
    res, pred = cal.fit_predict(cal.BetaCalibration, p, y, np.arange(40), np.arange(40, 50))
    assert res.status == "failed" and res.reason.startswith("every fit pair has y=1")
    assert pred is None

    class Raises(cal.PlattScaling):
        def fit(self, p, y):
            raise ValueError("bad data")

    y2 = (np.arange(50) % 2).astype(float)
    res, pred = cal.fit_predict(Raises, p, y2, np.arange(40), np.arange(40, 50))
    assert res.status == "failed" and res.reason == "ValueError: bad data" and pred is None
    sep = cal.PlattScaling().fit(p, (p > 0.5).astype(float))
    assert sep.status == "failed" and "separable" in sep.reason


def test_beta_leaves_the_global_warning_filters_alone(synthetic):
    before = list(warnings.filters)
    cal.BetaCalibration().fit(*synthetic[:2])
    assert warnings.filters == before


# --------------------------------------------------------------------- protocols
def test_stratified_split_sizes_for_winobias():
    y = np.r_[np.ones(385), np.zeros(386)]
    fit, ev = cal.stratified_split(y, 0.5, seed=0)
    assert (fit.size, ev.size) == (385, 386)
    assert np.intersect1d(fit, ev).size == 0 and np.union1d(fit, ev).size == 771
    assert abs(y[fit].sum() - y[ev].sum()) <= 1  # stratified: 192/193 male-preferred pairs
    fit7, _ = cal.stratified_split(y, 0.5, seed=7)
    assert not np.array_equal(fit, fit7)
    fit_again, _ = cal.stratified_split(y, 0.5, seed=0)
    assert np.array_equal(fit, fit_again)


def test_crossfit_gives_every_pair_one_out_of_fold_score():
    p, y, _ = miscalibrated(771, seed=3)
    out = cal.run_crossfit(p, y, cal.METHODS, folds=5, seed=0)
    assert sorted(np.unique(out.fold)) == [0, 1, 2, 3, 4]
    sizes = np.bincount(out.fold)
    assert sizes.sum() == 771 and sizes.max() - sizes.min() <= 1
    assert out.n_fit == 4 * 771
    for k in range(5):  # stratified folds
        assert abs(y[out.fold == k].mean() - y.mean()) < 0.02
    for m in out.methods.values():
        assert np.isfinite(m.scores).all()
        assert len(m.params) == 5 and m.fold_status == ["ok"] * 5


def test_nothing_from_the_evaluation_part_reaches_a_fit():
    rng = np.random.default_rng(0)
    p = rng.permutation(np.linspace(0.01, 0.99, 200))  # distinct values identify the pairs
    y = (rng.uniform(size=200) < p).astype(np.float64)

    Recorder.calls = []
    split = cal.run_split(p, y, ["recorder"], 0.5, 0, makers={"recorder": Recorder})
    (_, fp, fy), (_, pp, _) = Recorder.calls
    assert np.array_equal(fp, p[split.fit_idx]) and np.array_equal(fy, y[split.fit_idx])
    assert np.array_equal(pp, p[split.eval_idx])
    assert not np.isin(fp, p[split.eval_idx]).any()

    Recorder.calls = []
    cross = cal.run_crossfit(p, y, ["recorder"], 5, 0, makers={"recorder": Recorder})
    fits, preds = Recorder.calls[0::2], Recorder.calls[1::2]
    for k, ((_, fp, _), (_, pp, _)) in enumerate(zip(fits, preds, strict=True)):
        assert np.array_equal(pp, p[cross.fold == k])
        assert np.array_equal(fp, p[cross.fold != k])
        assert not np.isin(fp, pp).any()


def test_changing_the_evaluation_pairs_does_not_change_the_fits():
    p, y, _ = miscalibrated(600, seed=4)
    a = cal.run_split(p, y, cal.METHODS, 0.5, 0)
    p2 = p.copy()
    p2[a.eval_idx] = np.random.default_rng(9).uniform(size=a.eval_idx.size)  # split depends on y only
    b = cal.run_split(p2, y, cal.METHODS, 0.5, 0)
    assert np.array_equal(a.fit_idx, b.fit_idx)
    for name in cal.METHODS:
        assert a.methods[name].params == b.methods[name].params, name


def test_crossfit_status_is_the_worst_fold():
    assert cal.worst(["ok", "degenerate", "ok"]) == "degenerate"
    assert cal.worst(["ok", "failed", "degenerate"]) == "failed"
    p, y = one_sided(500)
    out = cal.run_crossfit(p, y, ["temperature"], folds=5, seed=0)
    m = out.methods["temperature"]
    assert m.status == "degenerate" and m.fold_status == ["degenerate"] * 5
    assert m.reason.startswith("folds 0, 1, 2, 3, 4: T ran to its upper bound")


# ------------------------------------------------------------------------ params
def test_calibrate_params():
    params = load_params(ROOT / "params.yaml")
    assert params.calibrate == CalibrateParams()
    assert params.calibrate.methods == list(cal.METHODS)
    with pytest.raises(ValueError):
        CalibrateParams(methods=["beta", "beta"])
    with pytest.raises(ValueError):
        CalibrateParams(fraction=1.0)
    with pytest.raises(ValueError):
        CalibrateParams(methods=["vector"])
    raw = params.model_dump()
    raw["calibrate"]["sed"] = 3
    with pytest.raises(ValueError):
        Params.model_validate(raw)


# -------------------------------------------------------------------- the stage
@pytest.fixture(scope="module")
def gptj_scores(reference_scores) -> Path:
    """winobias / paper-gpt-j-6b built from data/ (prepare + reference), independent of artifacts/."""
    return reference_scores[("winobias", "gpt-j-6b")]


def run_stage(scores: Path, out: Path, settings: CalibrateParams | None = None) -> dict[str, Path]:
    settings = settings or CalibrateParams()
    paths = {"out": out / "cal.json", "scores_out": out / "cal.parquet", "bins_out": out / "bins.json"}
    calibrate_stage.calibrate(scores, **paths, settings=settings, metric_settings=MetricsParams())
    return paths


def test_stage_on_a_paper_reference_run(gptj_scores, tmp_path):
    paths = run_stage(gptj_scores, tmp_path)
    report = read_json(paths["out"], CalibrationReport)
    raw = json.loads(paths["out"].read_text())
    assert set(raw) == {"split", "crossfit"}
    split, cross = report.split, report.crossfit
    assert (split.n_fit, split.n_eval) == (385, 386)
    assert (cross.n_fit, cross.n_eval, cross.folds) == (4 * 771, 771, 5)
    assert list(split.methods) == list(cal.METHODS) == list(cross.methods)
    # the cross-fitting baseline is the whole run: the metrics stage's numbers
    scores, _ = read_table(gptj_scores, ScoreRow)
    full, _ = metrics_stage.run_metrics(scores, MetricsParams())
    assert cross.uncalibrated.model_dump() == full
    assert split.uncalibrated.n == 386
    for protocol in (split, cross):
        for name, m in protocol.methods.items():
            assert m.status == "ok", (name, m.reason)
            for key in ("ece", "ece_toplabel", "gender_ece", "ece_male", "ece_female", "brier", "accuracy"):
                assert getattr(m.metrics, key) is not None
            # the run leans male (p > 0.5 for 70% of pairs, y = 1 for 50%): every method with a
            # shift at least halves its ECE (0.17); temperature cannot shift, only sharpen/soften
            if name == "temperature":
                assert m.metrics.ece < protocol.uncalibrated.ece
                assert m.metrics.ece_toplabel < protocol.uncalibrated.ece_toplabel
                assert m.metrics.accuracy == protocol.uncalibrated.accuracy  # no prediction flips
            else:
                assert m.metrics.ece < protocol.uncalibrated.ece / 2, name
    assert split.methods["temperature"].params["T"] == pytest.approx(1.196, abs=1e-3)
    assert len(cross.methods["platt"].params["folds"]) == 5

    df, meta = read_table(paths["scores_out"], CalibratedRow)
    assert meta["model"] == "paper-gpt-j-6b" and len(df) == 771
    assert (df["split"] == "eval").sum() == 386
    for name in cal.METHODS:
        assert df.loc[df["split"] == "fit", f"split_{name}"].isna().all()
        assert df.loc[df["split"] == "eval", f"split_{name}"].notna().all()
        assert df[f"crossfit_{name}"].notna().all()
    ev = df[df["split"] == "eval"]
    beta_ece = metrics.ece(ev["split_beta"], ev["y"])
    assert beta_ece == pytest.approx(split.methods["beta"].metrics.ece, abs=1e-15)

    bins = read_json(paths["bins_out"], CalibrationBinsReport)
    assert len(bins) == 2 * 6 * 10
    assert sum(b.count for b in bins if b.protocol == "split" and b.method == "platt") == 386
    assert sum(b.count for b in bins if b.protocol == "crossfit" and b.method == "uncalibrated") == 771


def test_stage_is_identical_for_a_fixed_seed(gptj_scores, tmp_path):
    a = run_stage(gptj_scores, tmp_path / "a")
    b = run_stage(gptj_scores, tmp_path / "b")
    c = run_stage(gptj_scores, tmp_path / "c", CalibrateParams(seed=7))
    for key in a:
        assert a[key].read_bytes() == b[key].read_bytes(), key
    assert a["out"].read_bytes() != c["out"].read_bytes()


def test_stage_with_fewer_methods_and_undersized_input(gptj_scores, tmp_path):
    paths = run_stage(gptj_scores, tmp_path, CalibrateParams(methods=["platt"], folds=3, fraction=0.3))
    raw = json.loads(paths["out"].read_text())
    assert list(raw["split"]["methods"]) == ["platt"]
    assert (raw["split"]["n_fit"], raw["split"]["n_eval"]) == (231, 540)
    df, _ = read_table(paths["scores_out"], CalibratedRow)
    assert df["split_beta"].isna().all() and df["crossfit_platt"].notna().all()
    tiny = pd.read_parquet(gptj_scores).head(6)
    with pytest.raises(GeceError, match="at least 5 pairs of each label"):
        calibrate_stage.run_calibration(tiny, CalibrateParams(), MetricsParams())
    with pytest.raises(GeceError, match=r"calibrate\.fraction=0\.001"):
        calibrate_stage.run_calibration(pd.read_parquet(gptj_scores), CalibrateParams(fraction=0.001), MetricsParams())


def test_cli_calibrate(gptj_scores, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--params",
                str(ROOT / "params.yaml"),
                "calibrate",
                str(gptj_scores),
                "--out",
                str(out),
                "--methods",
                "temperature",
                "platt",
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert list(printed["crossfit"]["methods"]) == ["temperature", "platt"]
    assert main(["calibrate", str(tmp_path / "missing.parquet")]) == 2


# -------------------------------------------------------------------- reuse by content
def _record(folders: list[Path], store: Path) -> dict[Path, dict[str, Path]]:
    """What DVC does between two runs: the files of each output folder committed to its cache (each object named
    by its md5), then removed."""
    import hashlib

    recorded: dict[Path, dict[str, Path]] = {}
    for folder in folders:
        recorded[folder] = {}
        for p in sorted(folder.iterdir()):
            md5 = hashlib.md5(p.read_bytes(), usedforsecurity=False).hexdigest()
            (store / md5[:2]).mkdir(parents=True, exist_ok=True)
            (store / md5[:2] / md5[2:]).write_bytes(p.read_bytes())
            recorded[folder][p.name] = store / md5[:2] / md5[2:]
            p.unlink()
    return recorded


def test_a_run_unchanged_since_the_recorded_run_is_copied_not_calibrated(gptj_scores, tmp_path, monkeypatch):
    """``--benchmark``: the last recorded run's three files come back byte for byte without calibrating when the
    fingerprint holds (an edit outside the computation: cli.py is not in its closure, a comment is not in its
    hash); a changed computation (its code hash) or setting calibrates again."""
    from gece.code import closure

    scores, meta = read_table(gptj_scores, ScoreRow)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(calibrate_stage.runs, "runs", lambda params, b: ["paper-gpt-j-6b"])
    monkeypatch.setattr(calibrate_stage.runs, "load_scores", lambda params, b, m: (scores.copy(), meta))
    monkeypatch.setattr(calibrate_stage.runs, "is_reference", lambda params, m: False)
    monkeypatch.setattr(calibrate_stage.runs, "checks", lambda params: frozenset())
    recorded: dict[Path, dict[str, Path]] = {}
    monkeypatch.setattr(calibrate_stage.reuse, "previous_outputs", lambda folder: recorded.get(Path(folder), {}))
    folders = [
        Path("reports/calibration/winobias"),
        Path("artifacts/calibrated/winobias"),
        Path("reports/calibration_bins/winobias"),
    ]
    settings = CalibrateParams(methods=["platt", "isotonic"])
    first = calibrate_stage.calibrate_benchmark(None, "winobias", settings, MetricsParams())  # type: ignore[arg-type]
    written = {f / name: (f / name).read_bytes() for f in folders for name in sorted(p.name for p in f.iterdir())}
    assert len(written) == 3
    recorded.update(_record(folders, tmp_path / "cache"))

    def boom(*args, **kwargs):
        raise AssertionError("calibrated again")

    monkeypatch.setattr(calibrate_stage, "run_calibration", boom)
    again = calibrate_stage.calibrate_benchmark(None, "winobias", settings, MetricsParams())  # type: ignore[arg-type]
    assert {p: p.read_bytes() for p in written} == written
    report = folders[0] / "paper-gpt-j-6b.json"
    assert again == {"paper-gpt-j-6b": json.loads(written[report])} and set(first) == set(again)
    assert "src/gece/cli.py" not in closure.closure([calibrate_stage.__name__])
    assert "src/gece/cli_help.py" not in closure.closure([calibrate_stage.__name__])

    for p in written:
        p.unlink()
    with pytest.raises(AssertionError, match="calibrated again"):  # another setting
        calibrate_stage.calibrate_benchmark(None, "winobias", CalibrateParams(methods=["platt"]), MetricsParams())  # type: ignore[arg-type]
    monkeypatch.setattr(calibrate_stage, "computation_code", lambda: "an edited computation")
    with pytest.raises(AssertionError, match="calibrated again"):
        calibrate_stage.calibrate_benchmark(None, "winobias", settings, MetricsParams())  # type: ignore[arg-type]
