"""The numpydoc sections of the statistics modules cannot drift from the code.

Read with ``ast`` (nothing is imported): every public function and public method of
``gece.stats.{metrics, by_group, calibration, gap}`` has a docstring with a ``Parameters`` section
when it takes parameters and a ``Returns`` section when it returns something other than None, and
the names under ``Parameters`` are exactly its parameters. A method without a docstring of its own
is checked against the docstring of the method it overrides (``inspect.getdoc`` inherits it the
same way). Every public class has a docstring; a dataclass documents exactly its fields (under
``Attributes`` or ``Parameters``), any other class exactly its ``__init__`` parameters under
``Parameters``, and each name under its ``Attributes`` is set somewhere in the class or its bases.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from .conftest import ROOT

MODULES = ("metrics", "by_group", "calibration", "gap")
SRC = ROOT / "src" / "gece" / "stats"
# an entry of a Parameters/Attributes/Returns section: "name : type", "a, b : type" or a bare "name"
ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")

Function = ast.FunctionDef | ast.AsyncFunctionDef


def sections(doc: str) -> dict[str, list[str]]:
    """The numpydoc sections of a docstring: title -> the section's lines (title and underline excluded)."""
    lines = inspect.cleandoc(doc).splitlines()
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    i = 0
    while i < len(lines):
        title = lines[i].strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if title and not lines[i].startswith(" ") and nxt and set(nxt) == {"-"} and len(nxt) == len(title):
            current = out.setdefault(title, [])
            i += 2
            continue
        if current is not None:
            current.append(lines[i])
        i += 1
    return out


def entries(section: list[str]) -> list[str]:
    """The names an entry line of a section documents ("a, b : t" documents a and b), in order."""
    names = []
    for line in section:
        if not line.strip() or line.startswith((" ", "\t", "..")):
            continue
        m = ENTRY.match(line)
        assert m, f"not a numpydoc entry: {line!r}"
        names += [n.strip().lstrip("*") for n in m.group(1).split(",")]
    return names


