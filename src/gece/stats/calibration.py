"""Post-hoc calibration (docs/metrics.md, "Calibration"): calibrators p -> p' and the protocols that evaluate them.

Arrays in, arrays out. A calibrator is fitted on the calibration ("fit") part of the pairs and
maps any p to p'; a protocol decides which pairs each fit sees and collects the held-out p'.

Calibrators (``fit(p, y) -> FitResult``, ``predict(p) -> p'``), with z = logit(p) computed on
p clipped to [EPS, 1 − EPS]:

- ``beta``:        p' = 1 / (1 + 1 / (e^c · p^a / (1 − p)^b))   (betacal, parameters "abm")
- ``isotonic``:    p' = the isotonic (non-decreasing) step function of p fitted by PAVA, clipped
                   to its fitted range outside it (scikit-learn ``IsotonicRegression``)
- ``temperature``: p' = σ(z / T)
- ``platt``:       p' = σ(a · z + b)
- ``histogram``:   p' = mean of y over the calibration pairs in p's bin (equal-mass bins)

Every fit reports a status:

- ``ok``;
- ``degenerate``: the fit converged to something that is not a usable calibration map. Common to
  all methods: the output is constant on the calibration part (std(p') < COLLAPSE_STD). Per
  method: temperature: T ends at a bound of [T_MIN, T_MAX] (the NLL keeps falling as T → ∞,
  p' → 0.5) or p' collapsed towards 0.5 (median |p' − 0.5| < 0.05 on the calibration pairs);
  platt: a ≤ 0; beta: a < 0
  or b < 0 (p' no longer non-decreasing in p; platt and beta then ignore or reverse the model's
  ranking); isotonic and histogram: only the common rule (a single level);
- ``failed``: the fit raised (the error is the reason; there is no p'), the optimizer did not
  converge (there is a p', reported with its metrics and marked failed), or the fit pairs carry
  one label only (no fit is tried: a map fitted to one label sends every score to it). That is
  every fit of a benchmark read under the identity protocol (y = 1 for every pair, as for the
  imported CrowS-Pairs-format benchmarks): post-hoc calibration needs both labels.

Protocols:

- split: one stratified split (by y, seeded), ``fraction`` of the pairs for fitting; p' for the
  held-out pairs only;
- crossfit: stratified k-fold cross-fitting (seeded): fold j's pairs get p' from the calibrator
  fitted on the other k − 1 folds, so every pair has exactly one out-of-fold p'.

Nothing from the evaluation part reaches a fit: :func:`fit_predict` hands the calibrator copies
of the fit rows only.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit

from gece.catalog.calibration_methods import METHOD_NAMES, ONE_LABEL
from gece.stats.metrics import Binning, bin_edges
from gece.stats.metrics import checked_pair as _pairs

EPS = 1e-12  # p is clipped to [EPS, 1 - EPS] before logit: |z| <= 27.6
COLLAPSE_STD = 1e-6  # std(p') below this on the calibration part: constant output
COLLAPSE_MARGIN = 0.05  # temperature: median |p' - 0.5| below this: collapsed towards 0.5

Status = Literal["ok", "degenerate", "failed"]
STATUSES: tuple[Status, ...] = ("ok", "degenerate", "failed")
# errors a fit may raise on bad data; anything else is a bug in gece and propagates
FIT_ERRORS = (ValueError, ArithmeticError, np.linalg.LinAlgError, RuntimeError)


# --------------------------------------------------------------------------- helpers
def clip_probs(p: np.ndarray, eps: float = EPS) -> np.ndarray:
    """p clipped to [eps, 1 − eps] (so that logit(p) is finite).

    Parameters
    ----------
    p : array-like
        Probabilities, any shape.
    eps : float, default=EPS
        Distance kept from 0 and 1 (1e-12).

    Returns
    -------
    clipped : ndarray of float64
        p clipped to [eps, 1 − eps], same shape.
    """
    return np.clip(np.asarray(p, dtype=np.float64), eps, 1.0 - eps)


def logit(p: np.ndarray, eps: float = EPS) -> np.ndarray:
    """z = log(p) − log(1 − p) of p clipped to [eps, 1 − eps].

    Parameters
    ----------
    p : array-like
        Probabilities in [0, 1], any shape.
    eps : float, default=EPS
        Clipping distance from 0 and 1 (1e-12: |z| <= 27.6).

    Returns
    -------
    z : ndarray of float64
        The log-odds, same shape as ``p``.
    """
    p = clip_probs(p, eps)
    return np.log(p) - np.log1p(-p)


def sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = 1 / (1 + e^−z), without overflow.

    Parameters
    ----------
    z : array-like
        Log-odds, any shape.

    Returns
    -------
    p : ndarray of float64
        σ(z) in [0, 1], same shape (``scipy.special.expit``).
    """
    return expit(np.asarray(z, dtype=np.float64))


