"""dvc.yaml is what the stage declarations write (issue 62), its code deps name the code each stage runs (issues 15
and 48), and gece has no import cycle.

``gece stage-deps`` (``make deps``) writes every stage a command module declares (``STAGE``, gece.cmd.stage) and
keeps what it does not declare (the lines above ``stages:``, comments between stages, stages added by hand).
For every stage of dvc.yaml (each template under ``stages:``; ``do:`` for foreach), its command
``gece [global options] <command> ...`` runs cli.py and the module that implements the command: its code
dep must be the manifest of that command, ``stage-code/<command>.txt`` (gece.code.manifests: the files of
closure(cli.py, gece/__init__.py) | closure(module), each by what its code does; tests/test_stage_code.py
checks the manifests), and no ``.py`` file: a missing manifest means a change leaves `dvc repro` believing a
result is up to date; a .py dep reruns a stage for a comment.

Package data (CSS, templates read with importlib.resources) is not Python: a stage declares it
(``package_data``); such deps are neither required nor flagged here.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from gece.base.errors import GeceError
from gece.cmd import command
from gece.cmd.stage import Output, Resolved, resolve
from gece.code import manifests
from gece.code.closure import (
    Tree,
    closure,
    code_hash,
    command_closure,
    command_names,
    cycles,
    describe_cycle,
    file_imports,
    module_graph,
)
from gece.code.manifests import FOLDER, manifest_path
from gece.io.paths import layout
from gece.tools.stage_deps import declared, generate, with_stages

ROOT = Path(__file__).resolve().parents[1]
CODE = "src/gece"
MANIFESTS = FOLDER.as_posix()
CODE_STAGE = "code"  # runs `gece stage-code`; depends on src/gece as a whole, writes the manifests

# The only stages whose code dep is not their command's manifest: they depend on the manifest of every stage's command
# on purpose. Keep this short, with the reason.
WHOLE_PACKAGE = {
    "report": "the page shows a fingerprint of every stage's code, so any change of what that code does redraws it",
}
# The commands whose stages a user adds by hand (one `dvc stage add` per benchmark, docs/lmeval.md) and that
# depend on the whole package: one dep to type, and a stage of seconds re-run by any code change.
WHOLE_PACKAGE_COMMANDS = {
    "lmeval-import": "its stages are added with dvc stage add (docs/lmeval.md): src/gece is the one code dep to type",
}


def gece_command(cmd: str, known: set[str]) -> str | None:
    """The subcommand of ``gece [global options] <command> ...``; None for a command that is not gece's."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if not words or Path(words[0]).name != "gece":
        return None
    return next((w for w in words[1:] if w in known), None)


def dvc_stages(dvc_yaml: Path = ROOT / "dvc.yaml") -> dict[str, dict]:
    """Each stage template of dvc.yaml (the ``do:`` body for foreach stages): {name: definition}."""
    stages = yaml.safe_load(dvc_yaml.read_text(encoding="utf-8"))["stages"]
    return {name: spec.get("do", spec) for name, spec in stages.items()}


def stage_commands(spec: dict) -> list[str]:
    cmd = spec.get("cmd", [])
    return [cmd] if isinstance(cmd, str) else list(cmd)


def dep_paths(spec: dict) -> list[str]:
    """The stage's deps as written (a dep may be a string or a one-key mapping), without a trailing /."""
    deps = [next(iter(d)) if isinstance(d, dict) else d for d in spec.get("deps", [])]
    return [str(d).rstrip("/") for d in deps]


def code_deps(spec: dict, root: Path = ROOT) -> tuple[set[str], list[str]]:
    """The stage's deps that are code (under src/gece, .py files or folders; the manifests, or their folder),
    and those that name nothing on disk."""
    covered: set[str] = set()
    absent = []
    for dep in dep_paths(spec):
        if not any(dep == top or dep.startswith(top + "/") for top in (CODE, MANIFESTS)):
            continue
        path = root / dep
        if not path.exists():
            absent.append(dep)
        elif path.is_dir() or path.suffix in (".py", ".txt"):
            covered.add(dep)
    return covered, absent


def expected_code(spec: dict, known: set[str], tree: Tree) -> tuple[set[str], list[str], list[str]]:
    """The closure of the stage's gece commands, the commands it runs, and those that are not gece's."""
    expected: set[str] = set()
    subs, foreign = [], []
    for cmd in stage_commands(spec):
        sub = gece_command(cmd, known)
        if sub is None:
            foreign.append(cmd)
        else:
            subs.append(sub)
            expected |= command_closure(sub, tree)
    return expected, subs, foreign


