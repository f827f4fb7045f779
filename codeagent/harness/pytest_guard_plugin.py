"""codeagent's pytest guard: copied into the grading container as `codeagent_guard.py` and loaded
first (`-p codeagent_guard`, see guard.py), it records how each test ran as this plugin saw it, for
the harness to check the test log against.

Never imported by codeagent itself. It runs in the task's environment: standard library only, the
hooks every pytest since 3.0 has, no syntax newer than Python 3.5.

What it records, one signed line each (HMAC-SHA256 with a key it reads and deletes at import, so
the code under test cannot sign a line of its own):
- a session start and end (with pytest's exit status): a run that exits early has no end;
- every phase (setup, call, teardown) of every test: the exception the phase's hook raised as this
  plugin's hook wrapper saw it (or, for unittest-style tests, whose failures pytest keeps aside, the
  one pytest hands to the report), not the report pytest built from it; then the report's outcome;
- which of a fixed list of pytest internals and unittest assertions were replaced during the run.

The records go to a file in this plugin's folder, opened and closed for each line with `os`
functions taken at import, so no open descriptor leads to it. At import the plugin takes its
folder off sys.path and PYTHONPATH and its `-p` off PYTEST_ADDOPTS: the tests see the environment
they would see without it, and pytest runs they start do not load it.
"""

import hashlib
import hmac
import json
import os
import sys
import unittest

import pytest

_open, _write, _close, _getpid = os.open, os.write, os.close, os.getpid
_new_mac, _sha256, _dumps = hmac.new, hashlib.sha256, json.dumps
_FOLDER = os.path.dirname(os.path.abspath(__file__))
_RECORDS = os.path.join(_FOLDER, "records")
_OPTION = "-p codeagent_guard"


def _take_key():
    path = os.path.join(_FOLDER, "key")
    try:
        with open(path, "rb") as handle:
            key = handle.read()
        os.unlink(path)
    except OSError:
        return None
    return key or None


def _restore_environment():
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _FOLDER]
    paths = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry != _FOLDER]
    if any(paths):
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)
    options = os.environ.get("PYTEST_ADDOPTS", "")
    if options.startswith(_OPTION):
        options = options[len(_OPTION):].strip()
        if options:
            os.environ["PYTEST_ADDOPTS"] = options
        else:
            os.environ.pop("PYTEST_ADDOPTS", None)


_KEY = _take_key()
_restore_environment()


def _record(**fields):
    if _KEY is None:
        return
    fields["pid"] = _getpid()
    body = _dumps(fields, sort_keys=True).encode("utf-8")
    line = body + b" " + _new_mac(_KEY, body, _sha256).hexdigest().encode("ascii") + b"\n"
    descriptor = _open(_RECORDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _write(descriptor, line)
    finally:
        _close(descriptor)


# -- what the code under test might replace to make a test pass without running it -----------------

_WATCHED = (
    ("_pytest.runner", ("call_runtest_hook", "call_and_report", "runtestprotocol", "pytest_runtest_setup",
                        "pytest_runtest_call", "pytest_runtest_teardown", "pytest_runtest_makereport",
                        "CallInfo", "CallInfo.from_call", "CallInfo.__init__", "TestReport",
                        "TestReport.__init__", "TestReport.from_item_and_call")),
    ("_pytest.reports", ("TestReport", "TestReport.__init__", "TestReport.from_item_and_call")),
    ("_pytest.python", ("Function.runtest", "pytest_pyfunc_call")),
    ("_pytest.unittest", ("TestCaseFunction.runtest", "TestCaseFunction.addFailure", "TestCaseFunction.addError",
                          "TestCaseFunction.addSkip", "TestCaseFunction.addExpectedFailure",
                          "TestCaseFunction.addUnexpectedSuccess", "pytest_runtest_makereport")),
    ("_pytest.skipping", ("pytest_runtest_makereport",)),
    ("builtins", ("AssertionError", "isinstance", "issubclass")),
)


def _resolve(owner, dotted):
    """An attribute as stored (a class's own dict, not a bound method made anew at each lookup)."""
    for part in dotted.split("."):
        owner = vars(owner).get(part) if isinstance(owner, type) else getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _watched():
    found = []  # type: list
    for module_name, attributes in _WATCHED:
        module = sys.modules.get(module_name)
        for dotted in attributes if module is not None else ():
            value = _resolve(module, dotted)
            if value is not None:
                found.append((module_name + "." + dotted, module, dotted, value))
    for name in vars(unittest.TestCase):
        if name.startswith(("assert", "fail")) or name in ("run", "__call__", "_callTestMethod", "debug"):
            found.append(("unittest.TestCase." + name, unittest.TestCase, name, vars(unittest.TestCase)[name]))
    return found


_ORIGINAL = _watched()
_replaced = set()  # type: set


def _check_replaced():
    for name, owner, dotted, value in _ORIGINAL:
        if name not in _replaced and _resolve(owner, dotted) is not value:
            _replaced.add(name)


# -- outcomes as this plugin sees them ---------------------------------------------------------------

_SKIP = (pytest.skip.Exception, unittest.SkipTest)
_XFAIL = pytest.xfail.Exception
_raised = {}  # type: dict  # (node id, phase) -> the exception type the phase's hook raised, or None


def _kind(exception_type):
    if exception_type is None:
        return "passed"
    if issubclass(exception_type, _XFAIL):
        return "xfailed"
    if issubclass(exception_type, _SKIP):
        return "skipped"
    return "failed"


def _test_id(item):
    relative = getattr(item.config, "cwd_relative_nodeid", None)
    return relative(item.nodeid) if relative is not None else item.nodeid


def _phase_wrapper(phase):
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def wrapper(item):
        outcome = yield
        excinfo = outcome.excinfo
        _raised[(item.nodeid, phase)] = excinfo[0] if excinfo else None
    return wrapper


pytest_runtest_setup = _phase_wrapper("setup")
pytest_runtest_call = _phase_wrapper("call")
pytest_runtest_teardown = _phase_wrapper("teardown")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    raised = _raised.pop((item.nodeid, call.when), None)
    if raised is None and call.excinfo is not None:
        raised = call.excinfo.type  # a unittest-style test: pytest hands its failure to the report
    try:
        reported = outcome.get_result().outcome
    except BaseException:
        reported = None
    if call.when == "teardown":
        _check_replaced()  # the test's own fixtures (monkeypatch) are undone by now
    _record(k="phase", id=_test_id(item), when=call.when, raw=_kind(raised), report=reported,
            xfail="xfail" in item.keywords)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _record(k="start", replaced=sorted(_replaced))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    _check_replaced()
    _record(k="end", exit=int(exitstatus), replaced=sorted(_replaced))