def _check(p: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """1-D float arrays, checked as the metrics check them; ``y=None`` checks p alone (predict)."""
    if y is None:
        return _pairs(p, np.zeros(np.size(p)))[0], None
    p, y = _pairs(p, y)
    if p.size == 0:
        raise ValueError("no pairs to fit on")
    return p, y


def _nll(margin: np.ndarray) -> float:
    """Mean negative log-likelihood Σ log(1 + e^−m) / n for signed margins m = s · logit(p')."""
    return float(np.mean(np.logaddexp(0.0, -margin)))


def _float(x: Any) -> float:
    return float(np.asarray(x).reshape(-1)[0])


# ----------------------------------------------------------------------- calibrators
@dataclass(frozen=True)
class FitResult:
    """What a fit reports: its status, the fitted parameters (JSON-ready) and why it is not ok.

    Attributes
    ----------
    status : {"ok", "degenerate", "failed"}
        The fit's status (module docstring).
    params : dict of str to Any
        The fitted parameters, JSON-ready (per method; empty when the fit raised or was not tried).
    reason : str or None, default=None
        Why the status is not ``ok``; None when it is.
    """

    status: Status
    params: dict[str, Any]
    reason: str | None = None


class Calibrator(ABC):
    """A map p -> p' fitted on (p, y) of the calibration pairs only.

    Attributes
    ----------
    name : str
        The method's name in the method table (gece.catalog.calibration_methods: ``beta``, ``isotonic``,
        ``temperature``, ``platt``, ``histogram``); a class attribute.
    """

    name: ClassVar[str]

    @abstractmethod
    def fit(self, p: np.ndarray, y: np.ndarray) -> FitResult:
        """Fit on the calibration pairs; return the status and the parameters.

        Parameters
        ----------
        p : array-like of shape (n,)
            Scores of the pairs in [0, 1], no NaN.
        y : array-like of shape (n,)
            Labels, 0 or 1.

        Returns
        -------
        result : FitResult
            The status (ok, degenerate or failed), the fitted parameters and the reason.
        """

    @abstractmethod
    def predict(self, p: np.ndarray) -> np.ndarray:
        """p' for any p (after a fit).

        Parameters
        ----------
        p : array-like of shape (n,)
            Scores in [0, 1], no NaN.

        Returns
        -------
        p_cal : ndarray of float64 of shape (n,)
            The calibrated scores p'.
        """

    def _result(
        self, p_fit: np.ndarray, params: dict[str, Any], reasons: list[str], failed: str | None = None
    ) -> FitResult:
        """Status from the method's own findings plus the common constant-output rule."""
        if failed:
            return FitResult("failed", params, failed)
        out = self.predict(p_fit)
        if not np.isfinite(out).all():
            return FitResult("failed", params, "non-finite calibrated scores")
        if out.size > 1 and float(np.std(out)) < COLLAPSE_STD:
            reasons = [*reasons, f"constant output p' = {float(np.mean(out)):.6g} on the calibration pairs"]
        return FitResult("degenerate" if reasons else "ok", params, "; ".join(reasons) or None)


class TemperatureScaling(Calibrator):
    """Temperature scaling (Guo et al. 2017): p' = σ(z / T), z = logit(p).

    T = e^u with u = argmin over [ln T_MIN, ln T_MAX] of the mean NLL
    Σ log(1 + exp(−s_i z_i e^−u)) / n, s = 2y − 1 (bounded Brent). There is no bias term, so T
    cannot shift p' and cannot flip a prediction. Degenerate when u ends within BOUND_TOL of a
    bound (at T_MAX: the NLL keeps falling as T → ∞, i.e. every temperature is worse than
    answering 0.5 everywhere) or when p' collapses towards 0.5: the median over the calibration
    pairs of the margin |p' − 0.5| is below COLLAPSE_MARGIN (0.05), i.e. most calibrated
    confidences are under 55%. Both happen when the model prefers one side for almost every pair
    whatever y says: without a shift term the only way to lower the NLL is to shrink every score
    towards 0.5, which lowers the ECE to about |mean(y) − 0.5| without calibrating anything (for
    a model whose scores carry almost no information the collapse is also what an honest map
    does; the status says the same: read its after-metrics as "no confidence left").
    ``median_margin`` in params is that median.

    Attributes
    ----------
    name : str
        ``"temperature"``.
    T : float or None
        The fitted temperature, in [T_MIN, T_MAX]; None before :meth:`fit`.
    T_MIN, T_MAX : float
        Bounds of T (1e-2, 1e4).
    BOUND_TOL : float
        Distance from a bound, in ln T, at which the fit counts as having run to it (1e-3).

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017). On calibration of modern neural
           networks. *International Conference on Machine Learning* (ICML 2017).
    """

    name = "temperature"
    T_MIN, T_MAX = 1e-2, 1e4
    BOUND_TOL = 1e-3  # in ln T

    def __init__(self) -> None:
        self.T: float | None = None

    def fit(self, p, y) -> FitResult:
        p, y = _check(p, y)
        z, s = logit(p), 2.0 * y - 1.0
        lo, hi = math.log(self.T_MIN), math.log(self.T_MAX)
        res = minimize_scalar(
            lambda u: _nll(s * z * math.exp(-u)),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-9, "maxiter": 500},
        )
        self.T = math.exp(float(res.x))
        margin = float(np.median(np.abs(self.predict(p) - 0.5)))
        params = {"T": self.T, "median_margin": margin}
        if not res.success:
            return self._result(p, params, [], failed=f"optimizer did not converge: {res.message}")
        reasons = []
        if res.x >= hi - self.BOUND_TOL:
            reasons.append(f"T ran to its upper bound {self.T_MAX:g} (p' -> 0.5)")
        elif res.x <= lo + self.BOUND_TOL:
            reasons.append(f"T ran to its lower bound {self.T_MIN:g}")
        if not reasons and margin < COLLAPSE_MARGIN:
            reasons.append(
                f"T = {self.T:.3g}: p' collapsed towards 0.5 (median |p' - 0.5| = {margin:.3g} "
                f"< {COLLAPSE_MARGIN:g} on the calibration pairs)"
            )
        return self._result(p, params, reasons)

    def predict(self, p) -> np.ndarray:
        p, _ = _check(p)
        return sigmoid(logit(p) / self.T)


