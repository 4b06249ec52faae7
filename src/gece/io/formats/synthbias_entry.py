"""SynthBias's rows for a params.yaml entry, whatever its mode (``benchmarks.<b>.synthbias``): the pronoun pairs of a
type (:mod:`gece.io.formats.synthbias`) or the rows of the referent-resolution protocol
(:mod:`gece.io.formats.synthbias_referent`), with the prepared file's metadata that says which."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gece.io.formats import benchmarks
from gece.io.formats.synthbias import SynthPairs, read_synthbias
from gece.io.formats.synthbias_referent import DEFAULT_PROMPT, read_referent
from gece.io.settings.sections import BenchmarkSpec

# the prepared file's metadata "protocol" of each SynthBias mode (params.yaml benchmarks.<b>.synthbias)
PROTOCOLS = {
    "type1": "pronoun: p = preference for the male pronoun; y = 1 (constant)",
    "type2": "pronoun: p = preference for the male pronoun; y = 1: referent occupation male-majority",
    "referent": "referent: p = probability of the pronoun's stereotypical occupation; y = 1: it is the referent",
}


def entry_rows(path: str | Path, entry: BenchmarkSpec) -> tuple[SynthPairs, pd.DataFrame, dict[str, str]]:
    """SynthBias's rows for ``entry``: what was read, the rows to prepare (the referent protocol's rows with their
    grouping columns and ``pair_row``; the pronoun pairs with ``referent``, where the referent is named) and the
    metadata of the prepared file that says which (``protocol``, and ``prompt`` on the referent protocol's rows)."""
    if entry.synthbias == "referent":
        prompt = entry.prompt or DEFAULT_PROMPT
        read = read_referent(path, entry.subset, prompt)
        return read, read.pairs, {"protocol": PROTOCOLS["referent"], "prompt": prompt}
    read = read_synthbias(path, entry.synthbias, entry.subset)
    rows = read.pairs[["row", *benchmarks.REQUIRED, "bias_type", "referent"]]
    return read, rows, {"protocol": PROTOCOLS[entry.synthbias]}
