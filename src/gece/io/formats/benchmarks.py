"""Reading, validating and preparing pair benchmarks.

A benchmark is a CSV with columns ``sent_more``, ``sent_less``, ``y`` (1: ``sent_more`` is the
human-preferred reading, 0: ``sent_less``) and optionally ``bias_type``; other columns (such as
WinoBias' unnamed index) are ignored. Preparing a benchmark aligns the two sentences word by
word and records the words in which they differ (the targets), their character spans, their
gender group (:mod:`gece.io.formats.lexicon`) and whether the target ends the sentence.
"""

from __future__ import annotations

import csv
import difflib
import re
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Literal

import pandas as pd

from gece.base.errors import GeceError
from gece.io.files.inputs import iconv_hint, read_bytes, require_file
from gece.io.files.limits import limit
from gece.io.formats.lexicon import side_group
from gece.io.schemas.pair_rows import PreparedPair
from gece.io.settings.ids import ID_HELP, is_id
from gece.io.settings.sections import Cluster

REQUIRED = ("sent_more", "sent_less", "y")
OPTIONAL = ("bias_type",)
MAX_SHOWN = 20
WORD = re.compile(r"\w+(?:['’]\w+)*")

DuplicatePolicy = Literal["error", "keep", "drop"]


@dataclass(frozen=True)
class Word:
    text: str
    start: int
    end: int


def words(sentence: str) -> list[Word]:
    """Split a sentence into words (letters/digits, with inner apostrophes) with char spans."""
    return [Word(m.group(), m.start(), m.end()) for m in WORD.finditer(sentence)]


class AlignTooCostly(ValueError):
    """Aligning two sentences would take more steps than its budget (:func:`align`)."""

    def __init__(self, budget: int):
        super().__init__(budget)
        self.budget = budget


class CountedMatcher(difflib.SequenceMatcher):
    """difflib's matcher, same results, that stops once its longest-match searches would try more than ``budget``
    places: each search tries, for each word of side a in its range, every place side b has that word."""

    def __init__(self, a: list[str], b: list[str], budget: int):
        super().__init__(a=a, b=b, autojunk=False)
        self.budget, self.steps = budget, 0
        self.tries = [0]  # tries[i]: the places side b has words a[:i]
        for word in a:
            self.tries.append(self.tries[-1] + len(self.b2j.get(word, ())))

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None):
        ahi = len(self.a) if ahi is None else ahi
        self.steps += self.tries[ahi] - self.tries[alo] + 1
        if self.steps > self.budget:
            raise AlignTooCostly(self.budget)
        return super().find_longest_match(alo, ahi, blo, bhi)


@dataclass(frozen=True)
class Alignment:
    """Words in which two sentences differ: one list per side, in sentence order."""

    more: list[Word]
    less: list[Word]
    n_blocks: int
    last: bool  # the targets end both sentences (cloze-last)
    first: int  # 0-based index in sent_more's words where the first differing block starts


def align(sent_more: str, sent_less: str) -> Alignment:
    """Word-level alignment of two sentences (difflib on word lists, case-sensitive).

    Every non-equal block contributes its words on each side as targets. difflib's cost grows with the product
    of the two sentences' words where they repeat words (a sentence of one word repeated: the cube of its
    length), so the alignment has a budget of ``limit("align_steps")`` steps a word of the pair (at least 50 words
    counted) and raises :class:`AlignTooCostly` past it: the cost of a file stays linear in its size.
    """
    a, b = words(sent_more), words(sent_less)
    budget = limit("align_steps") * max(len(a) + len(b), 50)
    sm = CountedMatcher([w.text for w in a], [w.text for w in b], budget)
    more: list[Word] = []
    less: list[Word] = []
    blocks, first = 0, len(a)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        blocks += 1
        first = min(first, i1)
        more += a[i1:i2]
        less += b[j1:j2]
    last = bool(more and less and more[-1] == a[-1] and less[-1] == b[-1])
    return Alignment(more, less, blocks, last, first)


