"""Tables (markdown) from the reports."""

from __future__ import annotations

LABELS = {"ece": "ECE", "gender_ece": "Gender-ECE", "brier": "Brier", "accuracy": "Accuracy"}


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.3f}" if p >= 0.001 else "<0.001"


def compare_markdown(result: dict) -> str:
    """One row per model pair: A − B with its interval and p-value per metric; significant
    differences in bold (p < alpha), † where they survive Holm's correction over the table."""
    keys = list(result["pairs"][0]["metrics"]) if result["pairs"] else []
    level = f"{result['level']:.0%}"
    lines = [
        f"# Paired model comparison: {result['benchmark']}",
        "",
        f"Difference A − B on the same {result['n']} pairs, paired bootstrap with {result['draws']} resamples "
        f"(seed {result['seed']}): point difference, {level} percentile interval and two-sided p-value. "
        f"**Bold**: significant at α = {result['alpha']}; †: still significant after Holm's correction "
        f"over all {len(result['pairs']) * len(keys)} tests in this table.",
        "",
        "| A | B | " + " | ".join(LABELS.get(k, k) for k in keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    for pair in result["pairs"]:
        cells = []
        for k in keys:
            c = pair["metrics"][k]
            text = f"{_num(c['diff'], 3)} [{_num(c['ci_low'])}, {_num(c['ci_high'])}] p={_p(c['p_value'])}"
            if c["significant"]:
                text = f"**{text}**" + (" †" if c["significant_holm"] else "")
            cells.append(text)
        lines.append(f"| {pair['a']} | {pair['b']} | " + " | ".join(cells) + " |")
    n_sig = sum(c["significant"] for pair in result["pairs"] for c in pair["metrics"].values())
    lines += ["", f"{n_sig} of {len(result['pairs']) * len(keys)} differences are significant at "
              f"α = {result['alpha']}."]
    return "\n".join(lines) + "\n"