class PlattScaling(Calibrator):
    """Platt scaling: p' = σ(a · z + b), z = logit(p).

    (a, b) = argmin of the mean NLL Σ log(1 + exp(−s_i (a z_i + b))) / n, s = 2y − 1: an
    unregularized logistic regression on z with the raw 0/1 targets (no Platt target
    smoothing), fitted by BFGS from (1, 0) with the analytic gradient. Failed when BFGS stops
    with a gradient above 1e-6, or when the calibration pairs are separable by p (every y = 1
    pair above every y = 0 pair: the NLL has no minimum, a → ∞); degenerate when a ≤ 0 (p' does not
    increase with p: the map ignores or reverses the model's ranking).

    Attributes
    ----------
    name : str
        ``"platt"``.
    a, b : float or None
        The fitted slope and intercept on the logit scale; None before :meth:`fit`.

    References
    ----------
    .. [1] J. C. Platt (1999). Probabilistic outputs for support vector machines and comparisons to
           regularized likelihood methods. In *Advances in Large Margin Classifiers*, MIT Press.
    """

    name = "platt"

    def __init__(self) -> None:
        self.a: float | None = None
        self.b: float | None = None

    def fit(self, p, y) -> FitResult:
        p, y = _check(p, y)
        z, s = logit(p), 2.0 * y - 1.0
        n = z.size

        def f(w: np.ndarray) -> tuple[float, np.ndarray]:
            m = s * (w[0] * z + w[1])
            g = -s * expit(-m)  # d/d(a z + b) of log(1 + e^-m)
            return float(np.mean(np.logaddexp(0.0, -m))), np.array([g @ z, g.sum()]) / n

        res = minimize(f, np.array([1.0, 0.0]), jac=True, method="BFGS", options={"gtol": 1e-8, "maxiter": 1000})
        self.a, self.b = float(res.x[0]), float(res.x[1])
        params = {"a": self.a, "b": self.b}
        if z[y == 1].size and z[y == 0].size and z[y == 1].min() > z[y == 0].max():
            return self._result(
                p,
                params,
                [],
                failed="the calibration pairs are separable by p: no maximum-likelihood fit (a -> infinity)",
            )
        if not res.success and np.max(np.abs(res.jac)) > 1e-6:
            return self._result(p, params, [], failed=f"optimizer did not converge: {res.message}")
        reasons = [f"a = {self.a:.3g} <= 0 (p' does not increase with p)"] if self.a <= 0 else []
        return self._result(p, params, reasons)

    def predict(self, p) -> np.ndarray:
        p, _ = _check(p)
        return sigmoid(self.a * logit(p) + self.b)


