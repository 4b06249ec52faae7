"""Stage prompt-extract: a model of ``ablate.prompts`` scored under each of its prompts (docs/metrics.md, "Prompts")
-> ``artifacts/prompted/<model>/<prompt>/``: a token file and its meta per benchmark, as extract writes them, and
``prompt.json`` (:class:`gece.io.schemas.prompt_reports.PromptRecord`: the prompt and the text it put around every
sentence).

The first ``ablate.prompt_pairs`` pairs of every benchmark are scored (the smaller of it and ``extract.limit``), each
under its rule, by :func:`gece.pipeline.extract.extract_model` with the prompt (:mod:`gece.scoring.prompts`): the
model loads once for every prompt, and only when a token file cannot be reused; a file is reused by content as
extract's are (its fingerprint adds the prompt, the text it renders to and the prompt code), so editing an unrelated
module, or adding a prompt, scores nothing again. The model's tokenizer is read first: a prompt with ``chat: true``
on a model without a chat template is refused before anything is scored.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from pathlib import Path

from gece.base.errors import GeceError
from gece.base.terminal import literal, plural
from gece.cmd import command
from gece.cmd.command import Output
from gece.io.files.json_writer import write_json
from gece.io.paths import layout
from gece.io.schemas.prompt_reports import PromptRecord
from gece.io.settings.model_entry import ModelSpec
from gece.io.settings.params import Params, params_if_valid, require_params
from gece.io.settings.prompts import USER_TURN
from gece.pipeline import extract as extract_stage
from gece.scoring import models, prompts

RECORD = "prompt.json"  # beside a prompt's token files

# the line `gece --help` shows for this command (read without importing this module)
HELP = (
    "score a model under each of its prompts (ablate.prompts), the first ablate.prompt_pairs pairs of every "
    "benchmark -> token files per prompt (DVC stage prompt-extract)"
)
EXAMPLES = ("gece prompt-extract --model smollm2-135m",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="a model of ablate.prompts ({params:ablate.prompts}), scored under its prompts"
    )


# dvc.yaml's stage (gece.cmd.stage): its data deps and outputs are what reads() and writes() say of --model
STAGE = {
    "name": "prompt-extract",
    "about": "a model scored under each of its prompts (ablate.prompts): the first ablate.prompt_pairs pairs of every "
    "benchmark; token files reused by content as extract's (docs/metrics.md)",
    "argv": ["prompt-extract", "--model", "{model}"],
    "foreach": ["model", "ablate.prompts"],
    "params": [
        "benchmarks",
        "extract.batch_size",
        "extract.rule",
        "extract.limit",
        "registry.{model}",
        "prompts",
        "ablate.prompts",
        "ablate.prompt_pairs",
    ],
    "outputs": {"the prompted token files": {"note": "<prompt>/<benchmark>.parquet, .meta.json and prompt.json"}},
    "notes": {"artifacts/prepared": "every benchmark's prepared pairs"},
}


def reads(args: argparse.Namespace) -> list[Path]:
    """What it reads besides --params: the model's files (a source that is a local path), every prepared
    benchmark and dvc.lock (the last recorded run, reused)."""
    params = params_if_valid(args)
    spec = params.registry.get(args.model) if params is not None else None
    model = [Path(spec.source)] if spec is not None and os.path.lexists(spec.source) else []
    return [*model, layout.ARTIFACTS / "prepared", Path("dvc.lock")]


def writes(args: argparse.Namespace) -> dict[str, Output]:
    """The model's folder of prompted token files, which it writes whole, and the shards of its killed runs beside
    it (resumed; outside the stage's outputs)."""
    try:
        folder = layout.prompted_dir(args.model)
    except GeceError:  # no plain id: run refuses it
        return {}
    return {
        "the prompted token files": Output(folder, "folder", updated=True),
        "the shards of its killed runs": Output(folder.with_name(f"{folder.name}.shards"), "scratch", updated=True),
    }


def prompted_model(params: Params, model: str) -> tuple[ModelSpec, list[prompts.Prompted]]:
    """The registry entry of a model of ``ablate.prompts`` and its prompts, rendered for its tokenizer (a
    GeceError naming the fix when it has none, or a chat prompt meets a model without a chat template)."""
    if model not in params.ablate.prompts:
        raise GeceError(
            f"--model {model!r} is not under ablate.prompts",
            hint=f"give one of: {', '.join(params.ablate.prompts) or '(none)'}; or add `{model}: [chat]` under "
            "ablate.prompts in params.yaml",
        )
    spec = params.registry[model]
    tokenizer, _ = models.load_tokenizer(spec)
    return spec, [prompts.prompted(n, params.prompts[n], tokenizer, model) for n in params.ablate.prompts[model]]


def record(model: str, prompt: prompts.Prompted, pairs: int | None) -> PromptRecord:
    spec = prompt.spec
    return PromptRecord(
        model=model,
        prompt=prompt.name,
        template=spec.template,
        chat=spec.chat,
        system=spec.system,
        user_turn=USER_TURN if spec.chat else None,
        before=prompt.wrap.before,
        after=prompt.wrap.after,
        pairs=pairs,
    )


def prompt_extract(params: Params, model: str) -> dict[str, extract_stage.ModelRun]:
    """Every prompt of ``model`` (module docstring) -> its folder of token files; what each did."""
    spec, prompted = prompted_model(params, model)
    limits = (params.extract.limit, params.ablate.prompt_pairs)
    settings = params.extract.model_copy(update={"limit": min((x for x in limits if x is not None), default=None)})
    folder, done = layout.prompted_dir(model), {}
    with contextlib.ExitStack() as opened:
        loaded: list = []

        def load() -> object:  # once, for every prompt, and only when a file must be scored
            if not loaded:
                loaded.append(opened.enter_context(extract_stage.model_of(spec)))
            return loaded[0]

        for p in prompted:
            done[p.name] = extract_stage.extract_model(
                model, spec, list(params.benchmarks), settings, rules=params.rules, loaded=load, prompt=p
            )
            write_json(layout.tokens_dir(model, p.name) / RECORD, record(model, p, settings.limit))
    for stale in sorted(folder.iterdir()):  # a prompt no longer listed (a run outside DVC, which empties the folder)
        if stale.name in done:
            continue
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    with contextlib.suppress(OSError):
        folder.with_name(f"{folder.name}.shards").rmdir()
    return done


def run(args: argparse.Namespace) -> int:
    command.check_id(args.model, "--model")
    params = require_params(args)
    done = prompt_extract(params, args.model)
    for name, r in done.items():
        pairs = sum(t.pairs for t in r.scored.values())
        seconds = sum(t.seconds for t in r.scored.values())
        command.out.print(
            f"[green]{literal(name)}[/]: scored {plural(len(r.scored), 'benchmark')} ({plural(pairs, 'pair')} in "
            f"{seconds:.1f} s), reused {len(r.reused)} -> {literal(str(layout.tokens_dir(args.model, name)))}",
            highlight=False,
        )
    return 0
