"""Labels and agreement from per-annotator annotations (pure numpy; reads no files).

Each pair ``i`` has a writer's bias type ``b_i`` and label ``w_i`` (1 under the identity protocol:
the writer wrote ``sent_more`` as the stereotype) and ``n_i`` annotators; annotator ``j`` gives a set
of bias types ``L_ij`` (empty: saw no stereotype), as in CrowS-Pairs' validation (Nangia et al.,
2020, §3).

- **Support** (:func:`recognises`): ``s_ij = 1`` when ``b_i ∈ L_ij``: the annotator recognised the
  writer's bias type. ``k_i = Σ_j s_ij`` annotators support the pair.
- **Soft label** (:func:`soft_labels`): ``y_soft_i = k_i / n_i`` (undefined when ``n_i = 0``).
- **Hard label** (:func:`hard_labels`, ``annotate.rule: majority``): ``1`` when ``2 k_i > n_i``, ``0`` when
  ``2 k_i < n_i``; a tie (``2 k_i = n_i``) takes the writer's label ``w_i`` (tie ``writer``) or none
  (tie ``drop``).
- **Krippendorff's alpha** (:func:`krippendorff_alpha`, nominal metric; Krippendorff 2011,
  "Computing Krippendorff's Alpha-Reliability", §C). From the items × categories count matrix
  ``N`` (``N_uc`` = annotators of item ``u`` who chose ``c``), over the items with ``m_u = Σ_c N_uc ≥ 2``
  ("pairable" values): ``n = Σ_u m_u``, ``n_c = Σ_u N_uc``, observed agreement
  ``O = Σ_u (Σ_c N_uc² − m_u) / (m_u − 1)`` (the diagonal of the coincidence matrix), and
  ``α = 1 − (n − 1)(n − O) / (n² − Σ_c n_c²)``. Undefined when every value is one category.
  Missing labels (items with fewer annotators, annotators who skipped items) are allowed.
- **Fleiss' kappa** (:func:`fleiss_kappa`; Fleiss 1971, "Measuring nominal scale agreement among
  many raters", eqs. 2–9): ``P_u = (Σ_c N_uc² − m_u) / (m_u (m_u − 1))``, ``P̄`` their mean over the
  items, ``p_c = n_c / n``, ``P_e = Σ_c p_c²`` and ``κ = (P̄ − P_e) / (1 − P_e)``. Fleiss assumes the
  same number of raters per item (CrowS-Pairs: 5); with unequal ``m_u`` this is the usual
  generalisation (each item's own ``m_u``), stated rather than hidden.

Both are computed on two codings of each label: **binary** (``s_ij``, does the annotator support the
writer's bias type) and **nominal** (the label set as one category: ``none``, a bias type, or the
sorted types joined by ``+``).

- **Agreement with the majority** (:func:`annotator_agreement`): annotator ``j``'s share of their
  labelled items with a hard label where ``s_ij = y_hard_i`` (their own vote included, as in a
  leave-in majority), summarised over annotators by quantiles.
- **Vote shares** (:func:`vote_shares`): the number of pairs with ``k`` of ``n`` supporting, for
  every ``k = 0..n`` of each annotator count ``n`` present (``0/5`` ... ``5/5`` on CrowS-Pairs).

The `krippendorff` package (Castro, PyPI) is used only by the tests, as an independent cross-check
of :func:`krippendorff_alpha` (docs/annotations.md says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

NONE = "none"  # the nominal category of an empty label set
Tie = Literal["writer", "drop"]


# ----------------------------------------------------------------------------- coding labels
def recognises(labels: Sequence[Sequence[str]], bias_type: Sequence[str]) -> np.ndarray:
    """``s_ij``: whether each label set contains the writer's bias type of its pair (bool array)."""
    return np.fromiter((b in set(lab) for lab, b in zip(labels, bias_type, strict=True)), dtype=bool, count=len(labels))


def nominal_category(labels: Sequence[Sequence[str]]) -> list[str]:
    """Each label set as one category: ``none``, the bias type, or the sorted types joined by ``+``."""
    return ["+".join(sorted(set(lab))) if len(lab) else NONE for lab in labels]