class BetaCalibration(Calibrator):
    """Beta calibration (Kull et al. 2017), ``betacal.BetaCalibration(parameters="abm")``:
    p' = 1 / (1 + 1 / (e^c · p^a / (1 − p)^b)), a logistic regression on (ln p, −ln(1 − p)).

    betacal clips p to [2.2e-16, 1 − 2.2e-16]; when the full fit gives a < 0 (b < 0) it refits
    with that coefficient fixed at 0 (``dropped``); m is the midpoint, p'(m) = 1/2. The fit
    raises on data it cannot handle (e.g. one class only): failed with the error. Failed also
    when its logistic regression stops at its iteration limit; degenerate when a < 0 or b < 0
    after the refit (p' then decreases with p somewhere).

    Attributes
    ----------
    name : str
        ``"beta"``.
    model : betacal.BetaCalibration or None
        The fitted betacal model; None before :meth:`fit`.

    References
    ----------
    .. [1] M. Kull, T. Silva Filho and P. Flach (2017). Beta calibration: a well-founded and easily
           implemented improvement on logistic calibration for binary classifiers. *Proceedings of the
           20th International Conference on Artificial Intelligence and Statistics* (AISTATS 2017).
    """

    name = "beta"

    def __init__(self) -> None:
        self.model = None

    def fit(self, p, y) -> FitResult:
        from betacal import BetaCalibration as _Beta

        p, y = _check(p, y)
        p = clip_probs(p)
        # betacal calls warnings.filterwarnings("ignore") globally; keep that inside this block
        with warnings.catch_warnings():
            self.model = _Beta(parameters="abm").fit(p, y.astype(np.int64))
        cal = self.model.calibrator_
        a, b, m = (float(v) for v in cal.map_)
        lr = cal.lr_
        params = {
            "a": a,
            "b": b,
            "c": _float(lr.intercept_),
            "m": m,
            "dropped": "a" if a == 0 and b != 0 else "b" if b == 0 and a != 0 else None,
        }
        n_iter = int(np.max(lr.n_iter_))
        if n_iter >= lr.max_iter:
            return self._result(p, params, [], failed=f"logistic regression did not converge in {n_iter} iterations")
        reasons = []
        if a < 0 or b < 0:
            reasons.append(f"a = {a:.3g}, b = {b:.3g}: p' decreases with p")
        return self._result(p, params, reasons)

    def predict(self, p) -> np.ndarray:
        p, _ = _check(p)
        with warnings.catch_warnings():
            return np.asarray(self.model.predict(clip_probs(p)), dtype=np.float64)


