"""The test-log parsers of Go, Rust, JavaScript/TypeScript, Java, C/C++, PHP and Ruby, on logs of real
runs (tests/data/test_logs, see its README), and the grading of a log in an unknown format."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from codeagent.harness.grading.verdict import Outcome, grade, grade_log
from codeagent.harness.logs.parsers import MARKERS, PARSERS, parse_log

LOGS = Path(__file__).parent.parent / "data" / "test_logs"
P, F, S, E = "PASSED", "FAILED", "SKIPPED", "ERROR"


def log(name: str) -> str:
    return (LOGS / name).read_text()


GO = {"TestAdd": P, "TestAddFails": F, "TestSkipped": S, "TestTable": F, "TestTable/zero": P,
      "TestTable/one_plus_one": P, "TestTable/wrong": F, "TestNested": P, "TestNested/outer": P,
      "TestNested/outer/inner": P, "TestNested/outer/skipped_inner": S, "TestDivOK": P, "TestDivPanics": F}
JS_JSON = {"adds at top level": P, "calc > adds": P, "calc > fails on purpose": F, "calc > is skipped": S,
           "calc > is still to do": S, "calc > nested suite > handles ünïcödé names — ✓ and spaces": P,
           "calc > nested suite > throws": F}
VITEST_VERBOSE = {"vt/calc.test.js > adds at top level": P, "vt/calc.test.js > calc > adds": P,
                  "vt/calc.test.js > calc > fails on purpose": F, "vt/calc.test.js > calc > is skipped": S,
                  "vt/calc.test.js > calc > nested suite > handles ünïcödé names — ✓ and spaces": P,
                  "vt/calc.test.js > calc > nested suite > throws": F, "vt/other.test.js > calc > adds": P}
NEXTEST = {"tests::it_adds": P, "tests::expected_panic": P, "tests::nested::deep": P, "integration_adds": P,
           "tests::it_fails": F, "tests::it_panics": F, "integration_fails": F}
CTEST = {"add_ok": P, "add_wrong": F, "crashes": F, "skipped_here": S, "disabled_one": S, "missing_binary": E,
         "calc_gtest": F}

EXPECTED = [
    ("gotest", "gotest/go_test_v.log", GO),
    ("go_json", "go_json/go_test_json.log", GO),
    ("cargo", "cargo/cargo_test.log",
     {"tests::it_adds": P, "tests::it_fails": F, "tests::it_panics": F, "tests::nested::deep": P,
      "integration_adds": P, "integration_fails": F}),
    ("nextest", "nextest/nextest.log", NEXTEST),
    ("nextest", "nextest/status_level_all_retries.log", {**NEXTEST, "tests::ignored_one": S, "tests::ignored_with_reason": S}),
    ("nextest", "nextest/libtest_json.log", {**NEXTEST, "tests::ignored_one": S, "tests::ignored_with_reason": S}),
    ("nextest", "nextest/flaky_and_segfault.log", {"flaky_once": P, "segfaults": F}),
    ("jest", "jest/jest_verbose.log",
     {"adds at top level": P, "adds": P, "fails on purpose": F, "skipped is skipped": S,
      "handles ünïcödé names — ✓ and spaces": P, "throws": F}),
    ("jest_json", "jest_json/jest_json.log", {**JS_JSON, "/tmp/pz/js/jt/broken.test.js": E}),
    ("jest_json", "jest_json/jq_transform.log",
     {key: value for key, value in JS_JSON.items() if value != S}),
    ("immutable_js", "jest/jest_verbose.log",
     {"adds at top level": P, "adds": P, "fails on purpose": F, "skipped is skipped": S,
      "handles ünïcödé names — ✓ and spaces": P, "throws": F}),
    ("immutable_js", "jest_json/jq_transform.log", {key: value for key, value in JS_JSON.items() if value != S}),
    ("vitest", "vitest/vitest_verbose.log", VITEST_VERBOSE),
    ("vitest_json", "vitest_json/vitest_json.log", {**JS_JSON, "/tmp/pz/js/vt/broken.test.js": E}),
    ("mocha_json", "mocha_json/mocha_json.log",
     {"adds at top level": P, "calc adds": P, "calc fails on purpose": F, "calc is skipped": S,
      "calc is pending": S, "calc nested suite handles ünïcödé names — ✓ and spaces": P,
      "calc nested suite throws": F, 'calc hook failure "before all" hook for "never runs"': F}),
    ("tap", "tap/node_test_tap.log",
     {"- adds at top level": P, "- fails on purpose": F, "- is skipped # SKIP not here": P, "- is todo # TODO": P,
      "- handles ünïcödé names — ✓ and spaces": P, "- throws": F, "- calc": F}),
    ("maven", "maven/mvn_dtest.log",
     {"calc.CalcTest#adds": P, "calc.CalcTest#failsOnPurpose": F, "calc.OtherTest#addsZero": P}),
    ("junit_xml", "junit_xml/surefire_junit4.log",
     {"calc.CalcTest.adds": P, "calc.CalcTest.failsOnPurpose": F, "calc.CalcTest.throwsError": E,
      "calc.CalcTest.ignored": S, "calc.OtherTest.addsZero": P}),
    ("junit_xml", "junit_xml/surefire_junit5.log",
     {"calc.CalcTest.adds": P, "calc.CalcTest.failsOnPurpose": F, "calc.CalcTest.disabled": S,
      "calc.CalcTest.positive(int)[1]": P, "calc.CalcTest.positive(int)[2]": P, "calc.CalcTest.positive(int)[3]": F,
      "calc.CalcTest$Inner.innerAdds": P}),
    ("junit_xml", "junit_xml/ctest_output_junit.log", CTEST),
    ("junit_xml", "junit_xml/gtest_xml.log",
     {"Calc.Adds": P, "Calc.FailsOnPurpose": F, "Calc.DISABLED_Later": S, "Calc.Skips": S,
      "Small/Param.NonNegative/0": P, "Small/Param.NonNegative/1": P, "Small/Param.NonNegative/2": F}),
    ("googletest", "googletest/gtest.log",
     {"Calc.Adds": P, "Calc.FailsOnPurpose": F, "Small/Param.NonNegative/0": P, "Small/Param.NonNegative/1": P,
      "Small/Param.NonNegative/2, where GetParam() = -1": F}),
    ("ctest", "ctest/ctest.log", CTEST),
    *[(parser, "js_repos/jest_default.log", {"jt/calc.test.js": F, "jt/broken.test.js": F, "jt/other.test.js": P})
      for parser in ("react_pdf", "carbon", "grommet")],
    ("highlightjs", "js_repos/mocha_spec.log",
     {"adds at top level": P, "calc.adds": P, "calc.fails on purpose": F, "nested suite.throws": F,
      "nested suite.handles ünïcödé names — ✓ and spaces": P, 'hook failure."before all" hook for "never runs"': F}),
    # SWE-bench's eslint and openlayers parsers read mocha's failure blocks loosely: the first id runs on
    # from the progress lines to the first `Error`
    ("eslint", "js_repos/mocha_spec.log",
     {"fails on purpose - is skipped - is pending nested suite ✔ handles ünïcödé names — ✓ and spaces 2) throws "
      'hook failure 3) "before all" hook for "never runs" 3 passing (6ms) 2 pending 3 failing 1) calc fails on '
      "purpose:": F, "calc nested suite throws:": F, 'calc hook failure "before all" hook for "never runs":': F}),
    ("openlayers", "js_repos/mocha_spec.log",
     {"calc fails on purpose: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal: 4 !== 5 "
      "+ expected - actual -4 +5 at Context.<anonymous> (mt/calc.spec.js:8:39) at process.processImmediate "
      "(node:internal/timers:483:21) 2) calc nested suite throws:": F,
      'calc hook failure "before all" hook for "never runs":': F}),
    ("prismjs", "js_repos/mocha_run_js_json.log",
     {"calc fails on purpose": F, "calc nested suite throws": F, 'calc hook failure "before all" hook for "never runs"': F,
      "adds at top level": P, "calc adds": P, "calc nested suite handles ünïcödé names — ✓ and spaces": P}),
]


@pytest.mark.parametrize(("parser", "name", "expected"), EXPECTED, ids=[f"{p}:{n}" for p, n, _ in EXPECTED])
def test_real_log_gives_the_exact_map(parser, name, expected):
    statuses = parse_log(parser, log(name))
    assert dict(statuses) == expected
    assert statuses.format_seen is True and statuses.parser == parser


def test_go_package_that_fails_to_build_has_no_tests():
    # broken/b_test.go's TestMul does not compile (`FAIL example.com/fixture/broken [build failed]`);
    # the panic in TestDivPanics kept TestAfterPanic from running
    for parser, name in (("gotest", "gotest/go_test_v.log"), ("go_json", "go_json/go_test_json.log")):
        text = log(name)
        assert "[build failed]" in text
        statuses = parse_log(parser, text)
        assert "TestMul" not in statuses and "TestAfterPanic" not in statuses


@pytest.mark.parametrize(("parser", "name"), [
    ("cargo", "cargo/build_failed.log"), ("nextest", "nextest/build_failed.log"),
    ("junit_xml", "junit_xml/maven_build_failed.log"),
    ("mocha_json", "mocha_json/load_error.log"),
])
def test_a_broken_build_reports_no_test_and_grades_unresolved(parser, name):
    statuses = parse_log(parser, log(name))
    assert statuses == {} and statuses.format_seen is True
    report = grade(statuses, ["some_test"], [], exit_code=1, log_complete=True)
    assert report.outcome is Outcome.UNRESOLVED and report.f2p_failed == ["some_test"]


def test_ctest_tests_whose_build_failed_are_errors_never_passes():
    assert set(parse_log("ctest", log("ctest/build_failed.log")).values()) == {E, S}
    statuses = parse_log("junit_xml", log("junit_xml/ctest_build_failed.log"))
    assert statuses == {**{test: E for test in CTEST}, "disabled_one": S}


def test_go_build_failure_alone_is_a_failed_run_not_an_unknown_format():
    text = ("# example.com/fixture/broken [example.com/fixture/broken.test]\n"
            "broken/b_test.go:6:18: undefined: undefinedThing\n"
            "FAIL\texample.com/fixture/broken [build failed]\nFAIL\n")
    for parser in ("gotest", "go_json"):
        report = grade(parse_log(parser, text), ["TestMul"], [], exit_code=1, log_complete=True)
        assert report.outcome is Outcome.UNRESOLVED


# A test reported twice: the last report counts and the conflict is kept.
TWICE = {
    "gotest": ("--- FAIL: TestX (0.00s)", "--- PASS: TestX (0.01s)", "TestX"),
    "go_json": ('{"Action":"fail","Package":"p","Test":"TestX"}', '{"Action":"pass","Package":"q","Test":"TestX"}',
                "TestX"),
    "cargo": ("test a::b ... FAILED", "test a::b ... ok", "a::b"),
    "nextest": ('{"type":"test","event":"failed","name":"c::c$a::b"}', "  TRY 2 PASS [   0.01s] (1/1) c a::b", "a::b"),
    "jest": ("  ✕ adds (2 ms)", "  ✓ adds (1 ms)", "adds"),
    "jest_json": ('{"testResults":[{"assertionResults":[{"ancestorTitles":["s"],"title":"t","status":"failed"}]}]}',
                  "[PASSED] s > t", "s > t"),
    "immutable_js": ("  ✕ adds (2 ms)", "[PASSED] adds", "adds"),
    "vitest": (" × a.test.ts > s > t 3ms", " ✓ a.test.ts > s > t 1ms", "a.test.ts > s > t"),
    "vitest_json": ('{"testResults":[{"assertionResults":[{"ancestorTitles":[],"title":"t","status":"failed"}]}]}',
                    '{"testResults":[{"assertionResults":[{"ancestorTitles":[],"title":"t","status":"passed"}]}]}',
                    "t"),
    "mocha_json": ('{"stats":{},"passes":[],"failures":[{"fullTitle":"s t"}]}',
                   '{"stats":{},"passes":[{"fullTitle":"s t"}],"failures":[]}', "s t"),
    "tap": ("not ok 1 - t", "ok 2 - t", "- t"),
    "karma": ("Starting browser Chrome\n  s\n    ✖ t", "    ✔ t", "s > t"),
    "maven": ("+ mvn test -Dtest=A#t\n[INFO] BUILD FAILURE", "+ mvn test -Dtest=A#t\n[INFO] BUILD SUCCESS", "A#t"),
    "ant": ("[junit] [FAIL] A.t", "[junit] [PASS] A.t", "A.t"),
    "gradle_custom": ("A > t FAILED", "A > t PASSED", "A > t"),
    "junit_xml": ('<testsuite><testcase classname="A" name="t"><failure/></testcase></testsuite>',
                  '<testsuite><testcase classname="A" name="t"/></testsuite>', "A.t"),
    "googletest": ("[  FAILED  ] A.t (0 ms)", "[       OK ] A.t (1 ms)", "A.t"),
    "redis": ("[err]: t in tests/unit/x.tcl", "[ok]: t (2 ms)", "t"),
    "jq": ("FAIL: tests/t", "PASS: tests/t", "tests/t"),
    "micropython_test": ("FAIL basics/t.py", "pass basics/t.py", "basics/t.py"),
    "doctest": None,  # one report per log: SWE-bench reads the first <doctest> only
    "ctest": ("1/2 Test #1: t ....***Failed    0.01 sec", "2/2 Test #1: t ....   Passed    0.01 sec", "t"),
    "phpunit": ("Calc (Tests\\Calc)\n ✘ adds", " ✔ adds", "Calc > adds"),
    "minitest": ("CalcTest#test_: it adds. = 0.00 s = F", "CalcTest#test_: it adds. = 0.00 s = .", "CalcTest#test_: it adds"),
    "cucumber": ("Adds numbers ....F", "Adds numbers .....", "Adds numbers"),
    "ruby_unit": ("test_adds(CalcTest): F", "test_adds(CalcTest): .", "test_adds(CalcTest)"),
    "rspec_transformed_json": ("Calc adds - failed", "Calc adds - passed", "Calc adds"),
    "react_pdf": ("FAIL src/a.test.js (1.2 s)", "PASS src/a.test.js (1.1 s)", "src/a.test.js"),
    "carbon": ("FAIL src/a.test.js", "PASS src/a.test.js (15ms)", "src/a.test.js"),
    "grommet": ("FAIL src/a.test.js", "PASS src/a.test.js (2 s)", "src/a.test.js"),
    "highlightjs": ("  s\n  1) t", "  ✓ t", "s.t"),
    "prismjs": ('+ ./node_modules/.bin/mocha tests/run.js --reporter json\n{"failures":[{"fullTitle":"s t"}],"passes":[]}',
                '+ ./node_modules/.bin/mocha tests/run.js --reporter json\n{"failures":[],"passes":[{"fullTitle":"s t"}]}',
                "s t"),
    # failures only: nothing can pass after them
    "marked": None, "chart_js": None, "eslint": None, "bpmn_js": None, "openlayers": None,
}
LANGUAGE_PARSERS = sorted(MARKERS)


def test_every_language_parser_is_covered_here():
    assert set(TWICE) == set(LANGUAGE_PARSERS)
    assert set(LANGUAGE_PARSERS) <= set(PARSERS)


@pytest.mark.parametrize("parser", [name for name in LANGUAGE_PARSERS if TWICE[name]])
def test_the_last_report_wins_and_the_conflict_is_kept(parser):
    first, last, test = TWICE[parser]
    statuses = parse_log(parser, f"{first}\n{last}\n")
    assert statuses[test] == P and test in statuses.conflicts and test in statuses.reported_failing
    assert parse_log(parser, f"{first}\n{last}\n", merge="worst")[test] == F


GARBAGE = [
    "", "\n\n\n", "{", "}{", '{"testResults": [1, "x", {"assertionResults": [null, {"title": 3}]}]}',
    '{"Action": "pass", "Test": ["x"]}', '{"stats": 1, "passes": "x", "failures": [null]}',
    "<testsuite><testcase", "<testsuites><testsuite></testsuites>", '<testsuite><testcase name="a"></testsuite>',
    "<doctest><TestCase", "<doctest></TestCase></doctest>", "\x00\x1b[31m\x1b[0m\udcff" * 10,
]
NEAR_MISSES = {"gotest": "--- PASS: ()", "nextest": "        SLOW [> 60.000s] c a::b", "cargo": "test  ... ok", "redis": "[ok]:", "jq": "PASS:",
               "ctest": "1/1 Test #1:  Passed 0.0 sec", "googletest": "[       OK ] (0 ms)"}


@pytest.mark.parametrize("parser", LANGUAGE_PARSERS)
def test_garbage_and_cut_logs_give_no_test_and_no_crash(parser):
    for text in [*GARBAGE, NEAR_MISSES.get(parser, "")]:
        assert parse_log(parser, text) == {}, text
    rng = random.Random(parser)
    for path in sorted(LOGS.glob("*/*.log")):
        text = path.read_text()
        parse_log(parser, text[: rng.randrange(len(text))])  # cut anywhere: must not raise
        noise = "".join(rng.choice("{}[]<>/\"\\:,. \nabc✓✕×") for _ in range(2000))
        parse_log(parser, noise)


def test_xml_entities_are_not_expanded_from_a_log():
    bomb = ('<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            '<testsuite><testcase classname="A" name="&b;"/></testsuite>')
    assert parse_log("junit_xml", bomb) == {}


@pytest.mark.parametrize(("parser", "name"), sorted({(parser, name) for parser, name, _ in EXPECTED}))
def test_a_five_megabyte_log_parses(parser, name):
    text = log(name)
    big = text * (5 * 2**20 // len(text) + 1)
    assert len(big) >= 5 * 2**20
    assert dict(parse_log(parser, big)) == dict(parse_log(parser, text))


# Another tool's log, or nothing a test runner printed: the task's tests cannot be read from it.
FOREIGN = {
    "pytest": "============ test session starts ============\nPASSED tests/test_x.py::test_a\n",
    "shell": "bash: line 1: the-test-command: command not found\n",
}


@pytest.mark.parametrize("parser", LANGUAGE_PARSERS)
def test_a_log_in_an_unknown_format_is_a_harness_error_naming_the_parser(parser):
    for text in FOREIGN.values():
        statuses = parse_log(parser, text)
        assert statuses == {} and statuses.format_seen is False
        report = grade(statuses, ["a"], ["b"], exit_code=0, log_complete=True)
        assert report.outcome is Outcome.HARNESS_ERROR and not report.resolved
        assert repr(parser) in report.reason
    wrapped = ">>>>> Start Test Output\nsomething else entirely\n>>>>> End Test Output\n>>>>> Test Exit Code: 0\n"
    assert grade_log(wrapped, parser, ["a"], []).outcome is Outcome.HARNESS_ERROR


def test_another_language_log_is_an_unknown_format():
    report = grade(parse_log("go_json", log("cargo/cargo_test.log")), ["TestAdd"], [], exit_code=101,
                   log_complete=True)
    assert report.outcome is Outcome.HARNESS_ERROR and "'go_json'" in report.reason


def test_without_listed_tests_or_for_python_an_empty_log_stays_unresolved():
    assert grade(parse_log("go_json", "nothing"), [], [], exit_code=0, log_complete=True).outcome is Outcome.UNRESOLVED
    for parser in ("pytest", "django", "sympy"):
        statuses = parse_log(parser, "bash: go: command not found\n")
        assert statuses.format_seen is None
        report = grade(statuses, ["a"], [], exit_code=127, log_complete=True)
        assert report.outcome is Outcome.UNRESOLVED and report.reason == "no test results in the log"


# SWE-bench's parsers for tools not installed here: short excerpts of their documented output.
EXCERPTS = [
    ("redis", "[ok]: SET and GET (1 ms)\n[err]: EXPIRE works in tests/unit/expire.tcl\n[skip]: Slow test\n"
              "[ignore]: Not for this build\n[ok]: Multi word name with 2 (10 ms)\n",
     {"SET and GET": P, "EXPIRE works": F, "Slow test": S, "Not for this build": S, "Multi word name with 2": P}),
    ("jq", "PASS: tests/optionaltest\nFAIL: tests/jqtest\nSKIP: tests/mantest\n# TOTAL: 3\n",
     {"tests/optionaltest": P, "tests/jqtest": F}),
    ("micropython_test", "pass  basics/int.py\nFAIL  basics/list.py\nskip  basics/thread.py\n3 tests performed\n",
     {"basics/int.py": P, "basics/list.py": F, "basics/thread.py": S}),
    ("doctest", '[doctest] run\n<?xml version="1.0"?>\n<doctest binary="t">\n <TestSuite>\n'
                '  <TestCase name="parse" filename="t.cpp" line="1">\n   <SubCase name="numbers">\n'
                '    <Expression success="true" type="CHECK"/>\n   </SubCase>\n   <SubCase name="strings">\n'
                '    <Expression success="true" type="CHECK"/><Expression success="false" type="CHECK"/>\n'
                '   </SubCase>\n  </TestCase>\n  <TestCase name="no subcases"/>\n </TestSuite>\n</doctest>\n',
     {"parse > numbers": P, "parse > strings": F}),
    ("ant", "    [junit] [PASS] lombok.TestA\n    [junit] [FAIL] lombok.TestB\n    [junit] [ERR] lombok.TestC\n",
     {"lombok.TestA": P, "lombok.TestB": F, "lombok.TestC": F}),
    ("gradle_custom", "org.apache.lucene.TestA > testOne PASSED\norg.apache.lucene.TestA > testTwo\n"
                      "WARNING: something\nFAILED\n> Task :test\n",
     {"org.apache.lucene.TestA > testOne": P, "org.apache.lucene.TestA > testTwo": F}),
    ("karma", "noise ✔ before\nINFO [launcher]: Starting browser ChromeHeadless\n  hooks\n    ✔ renders\n"
              "    useState\n      ✖ updates\nSUMMARY:\n✔ 2 tests completed\n",
     {"hooks > renders": P, "hooks > useState > updates": F}),
    ("phpunit", "PHPUnit 10.5.0 by Sebastian Bergmann\n\nCalculator (Tests\\Calculator)\n ✔ Adds numbers\n"
                " ✘ Divides by zero\n ↩ Skipped one\n\nTests: 3, Assertions: 2, Failures: 1.\n",
     {"Calculator > Adds numbers": P, "Calculator > Divides by zero": F, "Calculator > Skipped one": S}),
    ("minitest", "TestSite#test_: a site should build. = 0.12 s = .\nTestSite#test_: a site should render. = 0.01 s = F\n"
                 "1 runs, 1 assertions\n",
     {"TestSite#test_: a site should build": P, "TestSite#test_: a site should render": F}),
    ("cucumber", "Build a site ......\nServe drafts ...F--\n",
     {"Build a site": P, "Serve drafts": F}),
    ("ruby_unit", "test: parse config(ConfigTest): .: (0.001)\ntest_buffer(BufferTest): F\n"
                  "test_skip(BufferTest): O\n",
     {"parse config(ConfigTest)": P, "test_buffer(BufferTest)": F, "test_skip(BufferTest)": S}),
    ("rspec_transformed_json", "Fastlane::Action runs - passed\nFastlane::Action fails - failed\n"
                               "Fastlane::Action waits - pending\n",
     {"Fastlane::Action runs": P, "Fastlane::Action fails": F}),
    ("marked", "1) Marked Code spans should work\n  2) indented is ignored\n3) another (5ms)\n1 spec, 2 failures\n",
     {"Marked Code spans should work": F, "another (5ms)": F}),
    ("chart_js", "Chrome 120.0.0.0 (Linux x86_64) Chart.controllers.bar should draw FAILED\n"
                 "Chrome 120.0.0.0 (Linux x86_64) ok one SUCCESS\nExecuted 2 of 2 (1 FAILED)\n",
     {"Chart.controllers.bar should draw ": F}),
    ("bpmn_js", "HeadlessChrome 120.0.0 (Linux 0.0.0) Modeler should import FAILED\n"
                "Chrome Headless 120 (Linux x86_64) Viewer should show FAILED\nExecuted 3 of 3\n",
     {"Modeler should import ": F, "Viewer should show ": F}),
]


@pytest.mark.parametrize(("parser", "text", "expected"), EXCERPTS, ids=[e[0] for e in EXCERPTS])
def test_swebench_parsers_on_excerpts_of_their_formats(parser, text, expected):
    statuses = parse_log(parser, text)
    assert dict(statuses) == expected and statuses.format_seen is True


# Logs a patch could make to slow grading down (1-2 MB): documents that never end, starts without ends. Each
# part of the log is decoded once or twice (log_parsers_base.json_objects, the junit_xml scan).
ADVERSARIAL = {
    "unclosed_json": '{"testResults": [\n' + ('{"a": "' + "x" * 100 + '",\n') * 20_000,
    "open_lines": "{\n" * 500_000 + "}\n",
    "suite_starts": "<testsuite>\n" * 100_000 + "x" * 1_000_000 + "</testsuite>",
}


@pytest.mark.parametrize("parser", ["go_json", "nextest", "jest_json", "vitest_json", "mocha_json", "junit_xml"])
def test_adversarial_logs_parse(parser):
    for text in ADVERSARIAL.values():
        assert parse_log(parser, text) == {}


def test_a_json_report_printed_behind_other_text_is_read():
    report = log("jest_json/jest_json.log").rsplit("\n{", 1)[1]
    assert dict(parse_log("jest_json", "Done in 2.1s.\x1b[0m{" + report)) == {**JS_JSON, "/tmp/pz/js/jt/broken.test.js": E}
    mocha = log("mocha_json/mocha_json.log")
    assert dict(parse_log("mocha_json", "> mocha --reporter json " + mocha)) == dict(parse_log("mocha_json", mocha))