# ------------------------------------------------------------------------- reading
def _decode(path: Path, hint: str) -> str:
    raw = read_bytes(path, hint, "csv_bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    problems = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = line[e.start : e.start + 1].hex()
            row = f"row {lineno - 1} (line {lineno})" if lineno > 1 else "the header (line 1)"
            problems.append(f"{path}: {row}: undecodable text (byte 0x{bad} at column {e.start + 1})")
    raise GeceError(
        f"{path}: not valid UTF-8 text",
        problems=problems[:MAX_SHOWN] + _more(len(problems)),
        hint=iconv_hint(raw, path),
    )


def _more(n: int) -> list[str]:
    return [f"... and {n - MAX_SHOWN} more"] if n > MAX_SHOWN else []


def benchmark_id(path: str | Path) -> str:
    """The benchmark id of a CSV: its file name without ``.csv``, which must be a valid id."""
    name = Path(path).stem
    if not is_id(name):
        raise GeceError(
            f"{path}: the file name {name!r} is not a valid benchmark id (it names the prepared "
            "file and every result of the benchmark)",
            hint=f"rename the file; {ID_HELP}",
        )
    return name


# one CSV field: quoted (a doubled quote inside), or unquoted and free of quotes
_FIELD = re.compile(r'"(?:[^"]|"")*"|[^,"\r\n]*')
CSV_HINT = 'quote fields that contain commas, quotes or line breaks ("a, b"), and double the quotes inside them ("")'


def stray_quote(text: str) -> int | None:
    """The offset of the first quote inside an unquoted field of a CSV (``The cook said "he was late.``), or None.

    Python's csv module reads such a quote as text, where RFC 4180 allows a quote only in a quoted field, doubled;
    a stray quote is often the opening quote of a field whose closing one is missing. Read field by field."""
    if '"' not in text:
        return None
    pos, n = 0, len(text)
    while pos < n:
        end = _FIELD.match(text, pos).end()  # type: ignore[union-attr]  # matches at every offset (may be empty)
        if end < n and text[end] not in ",\r\n":
            return end if text[end] == '"' else end - 1  # a quote in the field, or the quote that closed it early
        pos = end + 1
    return None


def _nul_rows(path: Path, records: list[tuple[int, list[str]]]) -> list[str]:
    """A problem for each record holding a NUL character: no text has one, so the file is corrupt."""
    return [
        f"{path}: {'the header' if i == 0 else f'row {i}'} (line {line}): a NUL byte in field {k + 1}"
        for i, (line, fields) in enumerate(records)
        for k in [next((k for k, f in enumerate(fields) if "\x00" in f), None)]
        if k is not None
    ]


def _records(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the data records of a CSV, each record with the line it starts on.

    Blank lines are skipped; a malformed file (a stray quote, a field over the size limit) is an
    error naming the line, and so is a NUL byte (no text has one: the file is corrupt).
    """
    reader = csv.reader(StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    line = 1
    try:
        for fields in reader:
            if fields:
                records.append((line, fields))
            line = reader.line_num + 1
    except csv.Error as e:
        if "field larger than field limit" in str(e):
            raise GeceError(
                f"{path}: not a readable CSV: line {line}: a field of more than {csv.field_size_limit():,} "
                "characters, the most one field may hold",
                hint="a quote that is never closed makes the rest of the file one field: check the quoting on that "
                "line; a sentence is at most that long",
            ) from None
        raise GeceError(f"{path}: not a readable CSV: line {line}: {e}", hint=CSV_HINT) from e
    if (at := stray_quote(text)) is not None:
        start = text.rfind("\n", 0, at) + 1
        shown = text[start : text.find("\n", at) if "\n" in text[at:] else len(text)].rstrip("\r")
        shown = shown if len(shown) <= 80 else f"...{text[max(start, at - 40) : at + 20]}..."
        raise GeceError(
            f"{path}: not a readable CSV: line {text.count(chr(10), 0, at) + 1}, column {at - start + 1}: a quote "
            f"inside an unquoted field ({shown!r}); the field's opening quote is missing, or its quote is not doubled",
            hint=CSV_HINT,
        )
    if nul := _nul_rows(path, records):
        raise GeceError(
            f"{path}: {len(nul)} record(s) hold a NUL byte, which no text has: the file is corrupt or not text",
            problems=nul[:MAX_SHOWN] + _more(len(nul)),
            hint="get a fresh copy of the file (a NUL usually comes from an interrupted copy or a binary file)",
        )
    if not records:
        raise GeceError(
            f"{path}: the file is empty",
            hint="a benchmark needs a header line sent_more,sent_less,y and one row per pair",
        )
    (_, header), *rows = records
    return header, rows


def read_records(path: str | Path, hint: str) -> tuple[Path, list[str], list[tuple[int, list[str]]]]:
    """A CSV read strictly (size limit, UTF-8, quoting): (path, header, data records with their line)."""
    path = require_file(path, hint=hint, size_limit="csv_bytes")
    header, rows = _records(path, _decode(path, hint))
    return path, header, rows


def more_shown(n: int) -> list[str]:
    """``... and N more`` after the first :data:`MAX_SHOWN` problems of ``n``."""
    return _more(n)


def read_csv(path: str | Path) -> pd.DataFrame:
    """Read a benchmark CSV as strings, checking encoding, quoting and the required columns.

    Returns the columns gece uses (``sent_more``, ``sent_less``, ``y``, and ``bias_type`` when
    present), indexed by the line each row starts on; other columns are ignored.
    """
    path, header, rows = read_records(path, hint="pass the path of a benchmark CSV")
    used = [c for c in (*REQUIRED, *OPTIONAL) if c in header]
    missing = [c for c in REQUIRED if c not in header]
    twice = [c for c in used if header.count(c) > 1]
    if missing or twice:
        raise GeceError(
            f"{path}: "
            + "; ".join(
                ([f"missing column(s) {', '.join(missing)}"] if missing else [])
                + ([f"column(s) {', '.join(twice)} appear more than once"] if twice else [])
            ),
            problems=[f"columns found: {', '.join(repr(c) for c in header)}"],
            hint="a benchmark needs columns sent_more, sent_less and y (1 if sent_more is the "
            "human-preferred reading, else 0), once each; bias_type is optional",
        )
    ragged = [
        f"{path}: row {i} (line {line}): {len(fields)} field(s), but the header has {len(header)}"
        for i, (line, fields) in enumerate(rows, start=1)
        if len(fields) != len(header)
    ]
    if ragged:
        raise GeceError(
            f"{path}: {len(ragged)} row(s) with the wrong number of fields",
            problems=ragged[:MAX_SHOWN] + _more(len(ragged)),
            hint='quote fields that contain commas ("a, b"); rows are numbered from 1 after the header',
        )
    columns = {c: [fields[header.index(c)] for _, fields in rows] for c in used}
    return pd.DataFrame(columns, index=pd.Index([line for line, _ in rows], name="line"), dtype=object)


def check_rows(
    df: pd.DataFrame, source: str, duplicates: DuplicatePolicy = "error", imported: bool = False
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Validate every row of :func:`read_csv`'s frame (indexed by line). Returns (valid rows with a
    1-based ``row`` column, problems, warnings).

    Problems make the file invalid; the warning (one line on kept or dropped repeats) does not.
    ``imported``: a benchmark read from another format (:mod:`gece.io.formats.crows`), whose group is its
    ``bias_type``: the differing words need not name two gender groups, and a row that cannot form
    a scorable pair (empty or identical sentences, a side with no word of its own) is dropped with
    one warning instead of invalidating the file; its 1-based row is listed in ``out.attrs["dropped"]``.
    """
    problems: list[str] = []
    if df.empty:
        problems.append(f"{source}: no pairs: the file has a header line and no rows; add one row per pair")
    warnings: list[str] = []
    seen: dict[tuple[str, str], tuple[int, str]] = {}
    keep: list[int] = []
    unscorable: list[str] = []
    dropped: list[int] = []
    for i, (line, more, less, y) in enumerate(zip(df.index, df["sent_more"], df["sent_less"], df["y"], strict=True)):
        row = i + 1
        at = f"{source}: row {row} (line {line})"
        bad = []
        if not more.strip():
            bad.append("sent_more is empty; fill in both sentences")
        if not less.strip():
            bad.append("sent_less is empty; fill in both sentences")
        if y.strip() not in ("0", "1"):
            bad.append(f"y is {y!r}; use 1 if sent_more is the human-preferred reading, 0 if sent_less")
        if more.strip() and less.strip():
            if more == less:
                bad.append("sent_more and sent_less are identical; they must differ in the gendered word")
            else:
                try:
                    al = align(more, less)
                except AlignTooCostly as e:
                    problems.append(
                        f"{at}: the two sentences repeat words too often to be aligned word by word within "
                        f"{e.budget:,} steps ({limit('align_steps')} a word; a real pair needs at most 2 a word); "
                        "shorten them (a sentence of one word repeated), or raise the steps a word with "
                        "GECE_MAX_ALIGN_STEPS in the environment"
                    )
                    continue
                if not al.more or not al.less:
                    side = "sent_more" if not al.more else "sent_less"
                    what = (
                        "the sentences differ only in punctuation or spacing, not in a word"
                        if not al.more and not al.less
                        else f"{side} has no word of its own (the other sentence only adds words)"
                    )
                    bad.append(f"{what}; make the two sentences differ in at least one word on each side")
                elif not imported and (group := side_group([w.text for w in al.more])) == side_group(
                    [w.text for w in al.less]
                ):
                    shown = f"{' '.join(w.text for w in al.more)!r} vs {' '.join(w.text for w in al.less)!r}"
                    bad.append(
                        f"the sentences differ only in words of one group ({shown}: both {group!r}), so "
                        "the pair contrasts nothing; make the differing words name two groups (he/she, "
                        "man/woman)"
                    )
        if bad and imported and not any(b.startswith("y is") for b in bad):
            unscorable.append(f"row {row} (line {line}): {bad[0].split(';')[0]}")
            dropped.append(row)
            continue
        if not bad:
            key = (more, less)
            if key in seen:
                first, first_y = seen[key]
                if first_y != y.strip():
                    bad.append(
                        f"repeats row {first} with a different label (y={y.strip()} vs y={first_y}); "
                        "keep one row with the right label"
                    )
                elif duplicates == "error":
                    bad.append(
                        f"repeats row {first} (same sent_more, sent_less and y); delete the repeat, "
                        "or allow repeats (params prepare.duplicates, or --duplicates keep)"
                    )
                else:
                    warnings.append(f"row {row} repeats row {first}")
                    if duplicates == "drop":
                        continue
            else:
                seen[key] = (row, y.strip())
        if bad:
            problems += [f"{at}: {b}" for b in bad]
        else:
            keep.append(i)
    if warnings:
        action = "kept" if duplicates == "keep" else "dropped"
        shown = ", ".join(warnings[:5]) + (f", ... ({len(warnings) - 5} more)" if len(warnings) > 5 else "")
        warnings = [f"{source}: {len(warnings)} repeated pair(s) {action} (prepare.duplicates={duplicates}): {shown}"]
    if unscorable:
        warnings.append(
            f"{source}: {len(unscorable)} row(s) dropped: they cannot form a scorable pair: "
            + "; ".join(unscorable[:MAX_SHOWN])
            + (f"; ... ({len(unscorable) - MAX_SHOWN} more)" if len(unscorable) > MAX_SHOWN else "")
        )
    out = df.iloc[keep].copy()
    out.insert(0, "row", [i + 1 for i in keep])
    out.attrs["dropped"] = dropped
    return out, problems, warnings


def check_benchmark(path: str | Path, duplicates: DuplicatePolicy) -> tuple[pd.DataFrame, list[str], list[str], int]:
    """What a valid benchmark is, for ``gece validate``, ``gece prepare`` and the pipeline alike: the file
    read strictly (:func:`read_csv`) and every row checked (:func:`check_rows`) with the
    ``prepare.duplicates`` policy. Returns (valid rows, problems, warnings, rows read)."""
    df = read_csv(path)
    rows, problems, warnings = check_rows(df, str(path), duplicates)
    return rows, problems, warnings, len(df)


def load_benchmark(path: str | Path, duplicates: DuplicatePolicy = "error") -> tuple[pd.DataFrame, list[str]]:
    """Read and validate a benchmark; raise one GeceError listing every bad row (first 20).

    Returns the valid rows (``row``, ``sent_more``, ``sent_less``, ``y``, ``bias_type``) and
    the warnings.
    """
    rows, problems, warnings, n = check_benchmark(path, duplicates)
    if problems:
        raise GeceError(
            f"{path}: {len(problems)} problem(s) in {n} row(s); nothing was written",
            problems=problems[:MAX_SHOWN] + _more(len(problems)),
            hint="rows are numbered from 1 after the header line; fix them and run again",
        )
    rows["y"] = rows["y"].str.strip().astype(int)
    if "bias_type" in rows.columns:
        rows["bias_type"] = rows["bias_type"].replace("", None)
    else:
        rows["bias_type"] = None
    out = rows[["row", *REQUIRED, "bias_type"]].reset_index(drop=True)
    out.attrs["rows_read"] = n
    return out, warnings


TEMPLATE_MASK = "_"  # what stands for a differing word in a template (cluster: template)


def template(sentence: str, differing: list[Word]) -> str:
    """``sentence`` with each of its ``differing`` words replaced by :data:`TEMPLATE_MASK`: the sentence frame
    that pairs with other identity terms share ("Gay people are kind." -> "_ people are kind.")."""
    out, at = [], 0
    for w in differing:
        out += [sentence[at : w.start], TEMPLATE_MASK]
        at = w.end
    return "".join([*out, sentence[at:]])


def prepare_pairs(rows: pd.DataFrame, name: str, cluster: Cluster = "pair") -> pd.DataFrame:
    """Align each validated pair and derive the prepared columns (see ``pair_rows.PreparedPair``).

    ``cluster`` (``benchmarks.<b>.cluster``) chooses the resampling unit written to the ``cluster`` column:
    ``pair``, the rows with the same two sentences share the ``pair_id`` of the first of them; ``template``, the
    rows whose sent_more is the same once its differing words are masked (:func:`template`) share that template.
    """
    width = max(4, len(str(int(rows["row"].max()) if len(rows) else 0)))
    out = []
    first_of: dict[tuple[str, str], str] = {}
    for r in rows.itertuples(index=False):
        al = align(r.sent_more, r.sent_less)
        pair_id = f"{name}-{r.row:0{width}d}"
        same = first_of.setdefault((r.sent_more, r.sent_less), pair_id)
        out.append(
            {
                "pair_id": pair_id,
                "row": int(r.row),
                "sent_more": r.sent_more,
                "sent_less": r.sent_less,
                "y": int(r.y),
                "bias_type": r.bias_type,
                "targets_more": [w.text for w in al.more],
                "targets_less": [w.text for w in al.less],
                "starts_more": [w.start for w in al.more],
                "ends_more": [w.end for w in al.more],
                "starts_less": [w.start for w in al.less],
                "ends_less": [w.end for w in al.less],
                "gender_more": side_group([w.text for w in al.more]),
                "gender_less": side_group([w.text for w in al.less]),
                "position": "last" if al.last else "mid",
                "n_targets": al.n_blocks,
                "first_diff_word": al.first + 1,
                "first_diff": "initial" if al.first == 0 else "later",
                "cluster": same if cluster == "pair" else template(r.sent_more, al.more),
            }
        )
    return pd.DataFrame(out, columns=list(PreparedPair.model_fields))
