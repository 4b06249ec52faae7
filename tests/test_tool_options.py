"""The options of the commands that are no stage are checked when parsed (issue 37, family 2): a hostile value
is a usage error (exit 2) naming the option, before any git call, DVC call or model load; and the targets of
``gece repro`` and a ``file://`` remote are checked before any work (issue 37, minor items)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError

from gece.base.errors import GeceError
from gece.cli import build_parser, main
from gece.cmd import options
from gece.io.settings.extract_params import ExtractParams
from gece.io.settings.params import CalibrateParams
from gece.io.settings.sections import CompareParams, MetricsParams
from gece.tools import remote, repro

from .refusals import refusal

HOSTILE_NUMBERS = ["inf", "-inf", "nan", "NaN", "-1", "-0.5", "1e400", "", "abc", "²", "１", "0x10"]


@pytest.mark.parametrize("command", [["diff"], ["exp-summary"]])
@pytest.mark.parametrize("value", HOSTILE_NUMBERS)
@refusal("E-TOOL-OPTION", readers=("diff", "exp-summary"))
def test_a_tolerance_is_a_finite_number_of_zero_or_more(command, value, capsys):
    with pytest.raises(SystemExit) as e:
        main([*command, f"--tol={value}"])
    assert e.value.code == 2
    assert "argument --tol:" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "option"), [(["exp-summary"], "--max-metrics"), (["try", "m"], "--limit")])
@pytest.mark.parametrize("value", ["0", "-5", "1.5", "²", "١٢", "1e3", "", " ", "99999999999999999999", "nan"])
@refusal("E-TOOL-OPTION", readers=("exp-summary", "try"))
def test_a_count_is_a_whole_number_of_one_or_more_in_ascii_digits(command, option, value, capsys, monkeypatch):
    monkeypatch.setattr("gece.tools.try_model.try_model", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as e:
        main([*command, f"{option}={value}"])
    assert e.value.code == 2
    assert f"argument {option}:" in capsys.readouterr().err


def test_valid_values_pass():
    assert options.tolerance("0") == 0.0 and options.tolerance("1e-4") == 1e-4
    assert options.count("1") == 1 and options.count(" 12 ") == 12 and options.count("+3") == 3
    assert options.regex(r"runs\.winobias").search("runs.winobias.x")


@pytest.mark.parametrize("value", ["(", "[", "*", "+", "(?P<x", "\\", "a)"])
@refusal("E-TOOL-OPTION", readers=("exp-summary",))
def test_keep_is_a_valid_regex(value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["exp-summary", "--keep", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --keep:" in err and "not a valid regular expression" in err and "Traceback" not in err


def _stages(*names: str) -> list[repro.Stage]:
    return [repro.Stage(n, (), True) for n in names]


@refusal("E-REPRO-TARGET", readers=("repro",))
def test_repro_targets_name_stages_groups_or_files(tmp_path):
    known = _stages("metrics@winobias", "metrics@winoqueer", "report", "data.dvc")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "data.dvc").write_text("outs: []\n")
    repro.check_targets(
        ("metrics@winobias", "metrics", "report", "data.dvc", "dvc.yaml", "dvc.yaml:report"), known, tmp_path
    )
    with pytest.raises(GeceError) as e:
        repro.check_targets(("nosuchstage", "metrics@winobiass", "other.yaml:report"), known, tmp_path)
    problems = "\n".join(e.value.problems)
    assert "nosuchstage: no such stage" in problems
    assert "metrics@winobiass: no such stage (did you mean metrics@winobias" in problems
    assert "other.yaml:report: no such file other.yaml" in problems


@refusal("E-REPRO-TARGET", readers=("repro",))
def test_repro_refuses_an_unknown_stage_before_any_pull(tmp_path, monkeypatch):
    monkeypatch.setattr(repro, "stages", lambda root: _stages("report"))
    monkeypatch.setattr(repro, "pull", lambda *a, **k: pytest.fail("pulled before checking the targets"))
    monkeypatch.setattr(repro, "reproduce", lambda *a, **k: pytest.fail("ran before checking the targets"))
    with pytest.raises(GeceError, match="name no stage"):
        repro.repro(tmp_path, ("nosuchstage", "also-not"))


@refusal("E-PULL", readers=("pull",))
def test_a_file_url_remote_is_checked_as_the_directory_it_names(tmp_path):
    there = remote.Remote("origin", (tmp_path / "store dir").as_uri())
    assert there.local and there.path == tmp_path / "store dir"
    with pytest.raises(GeceError) as e:
        remote.check_remote(there)
    assert e.value.message.endswith(f"the directory does not exist: {tmp_path / 'store dir'}")
    (tmp_path / "store dir").mkdir()
    remote.check_remote(there)
    assert not remote.Remote("s3", "s3://bucket/x").local
    assert remote.Remote("plain", str(tmp_path)).path == Path(str(tmp_path))


# ------------------------------------------------------------------ every numeric option of every subcommand
def _options() -> list[tuple[str, argparse.Action]]:
    """(subcommand, action) for every option of every subcommand, read from the CLI's own parsers."""
    parser = build_parser(None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(name, a) for name, p in sub.choices.items() for a in p._actions if a.option_strings and a.nargs != 0]


