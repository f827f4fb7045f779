"""codeagent's pytest guard: put into the grading container under a name drawn for the run, inside a zip
archive on PYTHONPATH (guard.py), and loaded first (`-p NAME`), it records how each test ran as this
plugin saw it, for the harness to check the test log against.

Never imported by codeagent itself. It runs in the task's environment: standard library only, the
hooks every pytest since 3.0 has, no syntax newer than Python 3.5.

What it records, one signed line each (HMAC-SHA256 with a key it reads and deletes at import, so
the code under test cannot sign a line of its own):
- a session start and end (with pytest's exit status): a run that exits early has no end;
- every phase (setup, call, teardown) of every test: the exception the phase's hook raised as this
  plugin's hook wrapper saw it (or, for unittest-style tests, whose failures pytest keeps aside, the
  one pytest hands to the report), not the report pytest built from it; then the report's outcome;
- which of a fixed list of pytest internals and unittest assertions were replaced during the run, and
  any plugin registered after the session started (not a conftest, not a module imported as a plugin)
  that implements a hook deciding a test's outcome (a `pytest_pyfunc_call` that swallows the failure).

Out of the code under test's reach, as far as Python allows: the module's name is drawn for the run
and the module leaves sys.modules once pytest has registered it; its key, its records file, its
helpers and what it saw live in closures, not in module attributes, so replacing `module._helper`
changes nothing it calls; loaded from a zip archive, it is never rewritten by pytest's assertion
rewriter (whose code is the code under test when the repository is pytest itself). The records go to
a file beside the archive, opened and closed for each line with `os` functions taken at import, so no
open descriptor leads to it. At import the plugin takes its archive off sys.path and PYTHONPATH and its
`-p` off PYTEST_ADDOPTS: the tests see the environment they would see without it, and pytest runs they
start do not load it.
"""

import sys


