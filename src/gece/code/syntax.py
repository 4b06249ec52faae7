"""What a Python file's code does, as text that is the same on every Python version: the canonical syntax tree.

:func:`canonical_source` parses a file with :mod:`ast` and writes the tree with gece's own walk, not
:func:`ast.dump`, whose text changes between minor versions (3.12 adds ``type_params=[]`` to every function and
class, 3.13 leaves out empty fields by default, and later patch releases change what they leave out). The walk
writes each node as its type name and its fields in sorted order, ``Name(ctx=Load(),id=str:'x')``:

- a field that is absent, ``None`` or an empty list is left out, so a field a newer Python adds with an empty
  default (``type_params``, ``type_comment``) writes nothing, and a tree means the same text everywhere;
- line and column numbers are attributes, not fields: never written, so layout does not count;
- a constant is written with :func:`repr` and its type (``int:1``, ``bool:True``, ``str:'a'``), stable across
  versions, and a plain value of a field (an identifier, an ``ImportFrom``'s level) likewise;
- comments and blank lines are not in a syntax tree; docstrings (a module, class or function's first
  statement when it is a string constant, which only ``__doc__`` reads) are left out unless ``docstrings``.

:func:`source_hash` is the sha256 of that text. Both use the standard library only, so the tests run them under
every Python found (tests/test_stage_code.py). The code fingerprints of gece (:func:`gece.code.closure.code_hash`,
each command's manifest, each token file's code) are built on them.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _has_docstring(node: ast.AST) -> bool:
    body = getattr(node, "body", None)
    return (
        isinstance(node, _DOC_OWNERS)
        and bool(body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )


def _write(value: object, out: list[str], docstrings: bool) -> None:
    """Append the canonical text of a node, a list of them, or a plain value to ``out``."""
    if isinstance(value, ast.AST):
        out.append(type(value).__name__ + "(")
        sep = ""
        for name in sorted(value._fields):
            field = getattr(value, name, None)
            if name == "body" and not docstrings and _has_docstring(value):
                field = field[1:] or [ast.Pass()]
            if field is None or (isinstance(field, list) and not field):
                continue
            out.append(f"{sep}{name}=")
            sep = ","
            _write(field, out, docstrings)
        out.append(")")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _write(item, out, docstrings)
        out.append("]")
    else:  # a constant or a plain field value (str, int, bool, float, complex, bytes, Ellipsis)
        out.append(f"{type(value).__name__}:{value!r}")


def canonical(tree: ast.AST, docstrings: bool = True) -> str:
    """The canonical text of a syntax tree (see the module's docstring)."""
    out: list[str] = []
    _write(tree, out, docstrings)
    return "".join(out)


def canonical_source(path: Path, docstrings: bool = True) -> str:
    """The canonical text of a Python file's syntax tree: what runs, not how it is laid out, the same on
    every Python version. Docstrings are in it unless ``docstrings`` is false."""
    return canonical(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), docstrings)


def source_hash(path: Path, docstrings: bool = True) -> str:
    """sha256 (hex) of :func:`canonical_source`."""
    return hashlib.sha256(canonical_source(path, docstrings).encode()).hexdigest()