class IsotonicCalibration(Calibrator):
    """Isotonic regression (Zadrozny & Elkan 2002): p' = the non-decreasing step function of p
    that minimizes Σ (p'_i − y_i)² on the calibration pairs (PAVA), interpolated linearly
    between its thresholds and clipped to them outside (scikit-learn ``IsotonicRegression(
    out_of_bounds="clip", y_min=0, y_max=1)``). Params: the thresholds x → y. Degenerate only
    by the common rule (a single level: the calibration pairs show no increasing relation).

    Attributes
    ----------
    name : str
        ``"isotonic"``.
    model : sklearn.isotonic.IsotonicRegression or None
        The fitted regression; None before :meth:`fit`.

    References
    ----------
    .. [1] B. Zadrozny and C. Elkan (2002). Transforming classifier scores into accurate multiclass
           probability estimates. *Proceedings of the 8th ACM SIGKDD International Conference on
           Knowledge Discovery and Data Mining* (KDD 2002).
    """

    name = "isotonic"

    def __init__(self) -> None:
        self.model = None

    def fit(self, p, y) -> FitResult:
        from sklearn.isotonic import IsotonicRegression

        p, y = _check(p, y)
        self.model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0, increasing=True).fit(p, y)
        x_t, y_t = self.model.X_thresholds_, self.model.y_thresholds_
        params = {"n_levels": int(np.unique(y_t).size), "x": x_t.tolist(), "y": y_t.tolist()}
        return self._result(p, params, [])

    def predict(self, p) -> np.ndarray:
        p, _ = _check(p)
        return np.clip(np.asarray(self.model.predict(p), dtype=np.float64), 0.0, 1.0)


class HistogramBinning(Calibrator):
    """Histogram binning (Zadrozny & Elkan 2001): p' = mean(y) of the calibration pairs in p's bin.

    Bins (e_m, e_{m+1}], the lowest closed, with edges from the calibration pairs' p: equal-mass
    (default; the m/M quantiles of p, as ``metrics.bin_edges``) or equal-width (m/M). A p outside
    [e_0, e_M] goes to the first or last bin. An empty bin (equal-width, or tied quantiles) maps
    to its center (e_m + e_{m+1}) / 2, i.e. p is trusted there. Degenerate only by the common
    rule (every non-empty bin has the same mean).

    Parameters
    ----------
    n_bins : int, default=10
        Number of bins M.
    binning : {"equal_mass", "equal_width"}, default="equal_mass"
        Edges at the m / M quantiles of the calibration pairs' p, or at m / M.

    Attributes
    ----------
    name : str
        ``"histogram"``.
    edges : ndarray of float64 of shape (n_bins + 1,) or None
        The fitted bin edges; None before :meth:`fit`.
    values : ndarray of float64 of shape (n_bins,) or None
        p' of each bin (its mean y, or its center when empty); None before :meth:`fit`.

    References
    ----------
    .. [1] B. Zadrozny and C. Elkan (2001). Obtaining calibrated probability estimates from decision
           trees and naive Bayesian classifiers. *Proceedings of the 18th International Conference on
           Machine Learning* (ICML 2001).
    """

    name = "histogram"

    def __init__(self, n_bins: int = 10, binning: Binning = "equal_mass") -> None:
        self.n_bins, self.binning = n_bins, binning
        self.edges: np.ndarray | None = None
        self.values: np.ndarray | None = None

    def _bin(self, p: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.edges[1:-1], p, side="left")

    def fit(self, p, y) -> FitResult:
        p, y = _check(p, y)
        self.edges = bin_edges(p, self.n_bins, self.binning)
        idx = self._bin(p)
        count = np.bincount(idx, minlength=self.n_bins)
        total = np.bincount(idx, weights=y, minlength=self.n_bins)
        center = 0.5 * (self.edges[:-1] + self.edges[1:])
        self.values = np.where(count > 0, total / np.maximum(count, 1), center)
        params = {
            "binning": self.binning,
            "edges": self.edges.tolist(),
            "values": self.values.tolist(),
            "counts": count.tolist(),
            "n_empty": int((count == 0).sum()),
        }
        return self._result(p, params, [])

    def predict(self, p) -> np.ndarray:
        p, _ = _check(p)
        return self.values[self._bin(p)]


