"""The rule table (gece.catalog.scoring_rules) is the single source of the scoring rules: params.yaml's
validation, the
files' ``rule``, the CLI, planning, the score stage, lm-eval's requests and the docs' rule tables derive from it,
and a rule added there alone is accepted by all of them."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

from gece import cli
from gece.catalog.scoring_rules import RULE_NAMES, RULES
from gece.io.paths import layout
from gece.io.schemas import lmeval_files, tokens
from gece.io.settings import params
from gece.pipeline import extract as extract_stage
from gece.pipeline import prepare as prepare_stage
from gece.pipeline import score as score_stage
from gece.scoring import planning
from tests.test_rules_identity import ROWS, SPEC

ROOT = Path(__file__).resolve().parents[1]


def _rule_literals() -> dict[str, tuple[str, ...]]:
    """Every pydantic field that holds a rule, and the names it accepts."""
    fields = {
        "ExtractParams.rule": params.ExtractParams.model_fields["rule"].annotation,
        "BenchmarkSpec.rule": params.BenchmarkSpec.model_fields["rule"].annotation,
        "ExtractMeta.rule": tokens.ExtractMeta.model_fields["rule"].annotation,
        "Export.rule": lmeval_files.Export.model_fields["rule"].annotation,
        "ImportMeta.rule": lmeval_files.ImportMeta.model_fields["rule"].annotation,
    }
    out = {}
    for name, annotation in fields.items():
        args = typing.get_args(annotation)
        literal = next((a for a in args if typing.get_origin(a) is typing.Literal), annotation)
        out[name] = typing.get_args(literal)
    return out


def test_the_rule_table_names_each_rule_once_and_every_rule_field_derives_from_it():
    assert len(set(RULE_NAMES)) == len(RULES) and RULES[0].name == params.ExtractParams().rule
    for r in RULES:
        assert r.summary and r.score and r.tokens and r.origin
    assert _rule_literals() == dict.fromkeys(_rule_literals(), RULE_NAMES)
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("extract", "try"):
        rule = next(a for a in sub.choices[command]._actions if a.dest == "rule")
        assert tuple(rule.choices) == RULE_NAMES, command
    assert [planning.plan_of(r.name) for r in RULES] == [r.extraction for r in RULES]


# a comparison left in place, with its reason
ALLOWED = {
    "src/gece/report/findings.py": "the special-token note names the sentence rule's reason only when every "
    "benchmark is scored by it (deriving it from the extraction would change the committed page)",
}


def test_no_module_compares_a_rule_name():
    """Rules are told apart by their properties (gece.catalog.scoring_rules), not by comparing their names."""
    names = "|".join(RULE_NAMES)
    compare = re.compile(rf"""\brule["']?\)?\s*(==|!=)\s*["']({names})["']|\brule\s+(not\s+)?in\s*\(""")
    found = {
        str(path.relative_to(ROOT)): f"{n}: {line.strip()}"
        for path in sorted((ROOT / "src" / "gece").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if compare.search(line)
    }
    assert set(found) == set(ALLOWED), found


def _table(page: str, header: str) -> list[list[str]]:
    """The rows of the markdown table of ``page`` whose header line starts with ``header``, as cells."""
    lines = (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_the_docs_rule_tables_list_the_rule_table():
    assert _table("metrics.md", "| rule | a side's `s` |") == [
        [f"`{r.name}`", r.score, r.tokens, r.origin] for r in RULES
    ]
    assert [row[0] for row in _table("lmeval.md", "| rule | context |")] == [f"`{r.name}`" for r in RULES]
    bos = [row[0] for row in _table("lmeval.md", "| rule | `special_tokens: true` |")]
    by_extraction = {r.extraction: [] for r in RULES}
    for r in RULES:
        by_extraction[r.extraction].append(f"`{r.name}`")
    assert bos == [", ".join(names) for names in by_extraction.values()]


TOY = """    ScoringRule(
        "toy",
        "sentence",
        matched=True,
        mean=True,
        request="suffix",
        summary="the mean log-probability of the tokens both sentences share (a test's toy rule)",
        score="`(1/|M|) Σ_{t ∈ M} lp_t`",
        tokens="the tokens both sentences share, averaged",
        origin="tests/test_scoring_rules.py",
    ),
)
RULE: dict"""

# run in a copy of the package whose rule table alone holds the toy rule
TOY_SCRIPT = r"""
import json
import sys
from pathlib import Path

from transformers import AutoTokenizer

