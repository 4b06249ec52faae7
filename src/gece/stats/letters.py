"""Compact letter display: which items are not distinguishable after a multiple-test correction.

Given k items in display order and a symmetric boolean matrix ``differ[i, j]`` (the pair's test is significant
after Holm's correction), the display gives each item a string of letters such that two items **share a letter
exactly when they do not differ**. Method: Piepho's insert-absorb algorithm (H.-P. Piepho, "An algorithm for a
letter-based representation of all-pairwise comparisons", J. Comput. Graph. Stat. 13(2), 2004, 456-466), the one
R's ``multcompView::multcompLetters`` uses:

- start with one letter column holding every item;
- *insert*: for each differing pair (i, j), every column holding both is split into a copy without i and a copy
  without j;
- *absorb*: a column whose items are a subset of another column's is dropped (after each insertion).

The columns left are the maximal groups of mutually indistinguishable items; each gets a letter, ``a`` for the
column holding the earliest item in display order (so, in a sorted figure, ``a`` marks the group of the first).
A pair with no test (a missing comparison) is treated as not differing.
"""

from __future__ import annotations

import string

import numpy as np

LETTERS = string.ascii_lowercase


def _absorb(columns: np.ndarray) -> np.ndarray:
    """Drop duplicate columns and every column whose items are a subset of another's (columns: items × groups)."""
    columns = np.unique(columns, axis=1)
    # inside[a, b]: column a's items all lie in column b
    inside = ~np.any(columns[:, :, None] & ~columns[:, None, :], axis=0)
    np.fill_diagonal(inside, False)
    return columns[:, ~inside.any(axis=1)]


def letter_columns(differ: np.ndarray) -> np.ndarray:
    """The insert-absorb groups of ``differ`` (k × k, symmetric): a boolean items × groups matrix whose columns
    are in the order of their earliest item."""
    differ = np.asarray(differ, dtype=bool)
    k = differ.shape[0]
    if differ.shape != (k, k) or not np.array_equal(differ, differ.T):
        raise ValueError("differ must be a square symmetric matrix")
    columns = np.ones((k, 1), dtype=bool)
    for i, j in zip(*np.nonzero(np.triu(differ, 1)), strict=True):  # each differing pair once
        both = columns[i] & columns[j]
        if not both.any():
            continue
        split_i, split_j = columns[:, both].copy(), columns[:, both].copy()
        split_i[i], split_j[j] = False, False
        columns = _absorb(np.hstack([columns[:, ~both], split_i, split_j]))
    first = np.argmax(columns, axis=0)  # the earliest item of each column (every column holds one)
    order = np.lexsort((np.arange(columns.shape[1]), first))
    return columns[:, order]


def compact_letters(differ: np.ndarray) -> list[str]:
    """Each item's letters (``"a"``, ``"ab"``, …): two items share a letter exactly when they do not differ."""
    columns = letter_columns(differ)
    if columns.shape[1] > len(LETTERS):
        raise ValueError(f"{columns.shape[1]} groups: more than {len(LETTERS)} letters")
    return ["".join(LETTERS[g] for g in np.flatnonzero(row)) for row in columns]