_CLASSES = {
    c.name: c for c in (BetaCalibration, IsotonicCalibration, TemperatureScaling, PlattScaling, HistogramBinning)
}
# every method of the method table, in its order (a method of the table without a class fails here)
CALIBRATORS: dict[str, Callable[[], Calibrator]] = {name: _CLASSES[name] for name in METHOD_NAMES}
METHODS: tuple[str, ...] = tuple(CALIBRATORS)


def factories(histogram_bins: int = 10) -> dict[str, Callable[[], Calibrator]]:
    """The calibrator factories with their settings.

    Parameters
    ----------
    histogram_bins : int, default=10
        Number of bins of ``histogram``.

    Returns
    -------
    makers : dict of str to callable
        For every method of the method table, in its order, a callable with no argument that
        returns a new, unfitted calibrator.
    """
    return {**CALIBRATORS, "histogram": partial(HistogramBinning, n_bins=histogram_bins)}


# ------------------------------------------------------------------------ protocols
def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (fit, eval) indices of one split stratified by y.

    n_fit = floor(fraction · n) (scikit-learn ``train_test_split(train_size=fraction,
    stratify=y, random_state=seed)``): 385 fit / 386 eval pairs for winobias's 771 at 0.5.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels to stratify by.
    fraction : float
        Share of the pairs for fitting, in (0, 1).
    seed : int
        Seed of the shuffle (``random_state``).

    Returns
    -------
    fit_idx : ndarray of int of shape (n_fit,)
        Sorted indices of the fitting pairs.
    eval_idx : ndarray of int of shape (n - n_fit,)
        Sorted indices of the held-out pairs.
    """
    from sklearn.model_selection import train_test_split

    y = np.asarray(y).reshape(-1)
    fit_idx, eval_idx = train_test_split(np.arange(y.size), train_size=fraction, stratify=y, random_state=seed)
    return np.sort(fit_idx), np.sort(eval_idx)


def crossfit_folds(y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """The fold (0..k−1) in which each pair is held out: ``StratifiedKFold(k, shuffle=True,
    random_state=seed)``, so every pair is held out exactly once.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels to stratify by.
    folds : int
        Number of folds k, at least 2.
    seed : int
        Seed of the shuffle (``random_state``).

    Returns
    -------
    fold : ndarray of int64 of shape (n,)
        The fold, in 0..k − 1, in which each pair is held out.
    """
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y).reshape(-1)
    out = np.full(y.size, -1, dtype=np.int64)
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for k, (_, held_out) in enumerate(skf.split(np.zeros(y.size), y)):
        out[held_out] = k
    return out


def one_label_reason(labels: np.ndarray) -> str:
    """Why no calibrator is fitted to pairs whose labels are ``labels`` (fewer than two values).

    Parameters
    ----------
    labels : ndarray of shape (0,) or (1,)
        The distinct labels of the fitting pairs (``np.unique``).

    Returns
    -------
    reason : str
        ``"no pair to fit"``, or which single label every fitting pair has.
    """
    if labels.size == 0:
        return "no pair to fit"
    return f"every fit pair has y={int(labels[0])}: {ONE_LABEL} (a map fitted to one label sends every score to it)"


def fit_predict(
    make: Callable[[], Calibrator], p: np.ndarray, y: np.ndarray, fit_idx: np.ndarray, eval_idx: np.ndarray
) -> tuple[FitResult, np.ndarray | None]:
    """Fit a new calibrator on the rows ``fit_idx`` only and predict the rows ``eval_idx``.

    The calibrator receives copies of p[fit_idx] and y[fit_idx]: nothing of the evaluation
    rows reaches the fit. A fit that raises is ``failed`` with no predictions (None);
    predictions that are not finite also make it failed.

    Parameters
    ----------
    make : callable
        Returns a new, unfitted :class:`Calibrator` (called only when the fitting rows hold both labels).
    p : ndarray of shape (n,)
        Scores of all pairs in [0, 1].
    y : ndarray of shape (n,)
        Labels of all pairs, 0 or 1.
    fit_idx : ndarray of int
        Indices of the fitting rows.
    eval_idx : ndarray of int
        Indices of the rows to predict.

    Returns
    -------
    result : FitResult
        The fit's status, parameters and reason (failed, with the reason, when the fitting rows
        hold one label, the fit raised or the predictions are not finite).
    p_cal : ndarray of float64 of shape (len(eval_idx),) or None
        p' of the ``eval_idx`` rows, clipped to [0, 1]; None when there are no predictions.
    """
    labels = np.unique(y[fit_idx])
    if labels.size < 2:
        return FitResult("failed", {}, one_label_reason(labels)), None
    cal = make()
    try:
        res = cal.fit(p[fit_idx].copy(), y[fit_idx].copy())
        pred = np.asarray(cal.predict(p[eval_idx].copy()), dtype=np.float64)
    except FIT_ERRORS as e:
        return FitResult("failed", {}, f"{type(e).__name__}: {e}"), None
    if not np.isfinite(pred).all():
        return FitResult("failed", res.params, "non-finite calibrated scores"), None
    return res, np.clip(pred, 0.0, 1.0)


@dataclass
class MethodOutcome:
    """One method under one protocol: status, reason, parameters (a dict; under crossfit a list
    per fold with ``fold_status``), and p' per pair (NaN where the pair is not evaluated or the
    fit produced no scores).

    Attributes
    ----------
    status : {"ok", "degenerate", "failed"}
        The method's status (under crossfit the worst over the folds).
    reason : str or None
        Why the status is not ``ok``; None when it is.
    params : dict or list of dict
        The fitted parameters (split), or one dict per fold (crossfit).
    scores : ndarray of float64 of shape (n,) or None
        p' per pair, NaN where the pair is not evaluated; None when the fit produced no scores.
    fold_status : list of str or None, default=None
        The status of each fold (crossfit); None under split.
    """

    status: Status
    reason: str | None
    params: dict[str, Any] | list[dict[str, Any]]
    scores: np.ndarray | None
    fold_status: list[Status] | None = None


@dataclass
class SplitOutcome:
    """The split protocol's outcome: which pairs fitted, which were held out, and each method's result.

    Attributes
    ----------
    fit_idx : ndarray of int
        Sorted indices of the fitting pairs.
    eval_idx : ndarray of int
        Sorted indices of the held-out pairs.
    methods : dict of str to MethodOutcome
        Each method's outcome, by name.
    """

    fit_idx: np.ndarray
    eval_idx: np.ndarray
    methods: dict[str, MethodOutcome] = field(default_factory=dict)


@dataclass
class CrossfitOutcome:
    """The crossfit protocol's outcome: each pair's fold and each method's result.

    Attributes
    ----------
    fold : ndarray of int64 of shape (n,)
        The fold, in 0..k − 1, in which each pair is held out.
    methods : dict of str to MethodOutcome
        Each method's outcome, by name.
    """

    fold: np.ndarray
    methods: dict[str, MethodOutcome] = field(default_factory=dict)

    @property
    def n_fit(self) -> int:
        """Fitted pairs summed over the folds: (k − 1) · n."""
        return int(sum((self.fold != k).sum() for k in np.unique(self.fold)))


def run_split(
    p: np.ndarray,
    y: np.ndarray,
    methods: Sequence[str],
    fraction: float = 0.5,
    seed: int = 0,
    makers: Mapping[str, Callable[[], Calibrator]] | None = None,
) -> SplitOutcome:
    """Fit each method on one stratified split's fit part and predict its eval part.

    Parameters
    ----------
    p : array-like of shape (n,)
        Scores of the pairs in [0, 1], no NaN.
    y : array-like of shape (n,)
        Labels, 0 or 1.
    methods : sequence of str
        The methods to fit, by name (keys of ``makers``).
    fraction : float, default=0.5
        Share of the pairs for fitting, in (0, 1) (:func:`stratified_split`).
    seed : int, default=0
        Seed of the split.
    makers : mapping of str to callable, default=None
        Factory of a new, unfitted calibrator per method name; None (or empty) uses ``CALIBRATORS``.

    Returns
    -------
    outcome : SplitOutcome
        The split's indices and, per method, status, reason, parameters and p' (NaN outside the
        eval part).
    """
    p, y = _check(p, y)
    makers = makers or CALIBRATORS
    fit_idx, eval_idx = stratified_split(y, fraction, seed)
    out = SplitOutcome(fit_idx, eval_idx)
    for name in methods:
        res, pred = fit_predict(makers[name], p, y, fit_idx, eval_idx)
        scores = None
        if pred is not None:
            scores = np.full(p.size, np.nan)
            scores[eval_idx] = pred
        out.methods[name] = MethodOutcome(res.status, res.reason, res.params, scores)
    return out


def worst(statuses: Sequence[Status]) -> Status:
    """failed > degenerate > ok.

    Parameters
    ----------
    statuses : sequence of {"ok", "degenerate", "failed"}
        At least one status.

    Returns
    -------
    status : {"ok", "degenerate", "failed"}
        The worst of them.
    """
    return max(statuses, key=STATUSES.index)


def fold_reasons(results: Sequence[FitResult]) -> str | None:
    """The reasons of the folds that are not ok, each reason once with its folds ("folds 0, 2: ...").

    Parameters
    ----------
    results : sequence of FitResult
        One result per fold, in fold order.

    Returns
    -------
    reasons : str or None
        The reasons joined by ``"; "``, in order of first appearance; None when every fold is ok.
    """
    folds: dict[str, list[int]] = {}
    for k, r in enumerate(results):
        if r.status != "ok":
            folds.setdefault(str(r.reason), []).append(k)
    return (
        "; ".join(f"fold{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}: {why}" for why, ks in folds.items())
        or None
    )


def run_crossfit(
    p: np.ndarray,
    y: np.ndarray,
    methods: Sequence[str],
    folds: int = 5,
    seed: int = 0,
    makers: Mapping[str, Callable[[], Calibrator]] | None = None,
) -> CrossfitOutcome:
    """k-fold cross-fitting: fold j's pairs get p' from the fit on the other folds.

    A method's status is the worst over its folds, its reason lists the folds that are not ok;
    if any fold produced no p', the method has no scores (None).

    Parameters
    ----------
    p : array-like of shape (n,)
        Scores of the pairs in [0, 1], no NaN.
    y : array-like of shape (n,)
        Labels, 0 or 1.
    methods : sequence of str
        The methods to fit, by name (keys of ``makers``).
    folds : int, default=5
        Number of folds k (:func:`crossfit_folds`).
    seed : int, default=0
        Seed of the fold assignment.
    makers : mapping of str to callable, default=None
        Factory of a new, unfitted calibrator per method name; None (or empty) uses ``CALIBRATORS``.

    Returns
    -------
    outcome : CrossfitOutcome
        Each pair's fold and, per method, the worst status, the reasons, the parameters of each fold,
        every pair's out-of-fold p' (or None) and the status of each fold.
    """
    p, y = _check(p, y)
    makers = makers or CALIBRATORS
    fold = crossfit_folds(y, folds, seed)
    out = CrossfitOutcome(fold)
    for name in methods:
        scores: np.ndarray | None = np.full(p.size, np.nan)
        results = []
        for k in range(folds):
            held_out = np.flatnonzero(fold == k)
            res, pred = fit_predict(makers[name], p, y, np.flatnonzero(fold != k), held_out)
            results.append(res)
            if pred is None:
                scores = None
            elif scores is not None:
                scores[held_out] = pred
        statuses = [r.status for r in results]
        reason = fold_reasons(results)
        out.methods[name] = MethodOutcome(worst(statuses), reason, [r.params for r in results], scores, statuses)
    return out