def deps_report(root: Path = ROOT) -> dict[str, list[str]]:
    """{stage: [problem, ...]} for every stage whose code deps are not its command's manifest."""
    tree = Tree(root=root, src=root / "src")
    known = set(command_names(tree))
    problems: dict[str, list[str]] = {}
    for name, spec in dvc_stages(root / "dvc.yaml").items():
        found = []
        _, subs, foreign = expected_code(spec, known, tree)
        covered, absent = code_deps(spec, root)
        found += [f"runs a command that is not `gece <command>`: {cmd!r}" for cmd in foreign]
        found += [f"dep names no file or folder: {dep}" for dep in absent]
        if name == CODE_STAGE or subs == ["stage-code"]:
            expected, why = {CODE}, "it writes the manifests from every module"
        elif any(s in WHOLE_PACKAGE_COMMANDS for s in subs):
            expected, why = {CODE}, next(WHOLE_PACKAGE_COMMANDS[s] for s in subs if s in WHOLE_PACKAGE_COMMANDS)
        elif name in WHOLE_PACKAGE:
            expected, why = {manifest_path(c).as_posix() for c in manifests.stage_commands(tree)}, WHOLE_PACKAGE[name]
        else:
            expected, why = {manifest_path(s).as_posix() for s in subs}, "the manifest of the code its command runs"
        missing, extra = sorted(expected - covered), sorted(covered - expected)
        if missing:
            found.append(f"missing: {', '.join(missing)} ({why})")
        if extra:
            found.append(f"extra: {', '.join(extra)} (the code dep is {', '.join(sorted(expected))}: {why})")
        if found:
            problems[f"{name} (gece {' + '.join(subs) or '?'})"] = found
    return problems


@pytest.fixture(scope="module")
def stages() -> list[Resolved]:
    """Every declared stage, resolved against the repository's params.yaml (imports every stage's module)."""
    return declared(Tree(), ROOT / "params.yaml")


def test_dvc_yaml_is_what_gece_stage_deps_writes(stages):
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert generate(text, stages) == text, "dvc.yaml is not what the stage declarations write: run `make deps`"


def _block(text: str, name: str) -> str:
    """The lines of stage ``name`` in dvc.yaml's ``text``, up to the blank line after it."""
    start = text.index(f"\n  {name}:\n") + 1
    return text[start : text.index("\n\n", start) + 2]


def test_stage_deps_writes_every_declared_stage_whole_and_keeps_the_rest(stages):
    """A declared stage is written whole from its declaration (a dep, a param, a comment edited by hand, the stage
    deleted: all back); the lines above ``stages:``, a comment between stages, a stage added by hand and a comment
    after the last stage are kept where they were. A second run changes nothing."""
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    hand = "# a note above the stages, by hand\n"
    between = "  # a note between two stages, by hand\n"
    user = "  by-hand:\n    cmd: python -c pass\n    deps:\n    - data   # what it reads\n\n    outs:\n    - x.txt\n"
    last = "  # the last word\n"
    edited = _block(text, "score").replace("      - stage-code/score.txt\n", "      - src/gece/pipeline/score.py\n")
    edited = edited.replace("      - extract.side_prob\n", "").replace("    # a word's", "    # edited: a word's")
    stale = hand + text.replace(_block(text, "summary"), "").replace(_block(text, "score"), edited)
    stale = stale.replace("\n  metrics:\n", "\n" + between + "  metrics:\n") + "\n" + user + last
    expected = hand + text.replace("\n  metrics:\n", "\n" + between + "  metrics:\n") + "\n" + user + "\n" + last
    assert generate(stale, stages) == expected
    assert generate(expected, stages) == expected