import gece
from gece import cli
from gece.io.files.readers import read_table
from gece.io.settings.sections import BenchmarkSpec
from gece.io.settings.extract_params import ExtractParams
from gece.io.schemas.pair_rows import PreparedPair, ScoreRow
from gece.io.schemas.lmeval_files import Sample
from gece.lmeval import export, requests, samples
from gece.pipeline import extract, score
from gece.scoring import planning

tokenizer_dir = sys.argv[1]
assert gece.__file__.startswith(sys.argv[2]), gece.__file__
assert ExtractParams(rule="toy").rule == BenchmarkSpec(rule="toy").rule == "toy"
cli.build_parser().parse_args(["extract", "--model", "smol", "--rule", "toy", "p.parquet", "t.parquet"])
assert planning.plan_of("toy") == "sentence"
# score: extract's variant copy of a shared-rule token file, under the toy rule
extract.copy_tokens("smol", "wq", "wq_toy", "toy", "key")
meta = score.score("artifacts/prepared/wq_toy.parquet", "artifacts/tokens/smol/wq_toy.parquet", "toy.parquet", "chain")
frame, fmeta = read_table("toy.parquet", ScoreRow)
shared, _ = read_table("shared.parquet", ScoreRow)
assert meta.rule == fmeta["rule"] == "toy"
assert list(frame["n_tokens_more"]) == list(shared["n_tokens_more"])
assert list(frame["logprob_more"]) == list(shared["logprob_more"] / shared["n_tokens_more"])
assert list(frame["scored_punct_only"]) == list(shared["scored_punct_only"])
# lm-eval: the export's documents and task, and the import of answers to them
pairs, _ = read_table("artifacts/prepared/wq_toy.parquet", PreparedPair)
bos = export.add_bos_token("toy", True)
encode, prefix = export.lmeval_encoder(tokenizer_dir, bos)
gece_tok = AutoTokenizer.from_pretrained(tokenizer_dir)
docs, excluded = export.documents(pairs, "toy", "chain", gece_tok, True, encode, prefix)
assert len(docs) == len(pairs) and not excluded and all(d.contexts and d.continuation for d in docs)
assert "doc_to_choice: contexts" in export.task_yaml("gece_wq_toy", Path("docs.jsonl"), "toy")
lines = []
for i, (doc, pair) in enumerate(zip(docs, pairs.to_dict("records"), strict=True)):
    req = requests.request_for(pair, "toy")
    args = {f"gen_args_{k}": {"arg_0": c, "arg_1": t} for k, (c, t) in enumerate(req.arguments)}
    answers = [["-3.0", "False"], ["-1.0", "False"]]
    lines.append((i + 1, Sample(doc_id=i, doc=doc, arguments=args, filtered_resps=answers)))
imported = samples.score_frame(pairs, lines, "toy", Path("samples.jsonl"))
assert list(imported["logprob_more"]) == [-3.0 / d.n_tokens[0] for d in docs]
print(json.dumps({"ok": True}))
"""


def test_a_rule_added_to_the_rule_table_alone_is_accepted_everywhere(tmp_path, smol, monkeypatch):
    """A toy rule (the mean of the shared tokens) written into a copy of the registry, and nowhere else: params
    validation, the CLI, planning, the score stage, lm-eval's export and import all take it."""
    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "wq.csv"
    csv.write_text("sent_more,sent_less,y\n" + "".join(f"{r}\n" for r in ROWS))
    for b in ("wq", "wq_toy"):
        prepare_stage.prepare(csv, layout.prepared_path(b), name=b)
    extract_stage.extract(
        layout.prepared_path("wq"),
        layout.tokens_path("smol", "wq"),
        "smol",
        SPEC,
        params.ExtractParams(rule="shared"),
        loaded=smol,
    )
    score_stage.score(
        layout.prepared_path("wq"), layout.tokens_path("smol", "wq"), tmp_path / "shared.parquet", "chain"
    )
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "gece", copy / "gece", ignore=shutil.ignore_patterns("__pycache__"))
    registry = copy / "gece" / "catalog" / "scoring_rules.py"
    text = registry.read_text(encoding="utf-8")
    assert text.count("\n)\nRULE: dict") == 1
    registry.write_text(text.replace("\n)\nRULE: dict", "\n" + TOY), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{ROOT}"}
    run = subprocess.run(
        [sys.executable, "-c", TOY_SCRIPT, smol.tokenizer.name_or_path, str(copy)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {"ok": True}
