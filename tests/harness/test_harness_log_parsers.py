"""Log parsers on log excerpts in the real formats, and on every test id of SWE-bench Lite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeagent.harness.grading.verdict import grade
from codeagent.harness.logs.parsers import PARSERS, REPO_PARSERS, parse_log, parser_for_repo

DATA = Path(__file__).parent.parent / "data" / "harness"


def log(name: str) -> str:
    return (DATA / name).read_text()


def test_django_verbose_runner_output():
    statuses = parse_log("django", log("django.log"))
    assert statuses["test_add_field (migrations.test_operations.OperationTests)"] == "PASSED"
    # a test with a docstring is reported under the docstring's first line
    assert statuses["Tests the AlterField operation."] == "PASSED"
    assert "test_alter_field (migrations.test_operations.OperationTests)" not in statuses
    assert statuses["Tests the AlterField operation on primary keys (for things like"] == "FAILED"
    assert statuses["test_remove_field (migrations.test_operations.OperationTests)"] == "ERROR"
    assert statuses["test_rename_index (migrations.test_operations.OperationTests)"] == "SKIPPED"
    # unexpected success fails the run; expected failure is not counted as a pass (as in SWE-bench)
    assert statuses["test_rename_field (migrations.test_operations.OperationTests)"] == "FAILED"
    assert "test_rename_model (migrations.test_operations.OperationTests)" not in statuses
    # `ok` on its own line after output the test (or Django) printed
    assert statuses["test_runner_deprecation_verbosity_zero (test_runner.tests.DiscoverRunnerTests)"] == "PASSED"
    assert statuses["test_custom_command_output (admin_scripts.tests.CommandTypes)"] == "PASSED"
    assert statuses["--version is equivalent to version"] == "PASSED"
    # Python >= 3.11 spelling; a failing subtest fails its test
    assert statuses["test_unique (model_fields.tests.BasicFieldTests.test_unique)"] == "PASSED"
    assert statuses["test_choices (model_fields.tests.ChoicesTests.test_choices)"] == "FAILED"
    # failure blocks at the end: setUpClass errors only show up there
    assert statuses["setUpClass (migrations.test_commands.SquashMigrationsTests)"] == "ERROR"
    assert statuses["test_alter_field_pk (migrations.test_operations.OperationTests)"] == "FAILED"
    # migrations' `Applying x... OK` lines are not tests
    assert not any(test.startswith("Applying") for test in statuses)


def test_django_failure_block_needs_its_rule_line():
    text = ("ERROR:django.request:Internal Server Error: /raises/\n"
            "test_docstring_test (view_tests.tests.DebugTests)\n"
            "A view that raises. ... ok\n")
    statuses = parse_log("django", text)
    assert statuses == {"A view that raises.": "PASSED"}


def test_sympy_verbose_runner_output():
    statuses = parse_log("sympy", log("sympy.log"))
    assert statuses["test_printmethod"] == "PASSED"
    assert statuses["test_latex_basic"] == "FAILED"
    # `E`, and a failure header, which SWE-bench reads first: the result line decides
    assert statuses["test_structure"] == "ERROR"
    # the last test of a file shares its line with the file's [OK]/[FAIL]
    assert statuses["test_latex_functions"] == "PASSED"
    assert statuses["test_mod"] == "PASSED"
    assert statuses["test_has"] == "PASSED"
    # expected-to-fail and skipped tests are not counted as passes (as in SWE-bench)
    for test in ("test_equality", "test_matches_basic", "test_subs_slow"):
        assert test not in statuses


def test_sympy_error_and_timeout_markers():
    statuses = parse_log("sympy", "sympy/core/tests/test_x.py[2] \ntest_a E\ntest_b T\n")
    assert statuses == {"test_a": "ERROR", "test_b": "ERROR"}


def test_sympy_test_file_that_fails_to_import():
    # no test line at all, but the run fails: the error must show so the exit status is explained
    text = ("sympy/physics/tests/test_units.py[?]   Failed to import                        [FAIL]\n\n"
            "________________________________________________________________________________\n"
            "__________________ sympy/physics/tests/test_units.py ___________________\n"
            "Traceback (most recent call last):\n"
            "ImportError: cannot import name 'Unit' from 'sympy.physics.units'\n")
    assert parse_log("sympy", text) == {"sympy/physics/tests/test_units.py": "ERROR"}


def test_pytest_short_summary():
    statuses = parse_log("pytest", log("pytest_ra.log"))
    assert statuses["tests/test_config.py::test_config_from_file"] == "PASSED"
    assert statuses["tests/test_config.py::test_from_pyfile_weird_encoding[iso-8859-15]"] == "PASSED"
    # SWE-bench cuts ids at the first space, inside parameters too
    assert statuses["tests/test_config.py::test_get_namespace[with"] == "PASSED"
    assert statuses["tests/test_config.py::test_config_missing_json"] == "XFAIL"
    # passed, then errored at teardown: the worse status stands
    assert statuses["tests/test_config.py::test_session"] == "ERROR"
    assert statuses["tests/test_cli.py"] == "ERROR"  # collection error
    assert statuses["tests/test_config.py::test_from_prefixed_env"] == "FAILED"
    assert "tests/test_config.py::test_flaky_reload" not in statuses  # XPASS is not a status
    assert not any(test.startswith("[") for test in statuses)  # `SKIPPED [1] path:line` is no test


def test_pytest_v2_keeps_whole_ids_and_drops_messages():
    statuses = parse_log("pytest_v2", log("pytest_ra.log"))
    assert statuses["tests/test_config.py::test_get_namespace[with space - and dash]"] == "PASSED"
    assert statuses["tests/test_config.py::test_config_missing_json"] == "XFAIL"
    assert statuses["tests/test_config.py::test_from_prefixed_env"] == "FAILED"
    sklearn = parse_log("pytest_v2", log("sklearn.log"))
    test = "sklearn/metrics/tests/test_ranking.py::test_roc_curve_drop_intermediate[<lambda> - default]"
    assert sklearn[test] == "FAILED"
    assert sklearn["sklearn/metrics/tests/test_ranking.py::test_roc_curve_hard"] == "XFAIL"


def test_pytest_v2_reads_classic_verbose_lines():
    statuses = parse_log("pytest_v2", log("astropy_classic.log"))
    assert statuses == {
        "astropy/io/ascii/tests/test_qdp.py::test_get_tables_from_qdp_file": "PASSED",
        "astropy/io/ascii/tests/test_qdp.py::test_roundtrip[True]": "PASSED",
        "astropy/io/ascii/tests/test_qdp.py::test_roundtrip[False]": "FAILED",
        "astropy/io/ascii/tests/test_qdp.py::test_read_example": "PASSED",
        "astropy/io/ascii/tests/test_qdp.py::test_lowercase_header[lower case]": "PASSED",
    }


def test_matplotlib_mouse_buttons():
    statuses = parse_log("matplotlib", log("matplotlib.log"))
    assert statuses["lib/matplotlib/tests/test_widgets.py::test_lasso_selector[kwargs1-1]"] == "PASSED"
    assert statuses["lib/matplotlib/tests/test_widgets.py::test_polygon_selector_remove[False-3]"] == "PASSED"
    assert statuses["lib/matplotlib/tests/test_widgets.py::test_check_buttons_lines[png]"] == "FAILED"


def test_seaborn_reads_what_swebench_reads_plus_failures():
    statuses = parse_log("seaborn", log("seaborn.log"))
    assert statuses == {
        "tests/_core/test_scales.py::TestNominal::test_interval_list": "PASSED",
        "tests/_core/test_scales.py::TestNominal::test_color_defaults": "PASSED",
        "tests/_core/test_scales.py::TestContinuous::test_label_base": "FAILED",
        "tests/_core/test_scales.py::TestTemporal::test_label_concise": "ERROR",
    }


def test_pytest_options_shortens_absolute_path_parameters():
    statuses = parse_log("pytest_options", log("requests.log"))
    assert statuses["tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]"] == "PASSED"
    assert statuses["tests/test_requests.py::TestRequests::test_invalid_url[InvalidURL-http://]"] == "PASSED"
    assert statuses["tests/test_requests.py::TestRequests::test_basic_building"] == "FAILED"


def test_colour_codes_from_a_pty_are_ignored():
    text = ("\x1b[32mPASSED\x1b[0m tests/test_a.py::test_ok\r\n"
            "\x1b[31mFAILED\x1b[0m tests/test_a.py::test_bad - assert 0\r\n")
    assert parse_log("pytest", text) == {"tests/test_a.py::test_ok": "PASSED",
                                         "tests/test_a.py::test_bad": "FAILED"}


@pytest.mark.parametrize("pass_last", [True, False])
@pytest.mark.parametrize("parser, failed, passed, test", [
    ("pytest", "FAILED tests/test_a.py::test_b - AssertionError", "PASSED tests/test_a.py::test_b",
     "tests/test_a.py::test_b"),
    ("pytest_v2", "tests/test_a.py::test_b FAILED", "PASSED tests/test_a.py::test_b", "tests/test_a.py::test_b"),
    ("seaborn", "FAILED tests/test_a.py::test_b - boom", "PASSED tests/test_a.py::test_b", "tests/test_a.py::test_b"),
    ("django", "test_b (app.tests.T) ... FAIL", "test_b (app.tests.T) ... ok", "test_b (app.tests.T)"),
    ("sympy", "test_b F", "test_b ok", "test_b"),
])
def test_a_test_reported_several_times_keeps_its_last_status(parser, failed, passed, test, pass_last):
    # SWE-bench's parsers assign one dict entry per line: the last report of a test counts
    lines = [failed, passed] if pass_last else [passed, failed]
    statuses = parse_log(parser, "\n".join(lines) + "\n")
    assert statuses[test] == ("PASSED" if pass_last else "FAILED")
    assert test in statuses.conflicts
    # the worst-status merge stays available for comparisons
    assert parse_log(parser, "\n".join(lines) + "\n", merge="worst")[test] == "FAILED"


def test_a_junk_id_reported_several_times_as_in_pytest_5227():
    # pytest-dev__pytest-5227's PASS_TO_PASS lists `[100%]`: in its log, status lines whose id is
    # the progress marker, FAILED once and PASSED eight times, the last PASSED. SWE-bench's
    # pytest parser (log_parsers/python.py, `^(STATUS)\s+(\S+)` then a dict assignment per line)
    # maps it to PASSED; so does ours, in the order of the last report.
    log = ("PASSED [100%]\n" * 3 + "FAILED [100%]\n" + "PASSED [100%]\n" * 5
           + "PASSED testing/logging/test_reporting.py::test_nothing_logged\n")
    statuses = parse_log("pytest", log)
    assert statuses == {"[100%]": "PASSED", "testing/logging/test_reporting.py::test_nothing_logged": "PASSED"}
    assert statuses.conflicts == {"[100%]"}
    assert list(parse_log("pytest", "PASSED a::x\nPASSED a::y\nFAILED a::x\n")) == ["a::y", "a::x"]


def test_sympy_failure_headers_are_read_before_the_result_lines():
    # SWE-bench reads the `___ path.py:test ___` headers first, then the result lines override
    log = ("sympy/a/tests/test_x.py[2]\ntest_same F\n"
           "sympy/b/tests/test_y.py[1]\ntest_same ok\n"
           "________ sympy/a/tests/test_x.py:test_same ________\n")
    statuses = parse_log("sympy", log)
    assert statuses["test_same"] == "PASSED"
    assert statuses["sympy/a/tests/test_x.py:test_same"] == "FAILED"


def test_unknown_parser_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown log parser 'nose'.*django"):
        parse_log("nose", "")


def test_parser_for_repo():
    assert parser_for_repo("django/django") == "django"
    assert parser_for_repo("https://github.com/sympy/sympy.git") == "sympy"
    assert parser_for_repo("psf/requests") == "pytest_options"
    assert parser_for_repo("someone/else") == "pytest"
    assert set(REPO_PARSERS.values()) <= set(PARSERS)


# ------------------------------------------------------------------ every test id of SWE-bench Lite

@pytest.fixture(scope="module")
def lite_rows(lite_raw) -> list[dict]:
    return lite_raw["test"] + lite_raw["dev"]


def _render(repo: str, test: str, status: str) -> str:
    """One log line reporting `test`, as the repository's test runner prints it."""
    if repo == "django/django":
        return f"{test} ... {'ok' if status == 'PASSED' else 'FAIL'}"
    if repo == "sympy/sympy":
        return f"{test} {'ok' if status == 'PASSED' else 'F'}"
    if test.count("[") > test.count("]"):
        test += " more]"  # SWE-bench cut this id at a space: print the whole one
    elif repo in ("psf/requests", "pylint-dev/pylint", "pydicom/pydicom") and "[/" in test:
        test = test.replace("[/", "[/tmp/pytest-of-root/pytest-0/test_x0/", 1)  # the real absolute path
    return f"{status} {test}" + (" - AssertionError: boom" if status == "FAILED" else "")


