"""Code navigation in every language of `languages/`: each spec loads, its grammar comes from a wheel
(offline), its queries compile, and outline / definitions / references work on a small file per language."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from codeagent.code.files import is_test_path, iter_source_files
from codeagent.code.index import RepoIndex
from codeagent.code.languages import LANGUAGES, load_language, load_spec, spec_for_path
from codeagent.code.outline import outline
from codeagent.code.parsing import compiled_query

SAMPLES = Path(__file__).parent.parent / "data" / "navigation"

EXPECTED = {  # file -> (language, {qualname: kind})
    "calc.go": ("go", {"Calc": "type", "Op": "type", "Named": "type", "New": "function", "Add": "method"}),
    "calc.rs": ("rust", {"Calc": "class", "Named": "class", "Named.name": "method", "Calc.new": "method",
                         "Calc.add": "method", "Wrapper.get": "method", "Op": "class", "twice": "function",
                         "main": "function"}),
    "calc.js": ("javascript", {"Calc": "class", "Calc.constructor": "method", "Calc.add": "method",
                               "make": "function", "double": "function", "gen": "function",
                               "sum": "function", "get": "function", "put": "function"}),
    "calc.ts": ("typescript", {"Named": "interface", "Named.name": "method", "Op": "type", "Kind": "enum",
                               "Base.run": "method", "Calc.add": "method", "make": "function",
                               "helper": "function"}),
    "Button.tsx": ("tsx", {"Button": "function", "Card": "function", "Panel": "class", "Panel.render": "method"}),
    "Calc.java": ("java", {"Calc": "class", "Calc.Calc": "method", "Calc.toString": "method", "Calc.add": "method",
                           "Calc.Op": "interface", "Calc.Op.apply": "method", "Calc.Kind": "enum",
                           "Calc.Pair": "record"}),
    "calc.c": ("c", {"calc": "class", "point": "class", "op": "class", "add": "function", "name": "function",
                     "main": "function"}),
    "calc.cpp": ("cpp", {"calc": "module", "calc.Calc": "class", "calc.Calc.Calc": "method", "calc.Calc.add": "method",
                         "calc.Calc.sub": "method", "calc.sub": "function", "calc.twice": "function",
                         "calc.Point": "class", "main": "function"}),
}


def test_every_language_file_loads_with_its_grammar_from_a_wheel_and_its_queries_compile():
    names = {spec.name for spec in LANGUAGES}
    assert {"python", "go", "rust", "javascript", "typescript", "tsx", "java", "c", "cpp"} <= names
    for spec in LANGUAGES:
        assert spec.grammar_module, f"{spec.name}: no offline grammar wheel named"
        module = importlib.import_module(spec.grammar_module)  # the wheel itself, not the language pack
        assert callable(getattr(module, spec.grammar_function))
        load_language(spec.name)
        for query in (spec.definitions_query, spec.references_query, spec.imports_query):
            if query:
                compiled_query(spec.name, query)
    extensions = [ext for spec in LANGUAGES for ext in spec.extensions]
    assert len(extensions) == len(set(extensions)), "an extension claimed by two languages"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_outline_lists_the_definitions_of_a_file_in_each_language(name):
    language, expected = EXPECTED[name]
    assert spec_for_path(name).name == language
    result = outline(SAMPLES / name)
    assert result.language == language and not result.has_errors
    found = {symbol.qualname: symbol.kind for symbol in result.symbols}
    assert {qualname: found.get(qualname) for qualname in expected} == expected, result.render()


def test_definitions_and_references_across_languages(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES, repo)
    index = RepoIndex(repo, workers=1)
    assert sorted(iter_source_files(repo)) == sorted(EXPECTED)
    defined_in = {d.path for d in index.find_definitions("add", limit=50)}
    assert defined_in == {"calc.rs", "calc.js", "calc.ts", "Calc.java", "calc.c", "calc.cpp"}
    assert [d.path for d in index.find_definitions("Add", limit=50)] == ["calc.go"]  # Go exports by case
    uses = {(r.path, r.line) for r in index.find_references("add", limit=50)}
    assert ("calc.c", 9) in uses and ("calc.rs", 16) in uses and ("calc.cpp", 15) in uses
    assert ("calc.c", 7) not in uses  # the definition's own name is no use of it
    assert [d.symbol.qualname for d in index.find_definitions("Calc.add", limit=50)
            if d.path == "calc.rs"] == ["Calc.add"]


@pytest.mark.parametrize("path", ["pkg/calc_test.go", "src/calc.test.ts", "src/Button.spec.tsx", "lib/x.test.js",
                                  "src/test/java/CalcTest.java", "CalcTests.java", "tests/calc.rs",
                                  "src/__tests__/a.js", "test_calc.py", "pkg/conftest.py", "calc_unittest.cc"])
def test_test_files_are_known_in_every_language(path):
    assert is_test_path(path)


@pytest.mark.parametrize("path", ["pkg/calc.go", "src/calc.ts", "src/Calc.java", "src/lib.rs", "calc.py",
                                  "contest.py", "src/testing_utils.go"])
def test_sources_are_not_test_files(path):
    assert not is_test_path(path)


def test_a_broken_language_file_names_itself(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nextensions: [.brk]\n")  # no queries
    with pytest.raises(ValueError, match="broken.yaml"):
        load_spec(broken)


def test_a_header_is_read_as_cpp_when_it_holds_cpp_and_as_c_otherwise():
    cpp = outline("fmt/core.h", source=b"namespace fmt {\ntemplate <typename T> class buffer {\n public:\n  void push(T x) {}\n};\n}\n")
    c = outline("cjson.h", source=b"typedef struct cJSON { int type; } cJSON;\nint cJSON_Version(void);\n")
    assert cpp.language == "cpp" and not cpp.has_errors and "fmt.buffer.push" in cpp.qualnames()
    assert c.language == "c" and "cJSON" in c.qualnames()
