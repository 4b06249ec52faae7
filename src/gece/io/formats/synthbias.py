"""Reading SynthBias (Wang et al., ICML 2025, arXiv:2505.23996) into pronoun pairs: one sentence, its he and its she
version.

The file (``data/synthbias/synthbias_data.csv``, CC BY-NC-ND 4.0: read, never rewritten; the pairs stay in the
project's DVC-tracked artifacts) has the columns ``type`` (``type1``: the pronoun's referent cannot be resolved
from the sentence; ``type2``: it can, and it is ``occ_1``), ``sample`` (the sentence), ``occ_1``, ``occ_2`` (the
two occupations), ``pronoun`` (the gendered pronoun in the sentence) and ``is_stereotypical`` (type2: whether
the pronoun's gender is the labour-statistics majority of the referent's occupation, ``True``/``False``; type1:
``ambiguous``). Each sentence comes with its pronoun-swapped counterpart, in no particular row.

**Pairing.** Within a type, each sentence's pronoun (its one whole-word occurrence, case kept) is replaced by a
mask; the sentences with the same masked text are one pair: one male version (he, him, his) and one female
version (she, her). The mask is what pairs "her" with both "his" and "him". The rules, in order, each counted
(the prepare stage writes the counts into the prepared file's metadata and its log):

1. ``both_types``: a sentence listed under both types is dropped (all its rows): its type is unknown.
2. ``duplicates``: a repeated (type, sentence) row is dropped (the first is kept): a swapped duplicate, the same
   pair listed twice, merges into one pair.
3. ``unpaired``: a masked sentence without exactly one male and one female version (or whose two versions
   disagree on the referent's majority gender) is dropped.

**The pronoun protocol** (the paper's WinoBias protocol on a larger set): ``sent_more`` is the male version,
``sent_less`` the female one, so p is the model's preference for the male pronoun (the target rule scores the
pronouns). On ``type2``, y = 1 when the referent's occupation is male-majority by labour statistics (the male
version is the stereotypical one): the labour-statistics stereotype, not a human judgement of the sentence. On
``type1`` there is no referent: y = 1 for every pair (a constant-y benchmark, as the identity benchmarks), so the
reported quantities are the share of pairs preferring "he" and 1 − mean p.

**The stratified subset** (``benchmarks.<b>.subset``: a number of pairs, or none for all). type2 is balanced over
the referent's position (first or second occupation mentioned) and its majority gender (male: y = 1), whose four
cells get subset / 4 pairs each; type1, which has neither, is one stratum. Within a stratum, pairs are taken in
the order of the SHA-256 of their masked sentence: fixed, seed-free, and independent of the file's row order. A
stratum with fewer pairs than its share gives all it has (the metadata says how many each got). The prepared
pairs are in the order of their rows in the file, as every prepared file is (extract scores them in that order), so
a smoke run's first N (``extract.limit``) are not balanced: score the subset whole, or set a smaller ``subset``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from gece.base.errors import GeceError
from gece.io.formats.benchmarks import MAX_SHOWN, more_shown, read_records

SynthType = Literal["type1", "type2"]
COLUMNS = ("type", "sample", "occ_1", "occ_2", "pronoun", "is_stereotypical")
MALE_PRONOUNS = ("he", "him", "his")
FEMALE_PRONOUNS = ("she", "her")
STEREOTYPICAL = {"True": True, "False": False, "ambiguous": None}
MASK = "\x00"  # stands for the pronoun in a masked sentence (a character no sentence holds)
RULES = ("both_types", "duplicates", "unpaired")
FORMAT_HINT = (
    "a SynthBias file has the columns type, sample, occ_1, occ_2, pronoun, is_stereotypical "
    "(data/SOURCES.md); rows are numbered from 1 after the header line"
)


@dataclass(frozen=True)
class SynthPairs:
    """The pronoun pairs of one type: ``pairs`` has one row per pair with ``row`` (the male version's 1-based data
    row), ``sent_more`` (male), ``sent_less`` (female), ``y``, ``bias_type`` (``gender``), ``referent``
    (``first``/``second``, None on type1) and ``key`` (the masked sentence); ``removed``: rows each rule dropped
    (both types together); ``rows_read``: data rows of the file; ``strata``: pairs taken per stratum."""

    pairs: pd.DataFrame
    removed: dict[str, int]
    rows_read: int
    strata: dict[str, int]


def rows_of(path: str | Path) -> tuple[Path, pd.DataFrame]:
    """The file's rows as strings (stripped), with their 1-based data row; a GeceError lists every bad row."""
    path, header, records = read_records(path, hint="pass the path of data/synthbias/synthbias_data.csv")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise GeceError(f"{path}: no column {', '.join(missing)}", hint=FORMAT_HINT)
    col = {c: header.index(c) for c in COLUMNS}
    problems = []
    for i, (line, f) in enumerate(records, start=1):
        at = f"{path}: row {i} (line {line})"
        if len(f) != len(header):
            problems.append(f"{at}: {len(f)} field(s), but the header has {len(header)}")
            continue
        kind, sentence, pronoun, stereo = (f[col[c]].strip() for c in ("type", "sample", "pronoun", "is_stereotypical"))
        if kind not in ("type1", "type2"):
            problems.append(f"{at}: type is {kind!r}; use type1 or type2")
        if pronoun.lower() not in MALE_PRONOUNS + FEMALE_PRONOUNS:
            problems.append(f"{at}: pronoun is {pronoun!r}; use one of {', '.join(MALE_PRONOUNS + FEMALE_PRONOUNS)}")
        elif len(re.findall(rf"\b{re.escape(pronoun)}\b", sentence)) != 1:
            problems.append(f"{at}: the pronoun {pronoun!r} is not once, as a whole word, in the sentence")
        if stereo not in STEREOTYPICAL or (stereo == "ambiguous") != (kind == "type1"):
            problems.append(f"{at}: is_stereotypical is {stereo!r}; use True or False (type2), ambiguous (type1)")
        occupations = [f[col[c]].strip() for c in ("occ_1", "occ_2")]
        if not all(occupations) or occupations[0].lower() == occupations[1].lower():
            problems.append(f"{at}: occ_1 and occ_2 are {occupations}; a sentence names two different occupations")
        elif kind == "type2" and (unnamed := [o for o in occupations if _mention(sentence, o) < 0]):
            problems.append(
                f"{at}: the sentence never names the occupation {unnamed[0]!r} (as a whole word); a type2 sentence "
                "names both, and its pronoun refers to occ_1"
            )
    if problems:
        raise GeceError(
            f"{path}: {len(problems)} problem(s) in {len(records)} row(s); nothing was written",
            problems=problems[:MAX_SHOWN] + more_shown(len(problems)),
            hint=FORMAT_HINT,
        )
    table = pd.DataFrame({c: [f[col[c]].strip() for _, f in records] for c in COLUMNS})
    table.insert(0, "row", range(1, len(records) + 1))
    return path, table


