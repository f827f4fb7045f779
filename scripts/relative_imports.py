"""Rewrite the absolute `codeagent` imports inside codeagent/ as relative ones (the house style), then let
ruff put the imports back in order.

    python scripts/relative_imports.py            # rewrite codeagent/ in place, list what changed
    python scripts/relative_imports.py --check    # only list them; exit 1 if there are any

Only import statements are touched (found with `ast`, function-local ones included): strings such as
`python -m codeagent.evals.worker` or `importlib.import_module("codeagent.x")` stay as they are.
`from codeagent.a.b import c` in codeagent/a/d.py becomes `from .b import c`; `import codeagent.a.b as m`
becomes `from ..a import b as m` (the same binding). A bare `import codeagent.a.b` has no relative
spelling that binds the same name: it is reported and left for a person to rewrite.
tests/test_layers.py keeps it so (ruff's banned-api rule cannot: it flags relative imports too).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_of(path: Path, root: Path) -> list[str]:
    """The package a module file belongs to, as name parts (a package's __init__.py: the package itself)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return parts[:-1]


def relative(package: list[str], target: list[str]) -> str:
    """`target` (a module's name parts) spelt relative to `package`: dots, then what is left of the name."""
    common = 0
    while common < min(len(package), len(target)) and package[common] == target[common]:
        common += 1
    return "." * (len(package) - common + 1) + ".".join(target[common:])


def absolute_imports(tree: ast.AST, top: str) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and (node.module == top or node.module.startswith(top + ".")):
            found.append(node)
        elif isinstance(node, ast.Import) and any(a.name == top or a.name.startswith(top + ".") for a in node.names):
            found.append(node)
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def rewrite(source: str, package: list[str]) -> tuple[str, list[str]]:
    """The source with its absolute imports of package[0] made relative, and the ones that could not be."""
    top = package[0]
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    left: list[str] = []
    for node in absolute_imports(ast.parse(source), top):
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = offsets[node.lineno - 1] + len(lines[node.lineno - 1].encode()[:node.col_offset].decode())
        end = offsets[node.end_lineno - 1] + len(lines[node.end_lineno - 1].encode()[:node.end_col_offset].decode())
        text = source[start:end]
        if isinstance(node, ast.ImportFrom):
            assert node.module is not None
            head, _, names = text.partition(" import ")
            assert head.split() == ["from", node.module], text
            edits.append((start, end, f"from {relative(package, node.module.split('.'))} import {names}"))
        elif len(node.names) == 1 and node.names[0].asname and "." in node.names[0].name:
            parent, _, name = node.names[0].name.rpartition(".")
            alias = "" if node.names[0].asname == name else f" as {node.names[0].asname}"
            edits.append((start, end, f"from {relative(package, parent.split('.'))} import {name}{alias}"))
        else:
            left.append(f"line {node.lineno}: {text}")
    for start, end, new in reversed(edits):
        source = source[:start] + new + source[end:]
    return source, left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default=str(ROOT / "codeagent"), help="the package folder")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when an import is absolute")
    args = parser.parse_args(argv)
    root = Path(args.package).resolve()
    changed, count, stuck = [], 0, []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        new, left = rewrite(source, package_of(path, root))
        stuck += [f"{path.relative_to(root.parent)}: {where}" for where in left]
        if new != source:
            count += len(absolute_imports(ast.parse(source), root.name)) - len(left)
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(path.relative_to(root.parent))
    for where in stuck:
        print(f"left as is (a bare import): {where}", file=sys.stderr)
    print(f"{count} absolute import(s) in {len(changed)} file(s)" + ("" if args.check else " made relative"),
          file=sys.stderr)
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if changed and not args.check and ruff:  # relative imports sort after the absolute ones (isort)
        subprocess.run([ruff, "check", "--quiet", "--no-cache", "--fix", "--select", "I", *map(str, changed)], check=False)
    return 1 if args.check and (changed or stuck) else 0


if __name__ == "__main__":
    sys.exit(main())