def test_every_lite_repo_has_a_parser(lite_rows):
    repos = {row["repo"] for row in lite_rows}
    assert len(repos) == 18
    assert repos <= set(REPO_PARSERS)


def test_every_lite_test_id_round_trips_through_its_parser(lite_rows):
    """Each listed id, printed the way its runner prints it, parses back and grades as expected."""
    problems = []
    for row in lite_rows:
        parser = parser_for_repo(row["repo"])
        f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
        passing = "\n".join(_render(row["repo"], test, "PASSED") for test in f2p + p2p) + "\n"
        report = grade(parse_log(parser, passing), f2p, p2p, exit_code=0, log_complete=True)
        if not report.resolved:
            problems.append((row["instance_id"], "all passing", report.f2p_failed[:2] + report.p2p_failed[:2]))
        # one failing FAIL_TO_PASS test (and an honest nonzero exit status) must not resolve
        failing = passing + _render(row["repo"], f2p[0], "FAILED") + "\n"
        report = grade(parse_log(parser, failing), f2p, p2p, exit_code=1, log_complete=True)
        if report.resolved or f2p[0] not in report.f2p_failed:
            problems.append((row["instance_id"], "one failing", f2p[0]))
    assert not problems, problems[:10]


def test_lite_ids_have_their_parsers_shape(lite_rows):
    for row in lite_rows:
        parser = parser_for_repo(row["repo"])
        for test in json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"]):
            if parser == "sympy":
                assert test.startswith("test_") and test.isidentifier(), (row["instance_id"], test)
            elif parser == "django":
                assert " " in test and "\n" not in test, (row["instance_id"], test)
            elif row["instance_id"] != "pytest-dev__pytest-5227":  # three ids there are stray progress text
                assert "::" in test and " " not in test, (row["instance_id"], test)
