"""The calc.py of the patch-normalization tests, fixes of its bug written in several ways, and the unified
diff of an edit to it."""

from __future__ import annotations

import difflib

BASE = '''"""Calculator."""


def add(a, b):
    """Add two numbers."""
    return a - b


def mul(a, b):
    return a * b
'''
README = "Calc\n====\n\nAdds numbers.\n"
FILES = {"calc.py": BASE, "README.md": README, "tests/test_calc.py": "def test_mul():\n    pass\n"}


def read(path: str) -> bytes | None:
    return FILES[path].encode() if path in FILES else None


def diff(path: str, new: str | None, old: str | None = None, git_header: bool = True) -> str:
    """A unified diff of one file (created when it has no base, deleted when new is None)."""
    old = FILES.get(path) if old is None else old
    before = (old or "").splitlines(keepends=True)
    after = (new or "").splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, "a/" + path if old is not None else "/dev/null",
                                      "b/" + path if new is not None else "/dev/null"))
    header = [f"diff --git a/{path} b/{path}\n"] if git_header else []
    if old is None:
        header.append("new file mode 100644\n")
    return "".join(header + lines)


FIX = BASE.replace("return a - b", "return a + b")
FIX_COMMENTED = BASE.replace("    return a - b", "    # the bug: it subtracted\n    return a + b  # add, really")
FIX_REFORMATTED = BASE.replace("return a - b", "return (a+b)").replace("def mul(a, b):", "def mul(a,  b) :")
OTHER_FIX = BASE.replace("return a - b", "return b + a")  # also right, but a different answer
MUL_CHANGE = BASE.replace("return a * b", "return b * a * 1")  # another function entirely
