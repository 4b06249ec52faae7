"""``gece lmeval-model``: the model directory lm-eval should load for a registry entry (``pretrained=``)."""

from __future__ import annotations

import argparse

from gece.cmd import command
from gece.io.settings.params import require_params

HELP = "print the model directory lm-eval's HF backend should load for a registry entry (pretrained=...)"
EXAMPLES = (
    "gece lmeval-model --model smollm2-135m   # then: lm_eval --model hf --model_args pretrained=<it>,dtype=float32",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a registry entry gece loads (package, directory, hub id)")


def run(args: argparse.Namespace) -> int:
    from gece.lmeval.export import loadable, model_dir

    command.check_id(args.model, "--model")
    params = require_params(args)
    print(model_dir(loadable(params, args.model)))
    return 0