def test_a_stage_added_with_dvc_stage_add_is_kept_and_the_rest_stays_as_it_was(tmp_path, stages):
    """``dvc stage add`` (``gece lmeval-stages``) rewrites the whole of dvc.yaml in DVC's layout; ``with_stages`` keeps
    its new stage and nothing else of the rewrite, and ``gece stage-deps`` then keeps the stage and changes nothing."""
    from gece.lmeval.dvc_stages import stage_add, stage_name

    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    (tmp_path / "dvc.yaml").write_text(text, encoding="utf-8")
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")  # the matrices' values
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], stage_add("smol-lm", "winobias", Path("lm"))):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    after = (tmp_path / "dvc.yaml").read_text(encoding="utf-8")
    assert after != text and "lmeval-import-smol-lm-winobias" in after  # DVC's layout: the other stages moved too
    kept = with_stages(text, after, [stage_name("smol-lm", "winobias")])
    assert kept.startswith(text) and "\n  lmeval-import-smol-lm-winobias:\n    cmd: gece lmeval-import" in kept
    assert generate(kept, stages) == kept
    assert (
        yaml.safe_load(kept)["stages"]["lmeval-import-smol-lm-winobias"]
        == yaml.safe_load(after)["stages"]["lmeval-import-smol-lm-winobias"]
    )


def test_a_stages_deps_are_what_its_command_reads_but_records_and_its_own_outputs():
    """gece.cmd.stage.resolve: the placeholder of each axis goes back to ``${item.<axis>}``; of the reads, DVC's records
    (dvc.lock, *.dvc) and the stage's own outputs (or a folder around them) are no deps; the code dep follows; a
    declaration that names what the command does not declare is refused."""
    module = types.ModuleType("toy")
    module.add_arguments = lambda p: p.add_argument("--model", required=True)  # type: ignore[attr-defined]
    module.reads = lambda a: [  # type: ignore[attr-defined]
        *(Path("artifacts/prepared"), Path("artifacts/tokens"), Path("dvc.lock"), Path("data.dvc")),
        layout.tokens_dir(a.model) / "winobias.parquet",
    ]
    module.writes = lambda a: {"tokens": command.Output(layout.tokens_dir(a.model), "folder")}  # type: ignore[attr-defined]
    stage = {
        "name": "toy",
        "about": "a toy",
        "argv": ["-q", "toy", "--model", "{model}"],
        "matrix": {"model": "models"},
        "params": ["registry.{model}"],
        "outputs": {"tokens": {"note": "its tokens"}},
        "notes": {"registry.{model}": "its entry"},
    }
    found = resolve(stage, module, "toy", ["toy"])
    assert found.cmd == "gece -q toy --model ${item.model}" and found.matrix == {"model": "${models}"}
    assert found.deps == [("artifacts/prepared", ""), ("stage-code/toy.txt", "")]
    assert found.outs == [("artifacts/tokens/${item.model}", Output(note="its tokens"))]
    assert found.params == [("registry.${item.model}", "its entry")]
    for wrong, message in (
        ({"outputs": {"the scores": {}}}, "'the scores' is no output of the command"),
        ({"notes": {"data": "x"}}, "'data' is no dep or params key"),
        ({"argv": ["toy", "--model", "{benchmark}"]}, "not an axis of the stage"),
        ({"argv": ["toy"]}, "the following arguments are required: --model"),
        ({"code": "all"}, "not a stage declaration"),
        ({"foreach": ["model", "ablate.special_tokens"]}, "a matrix or a foreach, not both"),
    ):
        with pytest.raises(GeceError) as e:
            resolve(stage | wrong, module, "toy", ["toy"])
        assert message in f"{e.value.message} {e.value.problems}", (wrong, e.value.message, e.value.problems)


def test_stage_code_deps_are_the_manifests():
    problems = deps_report()
    lines = [f"  {stage}:\n" + "\n".join(f"    - {p}" for p in found) for stage, found in problems.items()]
    if problems:
        pytest.fail(
            "dvc.yaml code deps are not the manifest of each stage's command (`make deps` writes them):\n"
            + "\n".join(lines),
            pytrace=False,
        )


def test_whole_package_exceptions_are_stages():
    assert set(WHOLE_PACKAGE) <= set(dvc_stages()), "WHOLE_PACKAGE names a stage that dvc.yaml does not have"


def _cycles_message(graph) -> str:
    return "\n".join(f"  {' <-> '.join(members)}: {describe_cycle(cycle, graph)}" for members, cycle in cycles(graph))


def test_no_import_cycle_at_module_level():
    """No cycle among the imports that run when a module is imported (outside functions): such a cycle
    makes the result depend on which module is imported first."""
    graph = module_graph(module_level_only=True)
    if cycles(graph):
        pytest.fail("import cycles at module level in src/gece:\n" + _cycles_message(graph), pytrace=False)


