"""A stand-in ``lm_eval`` for the tests of the lmeval stage: it reads the task gece exported (``--include_path``),
answers every request with a made-up log-likelihood, writes lm-eval's two files under ``--output_path`` as lm-eval
0.4 names them, and appends its argument list to ``$STANDIN_LOG`` (one JSON list a line). ``$STANDIN_FAIL`` names a
task it fails on (exit 3, nothing written), as a crashed lm-eval would. ``$STANDIN_PAIRS`` answers only the first N
documents (an interrupted run); ``$STANDIN_BREAK`` breaks its output and exits 0, as a buggy or hostile lm-eval
would: ``truncate`` (the last line cut), ``name`` (a samples file of another name), ``huge`` (a 20 MB line),
``link`` (the samples file a symlink to ``$STANDIN_OUTSIDE``, a file outside the output), ``extra`` (a stray file
beside the samples), ``two`` (a second samples file of a later date). With ``--apply_chat_template`` it logs each
context as lm-eval does, rendered by a chat template (ChatML's, with ``--system_instruction``'s message as the
system turn)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

DATE = "2026-12-06T07-00-00.000000"


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def system_instruction(argv: list[str]) -> str | None:
    """The message of ``--system_instruction <text>`` or ``--system_instruction=<text>``, if given."""
    for k, word in enumerate(argv):
        if word == "--system_instruction":
            return argv[k + 1]
        if word.startswith("--system_instruction="):
            return word.split("=", 1)[1]
    return None


def rendered(context: str, argv: list[str]) -> str:
    """``context`` as lm-eval logs it: in the user turn of a chat template under ``--apply_chat_template``."""
    if "--apply_chat_template" not in argv:
        return context
    system = system_instruction(argv)
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    return f"{head}<|im_start|>user\n{context}<|im_end|>\n<|im_start|>assistant\n"


def main(argv: list[str]) -> int:
    with open(os.environ["STANDIN_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    task = flag(argv, "--tasks")
    if os.environ.get("STANDIN_FAIL") == task:
        print(f"stand-in lm_eval: failing on {task}", file=sys.stderr)
        return 3
    (config,) = Path(flag(argv, "--include_path")).glob(f"{task}.yaml")
    docs = yaml.safe_load(config.read_text())["dataset_kwargs"]["data_files"]["test"]
    out = Path(flag(argv, "--output_path")) / "model"
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    answered = Path(docs).read_text().splitlines()[: int(os.environ.get("STANDIN_PAIRS", "1000000"))]
    for i, line in enumerate(answered):
        doc = json.loads(line)
        if "contexts" in doc:
            reqs = [(c, doc["continuation"]) for c in doc["contexts"]]
        else:
            reqs = [(doc["context"], c) for c in doc["choices"]]
        args = {f"gen_args_{k}": {"arg_0": rendered(c, argv), "arg_1": t} for k, (c, t) in enumerate(reqs)}
        resps = [[str(-1.0 - (i % 7) / 10), "False"], [str(-1.5 + (i % 5) / 10), "False"]]
        lines.append(json.dumps({"doc_id": i, "doc": doc, "arguments": args, "filtered_resps": resps}))
    samples = out / f"samples_{task}_{DATE}.jsonl"
    samples.write_text("\n".join(lines) + "\n")
    results = {"lm_eval_version": "0.4.13", "config": {"model": flag(argv, "--model"), "model_args": "dtype=float32"}}
    (out / f"results_{DATE}.json").write_text(json.dumps(results))
    broken(os.environ.get("STANDIN_BREAK"), samples, results)
    return 0


def broken(how: str | None, samples: Path, results: dict) -> None:
    """Break a finished run's output as ``$STANDIN_BREAK`` says (module docstring)."""
    text = samples.read_text()
    if how == "truncate":
        samples.write_text(text[: len(text) - 40])
    elif how == "name":
        samples.rename(samples.with_name(samples.name.replace(DATE, "latest")))
    elif how == "huge":
        samples.write_text(text + json.dumps({"doc_id": 10**6, "doc": {"pair_id": "x" * 20_000_000}}) + "\n")
    elif how == "link":  # to $STANDIN_OUTSIDE, a file the test wrote
        samples.unlink()
        samples.symlink_to(os.environ["STANDIN_OUTSIDE"])
    elif how == "extra":
        (samples.parent / "notes.txt").write_text("a file lm-eval does not write\n")
    elif how == "two":
        later = DATE.replace("07-00-00", "08-00-00")
        samples.with_name(samples.name.replace(DATE, later)).write_text(text)
        (samples.parent / f"results_{later}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