def parameters(fn: Function, method: bool) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)]
    if method and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
        names = names[1:]  # self / cls
    names += [x.arg for x in a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


def _own_returns(fn: Function) -> bool:
    """Whether the body of ``fn`` itself (not of a nested function or class) returns a value."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def returns_value(fn: Function) -> bool:
    if fn.returns is not None:
        return not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None)
    return _own_returns(fn)


def _is_property(fn: Function) -> bool:
    return any(isinstance(d, ast.Name) and d.id in ("property", "cached_property") for d in fn.decorator_list)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def _fields(cls: ast.ClassDef) -> list[str]:
    """A dataclass's fields: its annotated class-level names, ClassVar left out."""
    return [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and "ClassVar" not in ast.unparse(s.annotation)
    ]


def _assigned(cls: ast.ClassDef) -> set[str]:
    """Names a class sets: class-level assignments and ``self.<name> = ...`` in its methods."""
    out: set[str] = set()

    def add(target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Tuple):
            for t in target.elts:
                add(t)

    for s in cls.body:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                add(t)
        elif isinstance(s, ast.AnnAssign):
            add(s.target)
    for node in ast.walk(cls):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out.add(t.attr)
    return out


def check_function(fn: Function, doc: str | None, method: bool) -> list[str]:
    """What is wrong with the docstring ``doc`` of ``fn`` (empty when nothing is)."""
    if not doc:
        return ["no docstring"]
    secs = sections(doc)
    params = parameters(fn, method)
    errors = []
    if params:
        if "Parameters" not in secs:
            errors.append("no Parameters section")
        else:
            documented = entries(secs["Parameters"])
            if documented != params:
                errors.append(f"Parameters documents {documented}, the function takes {params}")
    elif "Parameters" in secs:
        errors.append("a Parameters section, but no parameters")
    if returns_value(fn):
        if "Returns" not in secs or not entries(secs["Returns"]):
            errors.append("returns a value, but no Returns section (with an entry)")
    elif "Returns" in secs:
        errors.append("a Returns section, but returns None")
    return errors


def check_class(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[str]:
    doc = ast.get_docstring(cls)
    if not doc:
        return ["no docstring"]
    secs = sections(doc)
    params = entries(secs.get("Parameters", []))
    attrs = entries(secs.get("Attributes", []))
    errors = []
    if _is_dataclass(cls):
        fields = _fields(cls)
        if sorted(params + attrs) != sorted(fields):
            errors.append(f"documents {params + attrs}, the dataclass has the fields {fields}")
    else:
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        taken = parameters(init, method=True) if init else []
        if params != taken:
            errors.append(f"Parameters documents {params}, __init__ takes {taken}")
    known: set[str] = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        known |= _assigned(c)
        todo += [classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes]
    if not _is_dataclass(cls) and set(attrs) - known:
        errors.append(f"Attributes {sorted(set(attrs) - known)} are never set")
    return errors


def _inherited_doc(cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef]) -> str | None:
    """The docstring of method ``name`` of ``cls`` or, without one, of the nearest base in the module."""
    todo = [cls]
    while todo:
        c = todo.pop(0)
        for s in c.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name and ast.get_docstring(s):
                return ast.get_docstring(s)
        todo += [classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes]
    return None


def problems(source: str) -> dict[str, list[str]]:
    """Every public function, method and class of a module's source -> what is wrong with its docs."""
    tree = ast.parse(source)
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            out[node.name] = check_function(node, ast.get_docstring(node), method=False)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out[node.name] = check_class(node, classes)
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.name.startswith("_"):
                    if _is_property(m):
                        continue
                    out[f"{node.name}.{m.name}"] = check_function(m, _inherited_doc(node, m.name, classes), method=True)
    return out


def _source(module: str) -> str:
    return (SRC / f"{module}.py").read_text(encoding="utf-8")


CASES = [(module, name) for module in MODULES for name in problems(_source(module))]


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_numpydoc_sections_match_the_code(module: str, name: str) -> None:
    assert problems(_source(module))[name] == []


def test_every_module_is_covered() -> None:
    """The walk finds the public API (a parser that found nothing would pass every check)."""
    found = {m: set(problems(_source(m))) for m in MODULES}
    assert {"ece", "gender_ece", "summarize", "BinStats.ece", "BinTable.records"} <= found["metrics"]
    assert {"calibration_by_group", "permutation_gap_p", "GroupResult"} <= found["by_group"]
    assert {"fit_predict", "run_crossfit", "TemperatureScaling.fit", "HistogramBinning"} <= found["calibration"]
    assert {"shuffled_groups", "null_statistics", "permutation_p"} <= found["gap"]


SAMPLE = '''
from dataclasses import dataclass

def documented(a, b=1) -> int:
    """Sum.

    Parameters
    ----------
    a : int
        First.
    b : int, default=1
        Second.

    Returns
    -------
    total : int
        a + b.
    """
    return a + b

def drifted(a, c) -> int:
    """Sum.

    Parameters
    ----------
    a, b : int
        Operands.
    """
    return a + c

def silent(a):
    return a

@dataclass
class Point:
    """A point.

    Attributes
    ----------
    x : float
        Abscissa.
    """

    x: float
    y: float

class Base:
    """A base.

    Attributes
    ----------
    ghost : int
        Never set.
    """

    def run(self, p) -> float:
        """Run.

        Parameters
        ----------
        p : float
            Input.

        Returns
        -------
        out : float
            Output.
        """

class Child(Base):
    """A child."""

    def run(self, p):
        return p
'''


def test_the_checker_catches_drift() -> None:
    found = problems(SAMPLE)
    assert found["documented"] == []
    assert found["drifted"] == [
        "Parameters documents ['a', 'b'], the function takes ['a', 'c']",
        "returns a value, but no Returns section (with an entry)",
    ]
    assert found["silent"] == ["no docstring"]
    assert found["Point"] == ["documents ['x'], the dataclass has the fields ['x', 'y']"]
    assert found["Base"] == ["Attributes ['ghost'] are never set"]
    assert found["Child.run"] == []  # inherits Base.run's docstring, whose sections fit its signature