def test_no_import_cycle_between_modules():
    """No cycle among gece's modules counting lazy imports (inside functions) too: a lazy import that
    closes a cycle hides it from Python, not from the design (issue 15 names scoring.models <->
    scoring.vllm_backend)."""
    graph = module_graph(module_level_only=False)
    if cycles(graph):
        pytest.fail(
            "import cycles between src/gece modules (lazy imports included):\n" + _cycles_message(graph), pytrace=False
        )


# ------------------------------------------------------------------ the stage-independent core
# The core: the files in the code deps of every stage of dvc.yaml that has more than one (the report depends on the
# package as a whole, WHOLE_PACKAGE). An edit there re-runs every stage, so it holds only what every stage runs:
# the command line, the consoles, the checked reads and atomic writes, params.yaml's loader, the ids, the artifacts'
# paths (docs/development.md, "Architecture"). Counted in physical lines, as issue 48 counts it.
CORE_LINES = 1500


def stage_independent_core(root: Path = ROOT) -> dict[str, int]:
    """{file: physical lines} of the files in the import closure of every stage's command(s)."""
    tree = Tree(root=root, src=root / "src")
    known = set(command_names(tree))
    closures = [
        expected_code(spec, known, tree)[0]
        for name, spec in dvc_stages(root / "dvc.yaml").items()
        if name not in WHOLE_PACKAGE and name != CODE_STAGE  # `code` runs only what writes the manifests
    ]
    core = set.intersection(*(c for c in closures if len(c) > 1))
    return {f: len((root / f).read_text(encoding="utf-8").splitlines()) for f in sorted(core)}


def test_the_stage_independent_core_is_small():
    core = stage_independent_core()
    listed = "\n".join(f"  {n:5d} {f}" for f, n in sorted(core.items(), key=lambda kv: -kv[1]))
    assert sum(core.values()) < CORE_LINES, (
        f"the stage-independent core has {sum(core.values())} lines (at most {CORE_LINES}): every stage runs\n"
        f"{listed}\nmove what only some stages need into a module of their own (docs/development.md)"
    )
    assert "src/gece/cli.py" in core and "src/gece/io/settings/params_file.py" in core  # it is computed, not empty


# ------------------------------------------------------------------ layers: imports point down only
# The package's layers, lowest first (docs/development.md, "Architecture"): a module may import from its own
# layer and the layers below it, never from one above nor from a sibling. ``gece`` is the package's __init__.py.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("gece", "gece.base")),  # the numeric environment, GeceError, kill points, progress, terminal text
    ("catalog", ("gece.catalog",)),  # the declarations: metrics, scoring rules, calibration methods, groupings
    ("code", ("gece.code",)),  # code fingerprints: import closures, canonical syntax trees, manifests
    ("stats", ("gece.stats",)),  # pure numpy: no file, no option
    ("io", ("gece.io",)),  # the file boundary: paths, settings, schemas, files, formats
    ("scoring", ("gece.scoring",)),  # language models -> token log-probabilities
    ("report", ("gece.report",)),  # tables, findings, figures and the page, from report data
    ("protocols", ("gece.protocols",)),  # one module per protocol and their declarations (gece.report.protocol)
    ("command", ("gece.cmd",)),  # what the command modules share (options checked as parsed; run tables)
    ("pipeline", ("gece.pipeline",)),  # one module per DVC stage
    ("tools", ("gece.tools",)),  # the commands that are no stage
    ("lmeval", ("gece.lmeval",)),  # lm-evaluation-harness: tasks out, logged samples in
    ("cli", ("gece.cli", "gece.cli_help")),  # the command table; the help, imported only when shown
)
# layers side by side on one level: both sit on the layers below them, and neither imports the other
SIBLINGS: tuple[tuple[str, ...], ...] = (("stats", "io"),)