def codes(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Integer codes of ``values`` and the sorted categories they index."""
    cats, inverse = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return inverse.astype(np.int64), [str(c) for c in cats]


# ----------------------------------------------------------------------------- per-pair labels
def votes(item: np.ndarray, support: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n_i, k_i)`` per item from the long table (item index and support of each label)."""
    n = np.bincount(item, minlength=n_items).astype(np.int64)
    k = np.bincount(item, weights=support.astype(np.float64), minlength=n_items).round().astype(np.int64)
    return n, k


def soft_labels(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``k / n``; NaN where an item has no annotators."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, k / np.maximum(n, 1), np.nan)


def hard_labels(k: np.ndarray, n: np.ndarray, writer: np.ndarray, tie: Tie = "writer") -> np.ndarray:
    """The majority label: 1 if ``2k > n``, 0 if ``2k < n``, a tie -> ``writer`` (tie writer) or NaN (tie drop);
    NaN where ``n = 0``. Float array (NaN = no hard label)."""
    out = np.where(2 * k > n, 1.0, np.where(2 * k < n, 0.0, np.nan))
    ties = (2 * k == n) & (n > 0)
    if tie == "writer":
        out = np.where(ties, writer.astype(np.float64), out)
    return np.where(n > 0, out, np.nan)


def ties(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Items whose annotators split evenly."""
    return (2 * k == n) & (n > 0)


# ----------------------------------------------------------------------------- agreement
def count_matrix(item: np.ndarray, category: np.ndarray, n_items: int, n_categories: int) -> np.ndarray:
    """``N``: items × categories, ``N_uc`` = labels of item ``u`` in category ``c``."""
    flat = np.bincount(item * n_categories + category, minlength=n_items * n_categories)
    return flat.reshape(n_items, n_categories).astype(np.float64)


def _pairable(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = counts.sum(axis=1)
    keep = m >= 2
    return counts[keep], m[keep]


def krippendorff_alpha(counts: np.ndarray) -> float | None:
    """Krippendorff's alpha, nominal metric, from an items × categories count matrix (module docstring).

    None when undefined (fewer than two pairable values, or a single category among them)."""
    N, m = _pairable(np.asarray(counts, dtype=np.float64))
    n = float(m.sum())
    if n < 2:
        return None
    observed = float((((N * N).sum(axis=1) - m) / (m - 1)).sum())
    nc = N.sum(axis=0)
    expected = n * n - float((nc * nc).sum())
    if expected <= 0:
        return None
    return 1.0 - (n - 1.0) * (n - observed) / expected


def fleiss_kappa(counts: np.ndarray) -> float | None:
    """Fleiss' kappa from an items × categories count matrix (module docstring); items with fewer than
    two labels are left out. None when undefined (no such item, or a single category: ``P_e = 1``)."""
    N, m = _pairable(np.asarray(counts, dtype=np.float64))
    if len(m) == 0:
        return None
    p_item = ((N * N).sum(axis=1) - m) / (m * (m - 1))
    p_cat = N.sum(axis=0) / m.sum()
    p_e = float((p_cat * p_cat).sum())
    if p_e >= 1.0:
        return None
    return (float(p_item.mean()) - p_e) / (1.0 - p_e)


# ----------------------------------------------------------------------------- annotators, votes
def annotator_agreement(
    annotator: np.ndarray, support: np.ndarray, hard: np.ndarray, n_annotators: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per annotator (code ``0..n_annotators-1``): the share of their labels on items with a hard label
    (``hard`` per label, NaN = none) that equal it, and how many such labels. Share NaN where none."""
    has = ~np.isnan(hard)
    agree = has & (support.astype(np.float64) == hard)
    n = np.bincount(annotator[has], minlength=n_annotators)
    a = np.bincount(annotator[agree], minlength=n_annotators)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, a / np.maximum(n, 1), np.nan), n


def quantiles(values: np.ndarray) -> dict[str, float] | None:
    """min, quartiles, max and mean of the finite values; None when there are none."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    q = np.quantile(v, [0.0, 0.25, 0.5, 0.75, 1.0])
    return {
        "n": int(v.size),
        "min": float(q[0]),
        "q25": float(q[1]),
        "median": float(q[2]),
        "q75": float(q[3]),
        "max": float(q[4]),
        "mean": float(v.mean()),
    }


def vote_shares(k: np.ndarray, n: np.ndarray) -> dict[str, int]:
    """``{"k/n": pairs}`` for every ``k = 0..n`` of each annotator count ``n > 0`` present."""
    out: dict[str, int] = {}
    for total in np.unique(n[n > 0]):
        counts = np.bincount(k[n == total], minlength=int(total) + 1)
        out |= {f"{s}/{int(total)}": int(c) for s, c in enumerate(counts)}
    return out


# ----------------------------------------------------------------------------- everything at once
def derive(
    pair_ids: Sequence[str],
    bias_type: Sequence[str | None],
    writer: np.ndarray,
    label_pair: Sequence[str],
    label_annotator: Sequence[str],
    labels: Sequence[Sequence[str]],
    tie: Tie = "writer",
) -> tuple[dict[str, np.ndarray], dict]:
    """Per-pair labels and the agreement summary from a benchmark's pairs and its long annotation table.

    ``pair_ids``, ``bias_type`` (the writer's), ``writer`` (the writer's 0/1 label) describe the pairs;
    ``label_pair``, ``label_annotator``, ``labels`` one row per pair and annotator. Returns the columns
    of ``gece.io.schemas.pair_rows.AnnotatedPair`` as arrays (``y_soft``/``y_hard`` NaN = null) and the numbers of
    ``gece.io.schemas.annotation_report.AnnotationReport`` (without benchmark and rule). Every ``label_pair`` must be
    a pair id.
    """
    pair_ids = list(pair_ids)
    index = {p: i for i, p in enumerate(pair_ids)}
    item = np.fromiter((index[p] for p in label_pair), dtype=np.int64, count=len(label_pair))
    types = [bias_type[i] for i in item]
    support = recognises(labels, types)
    n, k = votes(item, support, len(pair_ids))
    hard = hard_labels(k, n, np.asarray(writer), tie)
    columns = {
        "pair_id": np.asarray(pair_ids, dtype=object),
        "n_annotators": n,
        "n_support": k,
        "y_soft": soft_labels(k, n),
        "y_hard": hard,
    }
    who, names = codes(list(label_annotator)) if len(item) else (np.zeros(0, np.int64), [])
    share, _ = annotator_agreement(who, support, hard[item], len(names))
    report: dict = {
        "n_pairs": len(pair_ids),
        "n_annotated": int((n > 0).sum()),
        "n_annotators": len(names),
        "n_labels": len(item),
        "support_rate": float(support.mean()) if len(item) else None,
        "n_hard": {
            "1": int((hard == 1).sum()),
            "0": int((hard == 0).sum()),
            "tie": int(ties(k, n).sum()),
            "none": int((n == 0).sum()),
        },
        "annotator_agreement": quantiles(share),
        "vote_shares": vote_shares(k, n),
    }
    if not len(item):
        reason = "the benchmark has no annotations"
        report |= {
            "alpha": {"binary": None, "nominal": None, "items": 0, "reason": reason},
            "kappa": {"binary": None, "nominal": None, "items": 0, "reason": reason},
            "reason": reason,
        }
        return columns, report
    nominal, cats = codes(nominal_category(labels))
    matrices = {
        "binary": count_matrix(item, support.astype(np.int64), len(pair_ids), 2),
        "nominal": count_matrix(item, nominal, len(pair_ids), len(cats)),
    }
    items = int((n >= 2).sum())
    for key, fn in (("alpha", krippendorff_alpha), ("kappa", fleiss_kappa)):
        values = {name: fn(N) for name, N in matrices.items()}
        undefined = [name for name, v in values.items() if v is None]
        reason = (
            f"undefined for {', '.join(undefined)}: fewer than two labels per pair, or a single category"
            if undefined
            else None
        )
        report[key] = {**values, "items": items, "reason": reason}
    report["reason"] = None
    return columns, report
