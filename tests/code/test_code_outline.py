"""Outline and parsing on fixtures (decorators, nested classes, async, syntax errors) and on
real standard-library files, checked against Python's own `ast`."""

from __future__ import annotations

import ast
import json.decoder
from pathlib import Path

import pytest

from codeagent.code.languages import LanguageUnavailable, spec_for_path
from codeagent.code.outline import outline
from codeagent.code.parsing import parse_file, parse_source

DATA = Path(__file__).parent.parent / "data" / "code"
STDLIB = Path(json.decoder.__file__).parents[1]


def rows(o):
    return [(s.qualname, s.kind, s.start_line, s.end_line) for s in o]


def test_fixture_outline_names_kinds_and_lines():
    o = outline(DATA / "shapes.py")
    assert not o.has_errors
    assert rows(o) == [
        ("registry", "function", 10, 13),
        ("Point", "class", 19, 37),
        ("Point.distance", "method", 25, 26),
        ("Point.norm", "method", 28, 30),
        ("Point.Meta", "class", 32, 37),
        ("Point.Meta.Options", "class", 35, 37),
        ("Point.Meta.Options.describe", "method", 36, 37),
        ("Polygon", "class", 40, 58),
        ("Polygon.__init__", "method", 41, 42),
        ("Polygon.perimeter", "method", 44, 47),
        ("Polygon.from_pairs", "method", 49, 54),
        ("Polygon.render", "method", 56, 58),
        ("load_shapes", "function", 61, 68),
        ("load_shapes.parse", "function", 64, 65),
    ]


def test_decorators_start_the_definition_and_are_listed():
    o = outline(DATA / "shapes.py")
    point = o.find("Point")
    assert (point.start_line, point.name_line) == (19, 21)
    assert point.decorators == ("@registry", "@dataclass(frozen=True)")
    norm = o.find("Point.norm")
    assert (norm.start_line, norm.name_line, norm.decorators) == (28, 29, ("@property",))


def test_signatures_are_one_line_headers():
    o = outline(DATA / "shapes.py")
    assert o.find("Polygon.render").signature == "async def render(self, canvas) -> None:"
    assert o.find("load_shapes").signature == "async def load_shapes(path: str) -> list[Polygon]:"
    # a parameter list spread over lines is joined
    assert o.find("Polygon.from_pairs").signature == (
        'def from_pairs(pairs: list[tuple[float, float]], closed: bool = True,) -> "Polygon":'
    )
    assert o.find("Point.Meta.Options").depth == 2


def test_enclosing_symbol_of_a_line():
    o = outline(DATA / "shapes.py")
    assert o.enclosing(37).qualname == "Point.Meta.Options.describe"
    assert o.enclosing(65).qualname == "load_shapes.parse"
    assert o.enclosing(3) is None


def test_syntax_error_file_still_outlines_and_reports_errors():
    # stored as .txt so that linters and byte-compilers leave the broken fixture alone
    o = outline("broken.py", source=(DATA / "broken.py.txt").read_bytes())
    assert o.has_errors
    assert o.error_lines and all(8 <= line <= 15 for line in o.error_lines)
    names = o.qualnames()
    # what comes before and after the broken statement is recovered
    assert names[:3] == ["before", "Config", "Config.load"]
    assert names[-1] == "after_error"
    assert o.find("after_error").start_line == 18
    assert "(has syntax errors)" in o.render()


def test_outline_from_source_text_and_bytes():
    text = "class A:\n    async def f(self):\n        pass\n"
    for source in (text, text.encode()):
        assert rows(outline(source=source)) == [("A", "class", 1, 3), ("A.f", "method", 2, 3)]


def test_unknown_extension_is_a_clear_error(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(LanguageUnavailable, match="no language registered"):
        parse_file(f)
    assert spec_for_path("x.PY").name == "python"


def test_parse_reports_errors_without_raising():
    parsed = parse_source(b"def f(:\n    pass\n", "python")
    assert parsed.has_errors and parsed.error_lines() == [1]
    assert not parse_source(b"x = 1\n", "python").has_errors


def test_json_decoder_concrete_names():
    o = outline(json.decoder.__file__)
    names = o.qualnames()
    for expected in ("JSONDecodeError", "JSONDecodeError.__init__", "py_scanstring", "JSONObject",
                     "JSONArray", "JSONDecoder", "JSONDecoder.decode", "JSONDecoder.raw_decode"):
        assert expected in names
    assert o.find("JSONDecoder.raw_decode").kind == "method"
    assert o.find("JSONDecoder").signature == "class JSONDecoder(object):"
    assert o.find("JSONDecoder.decode").signature == "def decode(self, s, _w=WHITESPACE.match):"


def ast_rows(path: Path) -> list[tuple[str, str, int, int, int]]:
    """(qualname, kind, first line incl. decorators, last line, def line) from Python's ast."""
    tree = ast.parse(path.read_bytes())
    out = []

    def visit(node, prefix, in_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                is_class = isinstance(child, ast.ClassDef)
                kind = "class" if is_class else ("method" if in_class else "function")
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                qual = prefix + child.name
                out.append((qual, kind, start, child.end_lineno, child.lineno))
                visit(child, qual + ".", is_class)
            else:
                visit(child, prefix, in_class)

    visit(tree, "", False)
    return sorted(out, key=lambda r: (r[2], r[4]))


@pytest.mark.parametrize("relative", ["json/decoder.py", "dataclasses.py", "asyncio/tasks.py", "functools.py", "argparse.py"])
def test_stdlib_outline_matches_python_ast(relative):
    path = STDLIB / relative
    o = outline(path)
    assert not o.has_errors
    ours = sorted(((s.qualname, s.kind, s.start_line, s.end_line, s.name_line) for s in o), key=lambda r: (r[2], r[4]))
    assert ours == ast_rows(path)
    assert len(ours) > 10