def level_of(layer: int) -> int:
    """The level of the layer at index ``layer`` of LAYERS: the index of the lowest layer of its SIBLINGS group,
    else its own index."""
    name = LAYERS[layer][0]
    group = next((g for g in SIBLINGS if name in g), (name,))
    return min(i for i, (n, _) in enumerate(LAYERS) if n in group)


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer that holds ``module`` (the longest prefix that names one)."""
    best, found = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    if found is None:
        raise LookupError(f"{module} is in no layer of LAYERS (tests/test_stage_deps.py): add it")
    return found


def test_imports_point_down_only():
    """No module imports from a layer above its own or from a sibling (lazy imports included): the numeric core
    and the file boundary know nothing of each other, the report knows no stage, no stage knows a tool."""
    graph = module_graph(module_level_only=False)
    up = []
    for importer, targets in sorted(graph.items()):
        for target, imp in sorted(targets.items()):
            a, b = layer_of(importer), layer_of(target)
            if level_of(b) > level_of(a) or (level_of(b) == level_of(a) and b != a):
                up.append(f"{importer} ({LAYERS[a][0]}) imports {target} ({LAYERS[b][0]}), line {imp.line}")
    assert not up, "imports that point up a layer or across to a sibling:\n  " + "\n  ".join(up)


def test_no_private_name_is_imported_across_modules():
    """``from gece.x import _name`` couples a module to another's internals: a name used elsewhere is public."""
    tree = Tree()
    found = []
    for path in sorted((ROOT / CODE).rglob("*.py")):
        for imp in file_imports(path, tree):
            if tree.ours(imp.module):
                found += [
                    f"{tree.rel(path)}:{imp.line}: {imp.module}.{n}"
                    for n in imp.names
                    if n.startswith("_") and not n.startswith("__")
                ]
    assert not found, "private names imported from another module:\n  " + "\n  ".join(found)


def test_every_command_has_its_help_in_its_module():
    """``gece --help`` reads each command's HELP from the module's source (cli_help.help_line): every command
    module has one, a plain string, equal to what the module holds when imported."""
    import importlib

    from gece import cli, cli_help

    for name, module_name in cli.COMMANDS.items():
        line = cli_help.help_line(module_name)
        assert isinstance(line, str) and line.strip(), name
        assert line == importlib.import_module(module_name).HELP, name


# ------------------------------------------------------------------ closure.py on a fake package
def _write(root: Path, files: dict[str, str]) -> Tree:
    for rel, text in files.items():
        path = root / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Tree(root=root, src=root / "src", package="pkg")


def _closure(tree: Tree, *roots: str) -> set[str]:
    return {p.removeprefix("src/pkg/") for p in closure(roots, tree)}


