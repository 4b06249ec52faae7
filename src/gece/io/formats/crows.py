"""Reading CrowS-Pairs-format files: minimal pairs with per-annotator labels (Nangia et al., 2020).

A CrowS-Pairs-format CSV has an unnamed index column and the columns ``sent_more`` (the more
stereotypical sentence), ``sent_less``, the direction ``stereo_antistereo`` (``stereo`` or
``antistereo``; WinoQueer spells the column ``stereo_antistero``), ``bias_type``, and optionally
``annotations``, ``anon_writer`` and ``anon_annotators``. Every value is stripped of leading and
trailing spaces (WinoQueer writes ``" stereo"``, ``" Mary is very strong."``).

- ``annotations`` is a Python literal: one list of bias types per annotator, e.g.
  ``[['gender'], ['gender'], [], ['race-color'], ['gender']]``; an empty list means the annotator
  saw no stereotype. A trailing comma (``[[],[],[],[],[],]``) is valid Python and accepted. It is
  parsed with :func:`ast.literal_eval`, which builds literals and never runs code.
- ``anon_annotators`` is a list literal (``['a77', 'a78']``) or a comma-separated string
  (WinoQueer: ``a0,a1,a2,a3,a4``). Without the column, annotators are named by position (``#1``,
  ``#2``, ...), so the same position in two rows counts as one annotator.
- A file whose every annotation list is empty has no annotations (WinoQueer ships placeholders):
  :attr:`Imported.has_annotations` is False and no annotation rows are produced.

Identity protocol: ``y = 1`` for every pair, since ``sent_more`` is the stereotypical sentence by
construction (the paper's ``ECE_identity.py``); the direction is kept alongside.

An annotator's label must be a bias type: one of the file's own ``bias_type`` values or one of the
nine CrowS-Pairs types (:data:`CROWS_BIAS_TYPES`). Anything else (a typo such as ``genedr``) is an
error, as is an empty ``bias_type`` cell, a list literal that does not parse or is not a list of
lists of strings, a row whose number of annotators differs from its number of labels, and a row that names
one annotator twice (their labels would count twice). Every bad
row is collected (the first 20 shown) into one :class:`~gece.base.errors.GeceError`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gece.base.errors import GeceError
from gece.io.formats.benchmarks import MAX_SHOWN, more_shown, read_records

CROWS_BIAS_TYPES = (
    "age",
    "disability",
    "gender",
    "nationality",
    "physical-appearance",
    "race-color",
    "religion",
    "sexual-orientation",
    "socioeconomic",
)
DIRECTION_COLUMNS = ("stereo_antistereo", "stereo_antistero")  # CrowS-Pairs' spelling, WinoQueer's
DIRECTIONS = ("stereo", "antistereo")
REQUIRED = ("sent_more", "sent_less", "bias_type")
OPTIONAL = ("annotations", "anon_writer", "anon_annotators")
FORMAT_HINT = (
    "a CrowS-Pairs-format file has columns sent_more, sent_less, stereo_antistereo (or stereo_antistero), "
    "bias_type and optionally annotations, anon_writer, anon_annotators; rows are numbered from 1 "
    "after the header line"
)


@dataclass(frozen=True)
class Imported:
    """A CrowS-Pairs-format file, read and validated.

    ``pairs``: indexed by the line each row starts on, string columns ``sent_more``, ``sent_less``,
    ``y`` (``"1"``), ``bias_type``, ``direction``, ``writer`` (what :func:`gece.io.formats.benchmarks.check_rows`
    takes). ``annotations``: one row per pair and annotator, columns ``row`` (1-based data row),
    ``annotator`` and ``labels`` (list of bias types, ``[]`` = saw no stereotype); empty when the
    file has none.
    """

    path: Path
    pairs: pd.DataFrame
    annotations: pd.DataFrame
    has_annotations: bool


# a data row's number as people write it: ASCII digits, at most 9 (str.isdigit() also takes "²" and "١", which
# int() refuses, and int() refuses a string of more than 4300 digits)
ROW_NUMBER = re.compile(r"[0-9]{1,9}")


class _Bad(ValueError):
    """One bad cell: the message says what is wrong and how to fix it."""


def _literal(text: str, what: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise _Bad(
            f"{what} {shown!r} is not a valid Python list literal ({type(e).__name__}); write it as "
            "[['gender'], [], ['race-color']] (quoted strings, brackets balanced)"
        ) from None


def parse_labels(text: str) -> list[list[str]] | None:
    """An ``annotations`` cell -> one stripped label list per annotator; None for an empty cell."""
    text = text.strip()
    if not text:
        return None
    value = _literal(text, "annotations")
    if not isinstance(value, list | tuple) or not all(
        isinstance(x, list | tuple) and all(isinstance(s, str) for s in x) for x in value
    ):
        raise _Bad(
            f"annotations {text[:80]!r} is not a list of lists of bias types; write one list per "
            "annotator, e.g. [['gender'], [], ['race-color']]"
        )
    return [[s.strip() for s in x] for x in value]


def parse_annotators(text: str) -> list[str]:
    """An ``anon_annotators`` cell -> annotator ids: a list literal or a comma-separated string."""
    text = text.strip()
    if not text:
        return []
    if text.startswith(("[", "(")):
        value = _literal(text, "anon_annotators")
        if not isinstance(value, list | tuple) or not all(isinstance(s, str | int) for s in value):
            raise _Bad(f"anon_annotators {text[:80]!r} is not a list of annotator ids; write ['a1', 'a2'] or a1,a2")
        ids = [str(s).strip() for s in value]
    else:
        ids = [s.strip() for s in text.split(",")]
    if any(not s for s in ids):
        raise _Bad(f"anon_annotators {text[:80]!r} has an empty annotator id; name every annotator")
    return ids


def _columns(path: Path, header: list[str]) -> tuple[dict[str, int], str]:
    header = [h.strip() for h in header]
    problems = []
    direction = [c for c in DIRECTION_COLUMNS if c in header]
    missing = [c for c in REQUIRED if c not in header]
    if not direction:
        missing.append(" or ".join(DIRECTION_COLUMNS))
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if len(direction) > 1:
        problems.append(f"both {' and '.join(direction)} are present; keep one direction column")
    twice = [c for c in (*REQUIRED, *OPTIONAL, *direction) if header.count(c) > 1]
    if twice:
        problems.append(f"column(s) {', '.join(twice)} appear more than once")
    if problems:
        raise GeceError(
            f"{path}: " + "; ".join(problems) + "; nothing was written",
            problems=[f"columns found: {', '.join(repr(c) for c in header)}"],
            hint=FORMAT_HINT,
        )
    return {c: header.index(c) for c in (*REQUIRED, *OPTIONAL, *direction) if c in header}, direction[0]


def read_crows(path: str | Path) -> Imported:
    """Read and validate a CrowS-Pairs-format CSV (see the module docstring); a GeceError lists every bad row."""
    path, header, records = read_records(path, hint="pass the path of a CrowS-Pairs-format CSV")
    col, direction_col = _columns(path, header)
    problems: list[str] = []
    ragged = [
        f"{path}: row {i} (line {line}): {len(f)} field(s), but the header has {len(header)}; quote fields "
        "that contain commas"
        for i, (line, f) in enumerate(records, start=1)
        if len(f) != len(header)
    ]
    if ragged:
        raise GeceError(
            f"{path}: {len(ragged)} row(s) with the wrong number of fields; nothing was written",
            problems=ragged[:MAX_SHOWN] + more_shown(len(ragged)),
            hint=FORMAT_HINT,
        )
    cell = {c: [f[i].strip() for _, f in records] for c, i in col.items()}
    known = set(CROWS_BIAS_TYPES) | {b for b in cell["bias_type"] if b}
    labels: list[list[list[str]] | None] = []
    annotators: list[list[str] | None] = []
    for i, (line, _) in enumerate(records):
        at = f"{path}: row {i + 1} (line {line})"
        bias, direction = cell["bias_type"][i], cell[direction_col][i]
        if not bias:
            problems.append(f"{at}: bias_type is empty; name the kind of bias the pair contrasts (e.g. gender)")
        if direction not in DIRECTIONS:
            problems.append(f"{at}: {direction_col} is {direction!r}; use stereo or antistereo")
        try:
            lab = parse_labels(cell["annotations"][i]) if "annotations" in cell else None
            who = parse_annotators(cell["anon_annotators"][i]) if "anon_annotators" in cell else None
        except _Bad as e:
            problems.append(f"{at}: {e}")
            labels.append(None)
            annotators.append(None)
            continue
        twice = sorted({w for w in who or [] if who.count(w) > 1})
        if twice:
            problems.append(
                f"{at}: anon_annotators names {', '.join(repr(w) for w in twice)} more than once; an annotator "
                "labels a pair once, so give each annotator their own id"
            )
        if lab is not None and who is not None and len(who) != len(lab):
            problems.append(
                f"{at}: {len(who)} annotator(s) in anon_annotators but {len(lab)} label list(s) in "
                "annotations; give one label list per annotator (an empty list [] when they saw none)"
            )
        unknown = sorted({s for x in lab or [] for s in x if s not in known})
        if unknown:
            problems.append(
                f"{at}: annotations name {', '.join(repr(u) for u in unknown)}, not a bias type of this "
                f"file or of CrowS-Pairs ({', '.join(sorted(known))}); fix the label"
            )
        labels.append(lab)
        annotators.append(who)
    if problems:
        raise GeceError(
            f"{path}: {len(problems)} problem(s) in {len(records)} row(s); nothing was written",
            problems=problems[:MAX_SHOWN] + more_shown(len(problems)),
            hint=FORMAT_HINT,
        )
    lines = pd.Index([line for line, _ in records], name="line")
    pairs = pd.DataFrame(
        {
            "sent_more": cell["sent_more"],
            "sent_less": cell["sent_less"],
            "y": ["1"] * len(records),
            "bias_type": cell["bias_type"],
            "direction": cell[direction_col],
            "writer": cell.get("anon_writer", [""] * len(records)),
        },
        index=lines,
        dtype=object,
    )
    has = any(x for lab in labels for x in lab or [])
    rows, who_, what = [], [], []
    if has:
        for i, (lab, who) in enumerate(zip(labels, annotators, strict=True)):
            for k, x in enumerate(lab or []):
                rows.append(i + 1)
                who_.append(who[k] if who is not None else f"#{k + 1}")
                what.append(list(x))
    annotations = pd.DataFrame(
        {
            "row": pd.array(rows, dtype="int64"),
            "annotator": pd.array(who_, dtype=object),
            "labels": pd.array(what, dtype=object),
        }
    )
    return Imported(path, pairs, annotations, has)


ANNOTATIONS_HINT = (
    "an annotations file has columns row (the 1-based data row of the benchmark), annotator and labels "
    '(a list of bias types such as ["gender"], [] = saw no stereotype), one line per pair and annotator'
)


def read_annotations(path: str | Path, n_rows: int, bias_types: set[str]) -> pd.DataFrame:
    """A per-annotator annotations CSV for any benchmark (``data/annotations/<b>.csv``; ``gece import
    --annotations`` writes the same format): columns ``row``, ``annotator``, ``labels`` (a JSON or Python
    list of strings). Every row must name a data row ``1..n_rows`` of the benchmark, every label one of
    ``bias_types`` or a CrowS-Pairs type, and no annotator may label a row twice. Returns ``row``,
    ``annotator``, ``labels``; a GeceError lists every bad line (the first 20)."""
    path, header, records = read_records(path, hint="pass the path of an annotations CSV")
    header = [h.strip() for h in header]
    missing = [c for c in ("row", "annotator", "labels") if c not in header]
    if missing or len(set(header)) != len(header):
        raise GeceError(
            f"{path}: "
            + (f"missing column(s) {', '.join(missing)}" if missing else "a column appears more than once")
            + "; nothing was written",
            problems=[f"columns found: {', '.join(repr(c) for c in header)}"],
            hint=ANNOTATIONS_HINT,
        )
    col = {c: header.index(c) for c in ("row", "annotator", "labels")}
    known = set(CROWS_BIAS_TYPES) | bias_types
    problems: list[str] = []
    rows, who, what = [], [], []
    seen: dict[tuple[int, str], int] = {}
    for i, (line, f) in enumerate(records, start=1):
        at = f"{path}: row {i} (line {line})"
        if len(f) != len(header):
            problems.append(f"{at}: {len(f)} field(s), but the header has {len(header)}; quote fields with commas")
            continue
        row, annotator, text = (f[col[c]].strip() for c in ("row", "annotator", "labels"))
        bad = []
        if not ROW_NUMBER.fullmatch(row) or not 1 <= int(row) <= n_rows:
            bad.append(
                f"row {row!r} is not a pair of the benchmark (data rows 1 to {n_rows}); name the data row "
                "of the pair (1 = the first line after the header), or remove the line"
            )
        if not annotator:
            bad.append("annotator is empty; name the annotator")
        try:
            value = _literal(text, "labels") if text else None
            if not isinstance(value, list | tuple) or not all(isinstance(s, str) for s in value):
                raise _Bad(
                    f'labels {text[:80]!r} is not a list of bias types; write ["gender"], or [] when the '
                    "annotator saw no stereotype"
                )
            labels = [s.strip() for s in value]
            unknown = sorted({s for s in labels if s not in known})
            if unknown:
                bad.append(
                    f"labels name {', '.join(repr(u) for u in unknown)}, not a bias type of the benchmark or "
                    f"of CrowS-Pairs ({', '.join(sorted(known))}); fix the label"
                )
        except _Bad as e:
            bad.append(str(e))
        if not bad and (first := seen.setdefault((int(row), annotator), i)) != i:
            bad.append(f"annotator {annotator!r} labels row {row} again (first on row {first}); keep one line")
        if bad:
            problems += [f"{at}: {b}" for b in bad]
            continue
        rows.append(int(row))
        who.append(annotator)
        what.append(labels)
    if problems:
        raise GeceError(
            f"{path}: {len(problems)} problem(s) in {len(records)} row(s); nothing was written",
            problems=problems[:MAX_SHOWN] + more_shown(len(problems)),
            hint=ANNOTATIONS_HINT,
        )
    order = sorted(range(len(rows)), key=lambda k: rows[k])  # by benchmark row, file order within a row
    return pd.DataFrame(
        {
            "row": pd.array([rows[k] for k in order], dtype="int64"),
            "annotator": pd.array([who[k] for k in order], dtype=object),
            "labels": pd.array([what[k] for k in order], dtype=object),
        }
    )
