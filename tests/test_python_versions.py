"""The code fingerprints are the same on every Python gece supports (issue 60): the manifests of stage-code/, the
canonical syntax tree of every module and the code hashes of the token files and calibration fits, computed under
each other interpreter found on this machine, equal the ones of the running one.

They use the standard library only (gece.code: closure, syntax, manifests), so the other interpreter needs no
environment: it imports gece from src/ with nothing installed. Interpreters are looked for as python3.11 ...
python3.14 on PATH and under pyenv's versions; a version that is not found is skipped with the reason shown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gece.code import closure
from gece.code.manifests import manifests
from gece.code.syntax import source_hash
from gece.scoring import extraction

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.11", "3.12", "3.13", "3.14")
# the closures whose code hash a file records: a token file's (per backend) and a calibration fit's
HASHED = {
    **{
        f"tokens:{backend}": ("gece.scoring.extraction", {"gece.scoring.extraction": sorted(skip)})
        for backend in ("transformers", *extraction.BACKEND_MODULES)
        for skip in [{f for b, f in extraction.BACKEND_MODULES.items() if b != backend}]
    },
    "calibrate": ("gece.pipeline.calibrate", {}),
}

SCRIPT = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from gece.code import closure
from gece.code.manifests import manifests
from gece.code.syntax import source_hash
hashed = json.loads(sys.argv[1])
src = Path(closure.SRC)
assert src == Path(sys.argv[2]).resolve(), (src, sys.argv[2])
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "manifests": {str(p): t for p, t in manifests().items()},
    "files": {p.relative_to(src).as_posix(): source_hash(p) for p in sorted((src / "gece").rglob("*.py"))},
    "hashed": {k: closure.code_hash(closure.closure([m], skip_functions={a: set(b) for a, b in s.items()}),
                                    docstrings=False) for k, (m, s) in hashed.items()},
}))
"""


def interpreters() -> dict[str, str]:
    """minor version -> an interpreter of it found on PATH or under pyenv's versions."""
    found: dict[str, str] = {}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for minor in SUPPORTED:
        candidates = [shutil.which(f"python{minor}")]
        candidates += sorted(str(p) for p in pyenv.glob(f"{minor}.*/bin/python{minor}")) if pyenv.is_dir() else []
        for exe in filter(None, candidates):
            run = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True)
            if run.returncode == 0 and run.stdout.decode().strip() == minor:
                found[minor] = exe
                break
    return found


def fingerprints(exe: str) -> dict:
    run = subprocess.run(  # -I: isolated, no site-packages, no PYTHON* variables: the standard library only
        [exe, "-I", "-c", SCRIPT, json.dumps(HASHED), str(closure.SRC)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def here() -> dict:
    return {
        "manifests": {str(p): t for p, t in manifests().items()},
        "files": {
            p.relative_to(closure.SRC).as_posix(): source_hash(p) for p in sorted((closure.SRC / "gece").rglob("*.py"))
        },
        "hashed": {
            k: closure.code_hash(
                closure.closure([m], skip_functions={a: set(b) for a, b in s.items()}), docstrings=False
            )
            for k, (m, s) in HASHED.items()
        },
    }


def test_the_hashed_closures_are_the_ones_the_files_record(here):
    """The closures this test recomputes elsewhere are those gece records: a token file's code and a fit's."""
    from gece.pipeline import calibrate

    assert here["hashed"]["tokens:transformers"] == extraction.scoring_code("transformers")
    assert here["hashed"]["tokens:vllm"] == extraction.scoring_code("vllm")
    assert here["hashed"]["calibrate"] == calibrate.computation_code()
    assert here["hashed"]["tokens:transformers"] != here["hashed"]["tokens:vllm"]  # the adapter is vllm's alone


@pytest.mark.parametrize("minor", [v for v in SUPPORTED if v != f"{sys.version_info[0]}.{sys.version_info[1]}"])
def test_the_same_fingerprints_under_another_python(minor, here):
    exe = interpreters().get(minor)
    if exe is None:
        pytest.skip(f"no Python {minor} on this machine (python{minor} on PATH or pyenv's versions/{minor}.*)")
    there = fingerprints(exe)
    assert there["version"] == minor
    differ = sorted(f for f in here["files"] if there["files"].get(f) != here["files"][f])
    assert not differ, f"the canonical syntax tree differs under Python {minor}: {differ}"
    assert there["files"].keys() == here["files"].keys()
    assert there["manifests"] == here["manifests"], f"a manifest differs under Python {minor}"
    assert there["hashed"] == here["hashed"], f"a code hash differs under Python {minor}"