@pytest.fixture
def fake(tmp_path) -> Tree:
    return _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/leaf.py": "import os\nimport numpy as np\n",
            "pkg/other.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "",
            "pkg/sub/b.py": "X = 1\n",
            "pkg/sub/deep/__init__.py": "",
            "pkg/sub/deep/c.py": "",
            "pkg/sub/deep/d.py": "",
            # each form of import, one module each
            "pkg/m_import.py": "import pkg.sub.a\n",
            "pkg/m_import_as.py": "import pkg.sub.a as a\n",
            "pkg/m_from_attr.py": "from pkg.sub.b import X\n",
            "pkg/m_from_submodule.py": "from pkg.sub import a, B_UNKNOWN\n",
            "pkg/m_from_dot.py": "from . import leaf\n",
            "pkg/sub/m_rel.py": "from .b import X\nfrom .deep import c\n",
            "pkg/sub/deep/m_up2.py": "from ..a import something\nfrom ... import other\n",
            "pkg/sub/deep/m_dotdot.py": "from .. import b\n",
            "pkg/m_lazy.py": "def f():\n    from pkg import leaf\n\nclass C:\n"
            "    def g(self):\n        import pkg.other\n",
            "pkg/m_if.py": "import sys\nif sys.version_info > (3,):\n    from pkg import leaf\n"
            "try:\n    import pkg.other\nexcept ImportError:\n    pass\n",
            "pkg/m_type_checking.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import leaf\n",
            "pkg/m_importlib.py": "import importlib\n\ndef f():\n    return importlib.import_module('pkg.sub.a')\n",
            "pkg/m_importlib_rel.py": "from importlib import import_module\nimport_module('.leaf', package='pkg')\n",
            "pkg/m_importlib_dynamic.py": "import importlib\nname = 'pkg.leaf'\nimportlib.import_module(name)\n",
            "pkg/m_star.py": "from pkg.sub import *\n",
            "pkg/m_chain.py": "from pkg import m_import\n",
            "pkg/m_missing.py": "import pkg.nothing\nfrom pkg.sub.nothing import x\n",
            "pkg/m_third_party.py": "import json\nimport numpy\nfrom pandas import DataFrame\nimport pkgx\n",
            "pkg/m_cycle_a.py": "from pkg import m_cycle_b\n",
            "pkg/m_cycle_b.py": "def f():\n    from pkg import m_cycle_a\n",
        },
    )


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("pkg.leaf", {"__init__.py", "leaf.py"}),
        ("pkg.m_import", {"__init__.py", "m_import.py", "sub/__init__.py", "sub/a.py"}),
        ("pkg.m_import_as", {"__init__.py", "m_import_as.py", "sub/__init__.py", "sub/a.py"}),
        ("pkg.m_from_attr", {"__init__.py", "m_from_attr.py", "sub/__init__.py", "sub/b.py"}),
        ("pkg.m_from_submodule", {"__init__.py", "m_from_submodule.py", "sub/__init__.py", "sub/a.py"}),
        ("pkg.m_from_dot", {"__init__.py", "m_from_dot.py", "leaf.py"}),
        (
            "pkg.sub.m_rel",
            {"__init__.py", "sub/__init__.py", "sub/m_rel.py", "sub/b.py", "sub/deep/__init__.py", "sub/deep/c.py"},
        ),
        (
            "pkg.sub.deep.m_up2",
            {"__init__.py", "sub/__init__.py", "sub/deep/__init__.py", "sub/deep/m_up2.py", "sub/a.py", "other.py"},
        ),
        (
            "pkg.sub.deep.m_dotdot",
            {"__init__.py", "sub/__init__.py", "sub/deep/__init__.py", "sub/deep/m_dotdot.py", "sub/b.py"},
        ),
        ("pkg.m_lazy", {"__init__.py", "m_lazy.py", "leaf.py", "other.py"}),
        ("pkg.m_if", {"__init__.py", "m_if.py", "leaf.py", "other.py"}),
        ("pkg.m_type_checking", {"__init__.py", "m_type_checking.py", "leaf.py"}),
        ("pkg.m_importlib", {"__init__.py", "m_importlib.py", "sub/__init__.py", "sub/a.py"}),
        ("pkg.m_importlib_rel", {"__init__.py", "m_importlib_rel.py", "leaf.py"}),
        ("pkg.m_importlib_dynamic", {"__init__.py", "m_importlib_dynamic.py"}),  # a computed name: out of scope
        ("pkg.m_star", {"__init__.py", "m_star.py", "sub/__init__.py"}),
        ("pkg.m_chain", {"__init__.py", "m_chain.py", "m_import.py", "sub/__init__.py", "sub/a.py"}),
        ("pkg.m_missing", {"__init__.py", "m_missing.py", "sub/__init__.py"}),  # a name that is no module: ignored
        ("pkg.m_third_party", {"__init__.py", "m_third_party.py"}),
        ("pkg.sub.deep", {"__init__.py", "sub/__init__.py", "sub/deep/__init__.py"}),
    ],
)
def test_closure_import_forms(fake, module, expected):
    assert _closure(fake, module) == expected


def test_closure_follows_package_init(tmp_path):
    """A package's __init__.py runs on the way to its submodules, and what it imports is followed."""
    tree = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from pkg.sub import impl\n",
            "pkg/sub/impl.py": "from pkg import util\n",
            "pkg/sub/x.py": "",
            "pkg/util.py": "",
            "pkg/user.py": "from pkg.sub.x import y\n",
        },
    )
    assert _closure(tree, "pkg.user") == {
        "__init__.py",
        "user.py",
        "sub/__init__.py",
        "sub/x.py",
        "sub/impl.py",
        "util.py",
    }


def test_closure_of_files_and_paths(fake):
    """Roots may be files; paths come back relative to the repository root."""
    assert closure([fake.src / "pkg" / "m_from_dot.py"], fake) == {
        "src/pkg/__init__.py",
        "src/pkg/m_from_dot.py",
        "src/pkg/leaf.py",
    }
    with pytest.raises(ValueError):
        closure(["pkg.nothing"], fake)


def test_closure_skip_functions(fake):
    tree = _write(
        fake.root,
        {
            "pkg/cli.py": "def cmd_a():\n    from pkg import leaf\n\ndef cmd_b():\n"
            "    from pkg import other\n\ndef helper():\n    from pkg.sub import a\n"
        },
    )
    assert _closure(tree, "pkg.cli") == {"__init__.py", "cli.py", "leaf.py", "other.py", "sub/__init__.py", "sub/a.py"}
    assert closure(["pkg.cli"], tree, {"pkg.cli": {"cmd_b"}}) == closure(["pkg.cli"], tree) - {"src/pkg/other.py"}


