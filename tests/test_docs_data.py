"""The numbers the docs quote about the data (pairs, distinct pairs, clusters, repeats, first-word pairs) equal
the prepared benchmarks (issue 53): each claim is found by its sentence and checked against the prepared files,
built from data/ (tests/conftest.py: prepared_dir), so a changed snapshot or prepare step fails here first.
A source's rows that prepare drops are rows, never pairs."""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
import pytest

from gece.io.paths import data_layout
from gece.io.settings.params import load_params
from gece.pipeline import prepare as prepare_stage

from .conftest import ROOT

Counts = dict[str, dict[str, int]]


def _counts(frame: pd.DataFrame) -> dict[str, int]:
    repeats = frame.groupby(["sent_more", "sent_less"]).size()
    out = {
        "n": len(frame),
        "distinct": len(repeats),
        "clusters": frame["cluster"].nunique(),
        "repeated_rows": len(frame) - len(repeats),
        "initial": int((frame["first_diff"] == "initial").sum()),
        "later": int((frame["first_diff"] == "later").sum()),
        "several_targets": int((frame["n_targets"] > 1).sum()),
    }
    out |= {f"times_{k}": int(v) for k, v in repeats.value_counts().items()}
    return out


@pytest.fixture(scope="module")
def counts(prepared_dir, tmp_path_factory) -> Counts:
    """Per benchmark its counts: the gender ones from the shared prepared files, CrowS-Pairs and WinoQueer prepared
    here from their sources as params.yaml names them (each source once)."""
    params = load_params(ROOT / "params.yaml")
    out = tmp_path_factory.mktemp("prepared_sources")
    seen = set()
    for b, spec in params.benchmarks.items():
        if spec.imported and spec.source not in seen:  # CrowS-Pairs-format sources (not SynthBias)
            seen.add(spec.source)
            prepare_stage.prepare(
                ROOT / data_layout.benchmark_source(params, b),
                out / f"{b}.parquet",
                params.prepare,
                name=b,
                imported=spec.imported,
                cluster=spec.cluster,
            )
    files = [*prepared_dir.glob("*.parquet"), *out.glob("*.parquet")]
    return {p.stem: _counts(pd.read_parquet(p)) for p in sorted(files)}


def _n(text: str) -> int:
    return int(text.replace(",", ""))


# (file, the sentence with its numbers as groups, the numbers the prepared files give)
CLAIMS: list[tuple[str, str, Callable[[Counts], tuple[int, ...]]]] = [
    (
        "docs/metrics.md",
        r"CrowS-Pairs has ([\d,]+) of its ([\d,]+) pairs whose differing word is the first word and WinoQueer "
        r"([\d,]+) of its ([\d,]+)\.",
        lambda c: (c["crows_pairs"]["initial"], c["crows_pairs"]["n"], c["winoqueer"]["initial"], c["winoqueer"]["n"]),
    ),
    ("docs/metrics.md", r"gece ([\d,]+) pairs\)", lambda c: (c["crows_pairs"]["n"],)),
    (
        "docs/metrics.md",
        r"\(([\d,]+) CrowS-Pairs pairs have several differing words\)",
        lambda c: (c["crows_pairs"]["several_targets"],),
    ),
    (
        "docs/metrics.md",
        r"in ([\d,]+) of WinoQueer's ([\d,]+) pairs the differing word opens",
        lambda c: (c["winoqueer"]["initial"], c["winoqueer"]["n"]),
    ),
    (
        "docs/metrics.md",
        r"CrowS-Pairs has ([\d,]+) such pairs of ([\d,]+)\)",
        lambda c: (c["crows_pairs"]["initial"], c["crows_pairs"]["n"]),
    ),
    (
        "docs/metrics.md",
        r"its ([\d,]+) pairs that do not differ in their first word",
        lambda c: (c["winoqueer"]["later"],),
    ),
    (
        "docs/metrics.md",
        r"WinoQueer v0's ([\d,]+) rows hold ([\d,]+) distinct \(sent_more, sent_less\) pairs \(([\d,]+) once, "
        r"([\d,]+) twice, ([\d,]+) three times, ([\d,]+) four times\), in ([\d,]+) sentence frames; CrowS-Pairs' "
        r"([\d,]+) rows hold ([\d,]+)\.",
        lambda c: (
            *(c["winoqueer"][k] for k in ("n", "distinct", "times_1", "times_2", "times_3", "times_4", "clusters")),
            c["crows_pairs"]["n"],
            c["crows_pairs"]["distinct"],
        ),
    ),
    ("docs/metrics.md", r"the ([\d,]+) frames nest the repeats", lambda c: (c["winoqueer"]["clusters"],)),
    (
        "docs/metrics.md",
        r"winobias ([\d,]+) rows in ([\d,]+) clusters, genderlex ([\d,]+) in ([\d,]+), genderlex_person and "
        r"genderlex_someone ([\d,]+) in ([\d,]+), CrowS-Pairs ([\d,]+) in ([\d,]+);",
        lambda c: (
            c["winobias"]["n"],
            c["winobias"]["clusters"],
            c["genderlex"]["n"],
            c["genderlex"]["clusters"],
            c["genderlex_person"]["n"],
            c["genderlex_person"]["clusters"],
            c["crows_pairs"]["n"],
            c["crows_pairs"]["clusters"],
        ),
    ),
    ("docs/metrics.md", r"keeps ([\d,]+) pairs; no annotations", lambda c: (c["winoqueer"]["n"],)),
    (
        "docs/annotations.md",
        r"Measured on the ([\d,]+) pairs that `gece prepare` keeps",
        lambda c: (c["crows_pairs"]["n"],),
    ),
    ("docs/annotations.md", r"WinoQueer repeats ([\d,]+) pairs", lambda c: (c["winoqueer"]["repeated_rows"],)),
    ("params.yaml", r"# ([\d,]+) rows from a few sentence frames", lambda c: (c["winoqueer"]["n"],)),
]


@pytest.mark.parametrize(
    ("path", "pattern", "expected"), CLAIMS, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(CLAIMS)]
)
def test_each_number_the_docs_quote_about_the_data_is_the_prepared_files(counts, path, pattern, expected):
    text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
    found = re.findall(pattern, text)
    assert found, f"{path} no longer says {pattern!r}: update the claim here with the sentence"
    for groups in found:
        groups = (groups,) if isinstance(groups, str) else groups
        assert tuple(map(_n, groups)) == expected(counts), (path, pattern)


def test_the_rows_a_source_loses_to_prepare_are_never_called_pairs(counts):
    """CrowS-Pairs' and WinoQueer's sources hold rows prepare drops (docs/metrics.md, "Which rule"): their row
    counts appear in the docs as rows, never as pairs."""
    params = load_params(ROOT / "params.yaml")
    rows = {
        b: len(pd.read_csv(ROOT / spec.source)) for b, spec in params.benchmarks.items() if spec.source and b in counts
    }
    lost = {n for b, n in rows.items() if n != counts[b]["n"]}
    assert lost, "the sources lose no row to prepare: this test has nothing to check"
    for path in ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))):
        text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
        called = [m for m in re.findall(r"(\d[\d,]*) pairs", text) if _n(m) in lost]
        assert not called, f"{path} calls a source's {called} rows pairs: prepare keeps fewer"