def _build(name, archive, this_module):
    import hashlib
    import hmac
    import json
    import os
    import unittest

    import pytest

    open_, write, close, getpid = os.open, os.write, os.close, os.getpid
    new_mac, sha256, dumps = hmac.new, hashlib.sha256, json.dumps
    folder = os.path.dirname(archive)
    records = os.path.join(folder, "records")
    option = "-p " + name

    def take_key():
        path = os.path.join(folder, "key")
        try:
            with open(path, "rb") as handle:
                key = handle.read()
            os.unlink(path)
        except OSError:
            return None
        return key or None

    def restore_environment():
        sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != archive]
        paths = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry != archive]
        if any(paths):
            os.environ["PYTHONPATH"] = os.pathsep.join(paths)
        else:
            os.environ.pop("PYTHONPATH", None)
        options = os.environ.get("PYTEST_ADDOPTS", "")
        if options.startswith(option):
            options = options[len(option):].strip()
            if options:
                os.environ["PYTEST_ADDOPTS"] = options
            else:
                os.environ.pop("PYTEST_ADDOPTS", None)

    key = take_key()
    restore_environment()

    def record(**fields):
        if key is None:
            return
        fields["pid"] = getpid()
        body = dumps(fields, sort_keys=True).encode("utf-8")
        line = body + b" " + new_mac(key, body, sha256).hexdigest().encode("ascii") + b"\n"
        descriptor = open_(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            write(descriptor, line)
        finally:
            close(descriptor)

    # -- what the code under test might replace to make a test pass without running it -------------

    watched_names = (
        ("_pytest.runner", ("call_runtest_hook", "call_and_report", "runtestprotocol", "pytest_runtest_setup",
                            "pytest_runtest_call", "pytest_runtest_teardown", "pytest_runtest_makereport",
                            "CallInfo", "CallInfo.from_call", "CallInfo.__init__", "TestReport",
                            "TestReport.__init__", "TestReport.from_item_and_call")),
        ("_pytest.reports", ("TestReport", "TestReport.__init__", "TestReport.from_item_and_call")),
        ("_pytest.python", ("Function.runtest", "Function._getobj", "Function.obj", "pytest_pyfunc_call")),
        ("_pytest.unittest", ("TestCaseFunction.runtest", "TestCaseFunction.addFailure",
                              "TestCaseFunction.addError", "TestCaseFunction.addSkip",
                              "TestCaseFunction.addExpectedFailure", "TestCaseFunction.addUnexpectedSuccess",
                              "pytest_runtest_makereport")),
        ("_pytest.skipping", ("pytest_runtest_makereport",)),
        ("builtins", ("AssertionError", "isinstance", "issubclass")),
    )

    def resolve(owner, dotted):
        """An attribute as stored (a class's own dict, not a bound method made anew at each lookup)."""
        for part in dotted.split("."):
            owner = vars(owner).get(part) if isinstance(owner, type) else getattr(owner, part, None)
            if owner is None:
                return None
        return owner

    def watched():
        found = []  # type: list
        for module_name, attributes in watched_names:
            module = sys.modules.get(module_name)
            for dotted in attributes if module is not None else ():
                value = resolve(module, dotted)
                if value is not None:
                    found.append((module_name + "." + dotted, module, dotted, value))
        for attribute in vars(unittest.TestCase):
            if attribute.startswith(("assert", "fail")) or attribute in ("run", "__call__", "_callTestMethod", "debug"):
                found.append(("unittest.TestCase." + attribute, unittest.TestCase, attribute,
                              vars(unittest.TestCase)[attribute]))
        return found

    original = watched()
    replaced = set()
    deciding = ("pytest_runtest_protocol", "pytest_runtest_call", "pytest_pyfunc_call", "pytest_runtest_makereport",
                "pytest_report_teststatus")
    plugins_at_start = []  # type: list  # [plugin manager, ids of its plugins when the session started]

    def check_replaced():
        for label, owner, dotted, value in original:
            if label not in replaced and resolve(owner, dotted) is not value:
                replaced.add(label)
        if plugins_at_start:
            check_plugins(*plugins_at_start)

    def check_plugins(manager, known):
        """A plugin registered after the session started, other than a conftest or a module imported as a
        plugin (pytest_plugins), that implements a hook deciding a test's outcome: the code under test's."""
        for hook_name in deciding:
            hook = getattr(manager.hook, hook_name, None)
            for implementation in hook.get_hookimpls() if hook is not None else ():
                plugin = implementation.plugin
                if id(plugin) in known or plugin is this_module:
                    continue
                name = manager.get_name(plugin) or type(plugin).__name__
                if getattr(plugin, "__file__", None) and (os.path.basename(plugin.__file__) == "conftest.py"
                                                          or name == getattr(plugin, "__name__", None)):
                    continue
                replaced.add("plugin registered during the run: " + str(name) + " (" + hook_name + ")")

    # -- outcomes as this plugin sees them -----------------------------------------------------------

    skips = (pytest.skip.Exception, unittest.SkipTest)
    xfails = pytest.xfail.Exception
    raised = {}  # (node id, phase) -> the exception type the phase's hook raised, or None

    def kind(exception_type):
        if exception_type is None:
            return "passed"
        if issubclass(exception_type, xfails):
            return "xfailed"
        if issubclass(exception_type, skips):
            return "skipped"
        return "failed"

    def test_id(item):
        relative = getattr(item.config, "cwd_relative_nodeid", None)
        return relative(item.nodeid) if relative is not None else item.nodeid

    def phase_wrapper(phase):
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def wrapper(item):
            outcome = yield
            excinfo = outcome.excinfo
            raised[(item.nodeid, phase)] = excinfo[0] if excinfo else None
        return wrapper

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        exception_type = raised.pop((item.nodeid, call.when), None)
        if exception_type is None and call.excinfo is not None:
            exception_type = call.excinfo.type  # a unittest-style test: pytest hands its failure to the report
        try:
            reported = outcome.get_result().outcome
        except BaseException:
            reported = None
        if call.when == "teardown":
            check_replaced()  # the test's own fixtures (monkeypatch) are undone by now
        record(k="phase", id=test_id(item), when=call.when, raw=kind(exception_type), report=reported,
               xfail="xfail" in item.keywords)

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config):
        sys.modules.pop(name, None)  # registered by pytest under its name: the module itself is not needed

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session):
        manager = session.config.pluginmanager
        plugins_at_start[:] = [manager, set(id(plugin) for plugin in manager.get_plugins())]
        # pytest-xdist: the tests run in workers this plugin is not loaded in (their phases are not seen here)
        distributed = (bool(getattr(session.config.option, "numprocesses", None))
                       or bool(getattr(manager, "has_plugin", lambda name: False)("dsession")))
        record(k="start", replaced=sorted(replaced), distributed=distributed)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(session, exitstatus):
        yield
        check_replaced()
        record(k="end", exit=int(exitstatus), replaced=sorted(replaced))

    return {"pytest_runtest_setup": phase_wrapper("setup"), "pytest_runtest_call": phase_wrapper("call"),
            "pytest_runtest_teardown": phase_wrapper("teardown"),
            "pytest_runtest_makereport": pytest_runtest_makereport, "pytest_configure": pytest_configure,
            "pytest_sessionstart": pytest_sessionstart, "pytest_sessionfinish": pytest_sessionfinish}


def _archive():
    import os

    here = os.path.abspath(__file__)
    parent = os.path.dirname(here)
    return parent if os.path.isfile(parent) else here  # the zip archive this module was loaded from


globals().update(_build(__name__, _archive(), sys.modules[__name__]))
del _build, _archive