def test_cycles(fake):
    lazy = module_graph(fake, module_level_only=False)
    assert [c for _, c in cycles(lazy)] == [["pkg.m_cycle_a", "pkg.m_cycle_b", "pkg.m_cycle_a"]]
    assert "in a function" in describe_cycle(["pkg.m_cycle_a", "pkg.m_cycle_b", "pkg.m_cycle_a"], lazy)
    assert cycles(module_graph(fake, module_level_only=True)) == []


def test_commands_from_cli(fake):
    """COMMANDS of cli.py is read without importing it."""
    from gece.code.closure import commands

    tree = _write(
        fake.root,
        {
            "pkg/cli.py": "import importlib\nCOMMANDS: dict[str, str] = {'go': 'pkg.leaf', "
            "'rel': 'pkg.sub.a'}\n\ndef main(name):\n    return importlib.import_module(COMMANDS[name])\n"
        },
    )
    assert commands(tree) == {"go": "pkg.leaf", "rel": "pkg.sub.a"}
    assert command_names(tree) == ["go", "rel"]
    assert {p.removeprefix("src/pkg/") for p in command_closure("rel", tree)} == {
        "__init__.py",
        "cli.py",
        "sub/__init__.py",
        "sub/a.py",
    }


def test_stage_parsing(tmp_path):
    """Commands as a folded string or a list, global options before the command, foreach templates."""
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  one:\n    matrix:\n      b: [x]\n    cmd: >-\n      gece -q --params p.yaml metrics a.parquet\n"
        "      --out o.json\n    deps:\n      - src/gece/stats/metrics.py\n      - src/gece/scoring/\n"
        "  two:\n    foreach: [a, b]\n    do:\n      cmd:\n        - gece prepare x y\n        - python -c pass\n"
        "      deps: [src/gece/nothing.py, data]\n",
        encoding="utf-8",
    )
    stages = dvc_stages(tmp_path / "dvc.yaml")
    known = {"metrics", "prepare"}
    assert [gece_command(c, known) for c in stage_commands(stages["one"])] == ["metrics"]
    assert [gece_command(c, known) for c in stage_commands(stages["two"])] == ["prepare", None]
    assert dep_paths(stages["one"]) == ["src/gece/stats/metrics.py", "src/gece/scoring"]
    assert code_deps(stages["one"], ROOT) == ({"src/gece/stats/metrics.py", "src/gece/scoring"}, [])
    assert code_deps(stages["two"], ROOT) == (set(), ["src/gece/nothing.py"])


def test_an_lmeval_import_stage_added_as_documented_depends_on_the_package(tmp_path):
    """docs/lmeval.md's `dvc stage add` import stages (deps: the lm-eval output, the prepared pairs, src/gece) pass
    the closure check; one that lists part of the package does not."""
    import shutil

    shutil.copytree(ROOT / CODE, tmp_path / CODE, ignore=shutil.ignore_patterns("__pycache__"))
    stage = {
        "cmd": "gece lmeval-import --model smollm2-135m-lmeval --benchmark winobias",
        "deps": ["lmeval/out/smollm2-135m", "artifacts/prepared/winobias.parquet", CODE],
    }
    partial = {**stage, "deps": ["lmeval/out/smollm2-135m", "src/gece/lmeval"]}
    stages = {"lmeval-import-winobias": stage, "lmeval-import-crows_pairs": partial}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}), encoding="utf-8")
    problems = deps_report(tmp_path)
    assert list(problems) == ["lmeval-import-crows_pairs (gece lmeval-import)"], problems
    why = WHOLE_PACKAGE_COMMANDS["lmeval-import"]
    assert problems["lmeval-import-crows_pairs (gece lmeval-import)"] == [
        f"missing: {CODE} ({why})",
        f"extra: src/gece/lmeval (the code dep is {CODE}: {why})",
    ]