OPTIONS = _options()
NUMERIC = [
    (name, max(a.option_strings, key=len), a.type)
    for name, a in OPTIONS
    if getattr(a.type, "__module__", "") == "gece.cmd.options" and a.type is not options.regex
]
NOT_NUMBERS = ["٣", "²", "１", "١٢", "1_0", "0x10", "nan", "inf", "-inf", "1e400", "", "abc"]


def test_every_typed_option_is_checked_by_gece_options():
    """A value argparse converts goes through gece.cmd.options (ASCII, finite, in range), never plain int() or
    float(), which read '٣' as 3 and 'nan' as a number: a new option of any subcommand is held to it."""
    loose = [
        f"{name} {max(a.option_strings, key=len)}: type {getattr(a.type, '__name__', a.type)}"
        for name, a in OPTIONS
        if a.type not in (None, Path) and getattr(a.type, "__module__", "") != "gece.cmd.options"
    ]
    assert not loose, loose
    assert {(n, o) for n, o, _ in NUMERIC} >= {
        ("metrics", "--n-bins"),
        ("calibrate", "--fraction"),
        ("calibrate", "--folds"),
        ("calibrate", "--seed"),
        ("compare", "--draws"),
        ("extract", "--limit"),
        ("extract", "--batch-size"),
        ("try", "--limit"),
        ("diff", "--tol"),
        ("exp-summary", "--tol"),
        ("exp-summary", "--max-metrics"),
    }


@pytest.mark.parametrize(("command", "option"), [(n, o) for n, o, _ in NUMERIC])
@refusal("E-OPTION-RANGE", readers=("metrics", "calibrate", "compare", "extract"))
def test_no_numeric_option_takes_a_unicode_digit_or_a_number_that_is_not_finite(command, option, capsys):
    parser = build_parser([command])  # gece's own parser, as main() builds it
    for value in NOT_NUMBERS:
        with pytest.raises(SystemExit) as e:  # a usage error while parsing: before any file is read
            parser.parse_args([command, f"{option}={value}"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"argument {option}:" in err and "Traceback" not in err, (value, err)


SETTINGS = [
    (MetricsParams, "n_bins", "1", "1000", ["0", "1001"]),
    (CalibrateParams, "fraction", "1e-3", "0.999", ["0", "1", "-0.5"]),
    (CalibrateParams, "folds", "2", "1000", ["1", "1001"]),
    (CalibrateParams, "seed", "0", "4294967295", ["-1", "4294967296"]),
    (CompareParams, "draws", "2000", "1000000", ["1999", "1000001"]),
    (ExtractParams, "limit", "1", "123456789", ["0", "-3"]),
    (ExtractParams, "batch_size", "1", "auto", ["0", "-1", "Auto", "1.5"]),
]


@pytest.mark.parametrize(("section", "name", "low", "high", "bad"), SETTINGS, ids=[s[1] for s in SETTINGS])
def test_a_stage_option_takes_the_bounds_of_its_params_key(section, name, low, high, bad):
    check = options.setting(section, name)
    for text in (low, high, str(section.model_fields[name].default)):
        if text == "None":
            continue
        value = check(text)
        assert section.model_validate({name: value}).model_dump()[name] == value  # params.yaml takes it too
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            check(text)
        with pytest.raises(ValidationError):  # ... and params.yaml refuses it as well
            section.model_validate({name: int(text) if text.lstrip("-").isdigit() else text})


# ------------------------------------------------------------------ id-valued options name themselves
ID_OPTIONS = [(name, max(a.option_strings, key=len)) for name, a in OPTIONS if a.dest in ("model", "benchmark")]
VALID = {"--model": "smollm2-135m", "--benchmark": "winobias"}


def _argv(command: str, option: str, value: str) -> list[str]:
    """``gece COMMAND OPTION VALUE`` with valid values for the command's other required options."""
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    argv = [command, option, value]
    for a in sub._actions:
        flag = max(a.option_strings, key=len) if a.option_strings else None
        if a.required and flag and flag != option:
            argv += [flag, VALID.get(flag, "out.json")]
        elif a.required and not flag and a.nargs is None:
            argv.insert(1, "m")  # try's model source
    return argv


@pytest.mark.parametrize(("command", "option"), ID_OPTIONS, ids=[f"{c} {o}" for c, o in ID_OPTIONS])
def test_an_unknown_id_is_an_error_naming_its_option(command, option, tmp_path, monkeypatch, capsys):
    """An id of the right form that names nothing (``gece special-tokens --model 0``) is refused with the
    option's name, not only the id or a file derived from it."""
    from .conftest import ROOT

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_bytes((ROOT / "params.yaml").read_bytes())
    monkeypatch.setattr("gece.scoring.models.load", lambda *a, **k: pytest.fail("a model was loaded"))
    assert main(_argv(command, option, "0")) == 2
    err = capsys.readouterr().err
    assert f"{option} '0'" in err and "Traceback" not in err, err
