"""No module of the package is longer than a reader can hold: at most 450 code lines each.

A code line is a line that holds a token of code: blank lines, comment lines and docstrings do not count
(a line with code and a trailing comment does).
"""

from __future__ import annotations

import ast
import io
import tokenize

from .conftest import ROOT

MAX_CODE_LINES = 450
NOT_CODE = (
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
)


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers of the module's, its classes' and its functions' docstrings."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str) -> int:
    """How many lines of ``source`` hold code: neither blank, nor only a comment, nor part of a docstring."""
    doc = docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in NOT_CODE:
            continue
        lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in doc)
    return len(lines)


def test_code_lines_count_neither_blanks_comments_nor_docstrings():
    source = '''"""A module.

Its docstring.
"""

# a comment
x = 1  # code with a comment


def f(a,
      b):
    """f's docstring."""
    s = """a string
    that is no docstring"""
    return s
'''
    assert code_lines(source) == 6  # x, def f (2 lines), s (2 lines), return


def test_no_module_has_more_than_450_code_lines():
    sizes = {p.relative_to(ROOT).as_posix(): code_lines(p.read_text()) for p in (ROOT / "src" / "gece").rglob("*.py")}
    assert len(sizes) > 50
    over = {path: n for path, n in sorted(sizes.items()) if n > MAX_CODE_LINES}
    assert not over, f"modules over {MAX_CODE_LINES} code lines (split them by what they hold): {over}"