def test_code_hash_counts_what_the_code_does(tmp_path):
    """gece.code.closure.code_hash: a comment, a blank line or a reflow changes nothing; a statement does; docstrings
    count unless left out; a module's path is part of it."""
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    mod = src / "m.py"
    tree = Tree(root=tmp_path, src=tmp_path / "src", package="pkg")

    def digest(text: str, docstrings: bool = True) -> str:
        mod.write_text(text)
        return code_hash(["src/pkg/__init__.py", "src/pkg/m.py"], tree, docstrings)

    base = digest('"""Doc."""\n\n\ndef f(x):\n    return x + 1\n')
    assert digest('"""Doc."""\n\n# a comment\n\ndef f(x):  # why\n    return (\n        x + 1\n    )\n') == base
    assert digest('"""Doc."""\n\n\ndef f(x):\n    return x + 2\n') != base
    assert digest('"""Other."""\n\n\ndef f(x):\n    return x + 1\n') != base
    assert digest('"""Other."""\n\n\ndef f(x):\n    return x + 1\n', docstrings=False) == digest(
        '"""Doc."""\n\n\ndef f(x):\n    """More."""\n    return x + 1\n', docstrings=False
    )
    mod.write_text('"""Doc."""\n\n\ndef f(x):\n    return x + 1\n')
    (src / "n.py").write_text(mod.read_text())
    assert code_hash(["src/pkg/__init__.py", "src/pkg/n.py"], tree) != base


TOY = """\"\"\"``gece toy``: a toy stage, one per benchmark: how many pairs it has.\"\"\"

import argparse
from pathlib import Path

from gece.io.files.outputs import write_text
from gece.io.files.readers import read_table
from gece.io.paths import layout

HELP = "count a benchmark's prepared pairs (a toy stage)"
EXAMPLES = ("gece toy --benchmark winobias",)
STAGE = {
    "name": "toy",
    "about": "a toy stage: how many pairs each benchmark has",
    "argv": ["-q", "toy", "--benchmark", "{benchmark}"],
    "matrix": {"benchmark": "benchmarks"},
    "params": ["prepare"],
    "notes": {"prepare": "the duplicates rule"},
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)


def reads(args: argparse.Namespace) -> list[Path]:
    return [layout.prepared_path(args.benchmark)]


def writes(args: argparse.Namespace) -> dict[str, Path]:
    return {"the count": layout.REPORTS / "toy" / f"{args.benchmark}.txt"}


def run(args: argparse.Namespace) -> int:
    write_text(writes(args)["the count"], f"{len(read_table(reads(args)[0])[0])}\\n")
    return 0
"""
TOY_STAGE = """
  toy:
    # a toy stage: how many pairs each benchmark has
    matrix:
      benchmark: ${benchmarks}
    cmd: gece -q toy --benchmark ${item.benchmark}
    deps:
      - artifacts/prepared/${item.benchmark}.parquet
      - stage-code/toy.txt
    params:
      - prepare   # the duplicates rule
    outs:
      - reports/toy/${item.benchmark}.txt
"""


def test_a_toy_stage_is_its_module_and_its_line_in_commands(tmp_path):
    """Issue 62: a stage is one unit. In a copy of the repository, a toy command's module (its ``STAGE``, ``reads``,
    ``writes``) and its line in cli.py's ``COMMANDS`` are all the code a new stage needs: ``gece stage-code`` writes
    its manifest, ``gece stage-deps`` its stage (the deps and outputs its module declares) and the report's dep on its
    manifest. ``--check`` exits 2 on a stale dvc.yaml and 0 once it is written."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    (repo / "dvc.yaml").write_text(text.replace("stage-code/score.txt", "stage-code/metrics.txt"), encoding="utf-8")
    (repo / "src/gece/pipeline/toy.py").write_text(TOY, encoding="utf-8")
    cli = repo / "src/gece/cli.py"
    line = '"report": "gece.pipeline.report",\n'
    cli.write_text(cli.read_text().replace(line, line + '    "toy": "gece.pipeline.toy",\n'))
    runs = "[['stage-deps', '--check'], ['stage-code'], ['stage-deps'], ['stage-deps', '--check']]"
    script = f"from gece.cli import main; print([main(a) for a in {runs}])"  # one process: the imports once
    res = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo / "src")},
        capture_output=True,
        text=True,
    )
    assert res.stdout.strip().splitlines()[-1] == "[2, 0, 0, 0]", res.stdout + res.stderr
    assert "is out of date" in res.stderr and "make deps" in res.stderr, res.stderr
    report = text[text.index("\n  report:\n") :]
    expected = text.replace(
        report,
        report.replace("      - stage-code/report.txt\n", "      - stage-code/report.txt\n      - stage-code/toy.txt\n")
        + TOY_STAGE,
    )
    assert (repo / "dvc.yaml").read_text(encoding="utf-8") == expected
    assert "src/gece/pipeline/toy.py" in (repo / "stage-code/toy.txt").read_text(encoding="utf-8")