def _mention(sentence: str, occupation: str) -> int:
    """Where an occupation is first named (its first whole-word occurrence, any case; -1: not found)."""
    m = re.search(rf"\b{re.escape(occupation.lower())}\b", sentence.lower())
    return m.start() if m else -1


def paired_rows(table: pd.DataFrame, kind: SynthType) -> tuple[pd.DataFrame, dict[str, int]]:
    """The validated rows of ``kind`` that form pairs (both versions, with ``key``, the masked sentence, ``male``
    and ``male_majority``), and the rows each rule of the module docstring removed (counted over both types)."""
    both = set(table.loc[table["type"] == "type1", "sample"]) & set(table.loc[table["type"] == "type2", "sample"])
    rest = table[~table["sample"].isin(both)]
    unique = rest.drop_duplicates(["type", "sample"])
    removed = {"both_types": len(table) - len(rest), "duplicates": len(rest) - len(unique)}
    masked = unique.assign(
        key=[re.sub(rf"\b{re.escape(p)}\b", MASK, s) for p, s in zip(unique["pronoun"], unique["sample"], strict=True)],
        male=unique["pronoun"].str.lower().isin(MALE_PRONOUNS),
        male_majority=[
            None if s == "ambiguous" else (s == "True") == m
            for s, m in zip(unique["is_stereotypical"], unique["pronoun"].str.lower().isin(MALE_PRONOUNS), strict=True)
        ],
    )
    grouped = masked.groupby(["type", "key"], sort=False)
    ok = (grouped["male"].transform("sum") == 1) & (grouped["male"].transform("size") == 2)
    ok &= grouped["male_majority"].transform("nunique") <= 1
    removed["unpaired"] = int((~ok).sum())
    return masked[ok & (masked["type"] == kind)], removed


