"""docs/errors.md is executable: every refusal it lists (``**E-...** (commands)``) is triggered by a test marked
``@refusal`` (tests/refusals.py) for every command its entry names, and every id a test names is listed.
Also the refusal added with the list: strict types in params.yaml (E-PARAMS-TYPE)."""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from .conftest import ROOT
from .refusals import refusal
from .test_bad_input import cli, files
from .test_bad_input_families import PARAMS_COMMANDS, work  # noqa: F401  (work: the fixture)

ENTRY = re.compile(r"^- \*\*(E-[A-Z0-9-]+)\*\* \(([^)]*)\)", re.MULTILINE)


def documented() -> dict[str, set[str]]:
    """Each refusal id of docs/errors.md -> the commands (readers) its entry names."""
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    ids = [m.group(1) for m in ENTRY.finditer(text)]
    assert len(ids) == len(set(ids)), "an id is listed twice"
    return {m.group(1): {r.strip().strip("`") for r in m.group(2).split(",")} for m in ENTRY.finditer(text)}


def marked() -> dict[str, dict[str, set[str]]]:
    """Each id named by an ``@refusal(...)`` in tests/*.py -> {test: the readers it names}, read with ``ast``."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "refusal":
                    readers = next(ast.literal_eval(k.value) for k in deco.keywords if k.arg == "readers")
                    for arg in deco.args:
                        test = f"{path.relative_to(ROOT)}::{node.name}"
                        out.setdefault(ast.literal_eval(arg), {})[test] = set(readers)
    return out


def test_every_documented_refusal_is_triggered_by_a_test_for_every_reader():
    doc, tests = documented(), marked()
    assert len(doc) >= 30
    assert not sorted(set(doc) - set(tests)), "refusals in docs/errors.md that no @refusal test triggers"
    assert not sorted(set(tests) - set(doc)), "@refusal ids that docs/errors.md does not list"
    for rid, readers in doc.items():
        covered = set().union(*tests[rid].values())
        assert readers <= covered, f"{rid}: no test triggers it with {sorted(readers - covered)} ({tests[rid]})"


# ------------------------------------------------------------------ strict types
def _params_text(mutate) -> str:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    mutate(raw)
    return yaml.safe_dump(raw)


WRONG_TYPES = [  # (section, key, value as YAML writes it, what the message says)
    ("groups", "min_size", "true", "groups.min_size: Input should be a valid integer (got True): true and false"),
    ("metrics", "n_bins", "true", "metrics.n_bins: Input should be a valid integer (got True)"),
    ("metrics", "n_bins", "10.0", "metrics.n_bins: Input should be a valid integer (got 10.0): a whole number"),
    ("metrics", "n_bins", "'10'", "metrics.n_bins: Input should be a valid integer (got '10'): a quoted value is text"),
    ("metrics", "ci", "'0.95'", "metrics.ci: Input should be a valid number (got '0.95'): a quoted value is text"),
    ("metrics", "ci", "true", "metrics.ci: Input should be a valid number (got True)"),
    ("metrics", "ci", ".nan", "metrics.ci: Input should be a finite number"),
    ("compare", "alpha", ".inf", "alpha: Input should be a finite number"),
    ("calibrate", "folds", "5.5", "calibrate.folds: Input should be a valid integer"),
    ("metrics", "seed", "false", "metrics.seed: Input should be a valid integer (got False)"),
    ("registry", "special_tokens", "1", "special_tokens: Input should be a valid boolean (got 1)"),
    ("registry", "revision", "1234", "revision: Input should be a valid string (got 1234): quote it"),
]


def _set(raw: dict, section: str, key: str, value: object) -> None:
    if section == "registry":
        raw["registry"]["smollm2-135m"][key] = value
    elif section == "compare":
        raw["ablate"]["compare"][key] = value
    else:
        raw[section][key] = value


@refusal("E-PARAMS-TYPE", readers=("metrics", "validate", "calibrate", "prepare"))
@pytest.mark.parametrize(
    "section, key, value, message", WRONG_TYPES, ids=[f"{s}.{k}={v}" for s, k, v, _ in WRONG_TYPES]
)
@pytest.mark.parametrize("command", ["metrics", "validate", "calibrate", "prepare"])
def test_params_values_are_not_converted(work, capsys, section, key, value, message, command):  # noqa: F811
    text = _params_text(lambda r: _set(r, section, key, "@VALUE@")).replace("'@VALUE@'", value)
    (work / "p.yaml").write_text(text)
    before = files(work)
    code, err = cli(capsys, "--params", "p.yaml", *PARAMS_COMMANDS[command])
    assert code == 2 and "p.yaml: invalid parameters" in err and message in err, err
    assert files(work) == before


@pytest.mark.parametrize(
    "value, expected",
    [("1e-4", 1e-4), ("1.5e-1", 0.15), ("0.5", 0.5), ("5E-1", 0.5)],
)
def test_numbers_in_exponent_notation_are_numbers(work, capsys, value, expected):  # noqa: F811
    """YAML 1.1 (PyYAML) reads 1e-4 as text; gece reads it as YAML 1.2 and DVC do, a number. An integer is
    accepted where a number is (``fraction: 1`` is 1.0, then refused for its range, not its type)."""
    from gece.io.settings.params import load_params

    (work / "p.yaml").write_text(
        _params_text(lambda r: r["ablate"]["compare"].update(alpha="@V@")).replace("'@V@'", value)
    )
    assert load_params(work / "p.yaml").ablate.compare.alpha == expected
    (work / "p.yaml").write_text(_params_text(lambda r: r["calibrate"].update(fraction=1)))
    code, err = cli(capsys, "--params", "p.yaml", "calibrate", "s.parquet", "--out", "c.json")
    assert code == 2 and "calibrate.fraction: Input should be less than 1" in err and "valid number" not in err
