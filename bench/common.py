"""What the bench scripts share (a script of its own folder, not part of the package): each script puts this
folder on ``sys.path`` before importing it, so it loads however the script is run (``python bench/x.py``,
``bench/run.py`` or a test's ``importlib``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_worker(script: str, args: list[str], result: Path, env: dict[str, str], what: str) -> dict:
    """Run ``script --worker *args`` in a fresh Python, which writes its measurements to ``result`` as JSON, and
    return them; a worker that fails ends the bench with the end of its stderr (``what`` names it)."""
    res = subprocess.run(
        [sys.executable, script, "--worker", *args], check=False, env=env, capture_output=True, text=True
    )
    if res.returncode != 0 or not result.exists():
        raise SystemExit(f"bench worker {what} exited {res.returncode}:\n{res.stderr[-4000:]}")
    return json.loads(result.read_text())


def chain_logprobs(token_lps) -> list[list[float]]:
    """Per pair [logprob_more, logprob_less] (chain rule, logsumexp over target words) of per-pair, per-side,
    per-word token log-probabilities."""
    from gece.stats import pair_scores

    return [[pair_scores.side_score(side, "chain") for side in lps] for lps in token_lps]


def minicons_word_logprobs(tokenizer, sides, out: list) -> list:
    """Per pair, per side, per target word the token log-probabilities of minicons' ``token_score`` output
    ``out`` (two entries a pair: more, less), after checking that minicons tokenized each side as gece's plan."""
    token_lps = []
    for i, pair in enumerate(sides):
        lps = []
        for j, side in enumerate(pair):
            toks = out[2 * i + j]
            if [t for t, _ in toks] != tokenizer.convert_ids_to_tokens(list(side.ids)):
                raise AssertionError(f"minicons tokenized pair {i} differently")
            lps.append([[toks[t][1] for t in w] for w in side.words])
        token_lps.append(lps)
    return token_lps