def referent_position(sentences, first, second) -> list[str]:
    """``first`` when the referent (``first``'s occupation, occ_1) is named before the other one, else ``second``."""
    return [
        "first" if _mention(s, a) <= _mention(s, b) else "second"
        for s, a, b in zip(sentences, first, second, strict=True)
    ]


def pronoun_pairs(table: pd.DataFrame, kind: SynthType) -> tuple[pd.DataFrame, dict[str, int]]:
    """The pairs of ``kind`` from the validated rows, and the rows each rule of the module docstring removed
    (counted over both types)."""
    paired, removed = paired_rows(table, kind)
    male = paired[paired["male"]].set_index("key")
    female = paired[~paired["male"]].set_index("key").loc[male.index]
    pairs = pd.DataFrame(
        {
            "row": male["row"].to_numpy(),
            "sent_more": male["sample"].to_numpy(),
            "sent_less": female["sample"].to_numpy(),
            "y": [1 if kind == "type1" else int(v) for v in male["male_majority"]],
            "bias_type": "gender",
            "referent": [None] * len(male)
            if kind == "type1"
            else referent_position(male["sample"], male["occ_1"], male["occ_2"]),
            "key": male.index.to_numpy(),
        }
    )
    return pairs.sort_values("row", kind="stable").reset_index(drop=True), removed


def stratified_subset(pairs: pd.DataFrame, size: int | None) -> tuple[pd.DataFrame, dict[str, int]]:
    """The fixed stratified subset of the module docstring (all pairs when ``size`` is None) and the pairs taken per
    stratum (``<referent>/<y>``, or ``all`` on type1), in the order of their rows."""
    stratum = pairs["referent"].fillna("").astype(str) + "/" + pairs["y"].astype(str)
    stratum = stratum.where(pairs["referent"].notna(), "all")
    names = sorted(stratum.unique())
    digest = pairs["key"].map(lambda k: hashlib.sha256(k.encode("utf-8")).hexdigest())
    ranked = pd.DataFrame({"stratum": stratum, "digest": digest}).sort_values(["stratum", "digest"], kind="stable")
    ranked["rank"] = ranked.groupby("stratum").cumcount()
    if size is not None:
        ranked = ranked[ranked["rank"] < size // max(len(names), 1)]
    strata = {s: int((ranked["stratum"] == s).sum()) for s in names}
    return pairs.loc[ranked.index].sort_values("row", kind="stable").reset_index(drop=True), strata


def read_synthbias(path: str | Path, kind: SynthType, subset: int | None) -> SynthPairs:
    """SynthBias's ``kind`` pairs (module docstring), the stratified subset of ``subset`` pairs (None: all)."""
    path, table = rows_of(path)
    pairs, removed = pronoun_pairs(table, kind)
    if pairs.empty:
        raise GeceError(f"{path}: no {kind} pair left; nothing was written", hint=FORMAT_HINT)
    chosen, strata = stratified_subset(pairs, subset)
    check_subset(path, chosen, subset, len(strata))
    return SynthPairs(chosen, removed, len(table), strata)


def check_subset(path: Path, chosen: pd.DataFrame, subset: int | None, least: int) -> None:
    """A subset that leaves no pair is refused: it would write a prepared file with nothing to score. ``least``: the
    smallest subset that takes a pair from every stratum."""
    if chosen.empty:
        raise GeceError(
            f"{path}: subset {subset} leaves no pair (its strata get none each); nothing was written",
            hint=f"give benchmarks.<b>.subset {least} or more, or leave it out for every pair",
        )
