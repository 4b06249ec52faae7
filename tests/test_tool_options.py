"""The options of the commands that are no stage are checked when parsed (issue 37, family 2): a hostile value
is a usage error (exit 2) naming the option, before any git call, DVC call or model load; and the targets of
``gece repro`` and a ``file://`` remote are checked before any work (issue 37, minor items)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gece.cli import main
from gece.errors import GeceError
from gece.tools import options, remote, repro

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
