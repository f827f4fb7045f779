"""The task environment's pieces that eval, the regression verifier and rollouts share: the base
layer built once under concurrency, progress of a long test run, network failures read from logs."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from codeagent.harness.grading import task_env
from codeagent.harness.layers import python_env as environment
from codeagent.harness.logs.offline import network_failures


def test_concurrent_workers_build_the_base_image_once(monkeypatch, tmp_path):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path))
    built, state = [], {"running": 0, "most": 0}
    guard = threading.Lock()

    def slow_build(*, suite, log):  # stands in for debootstrap: minutes, and it checks for the image first
        with guard:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
        try:
            if not built:
                time.sleep(0.5)
                built.append(suite)
            return f"codeagent/base:{suite}"
        finally:
            with guard:
                state["running"] -= 1

    monkeypatch.setattr(environment, "build_base_image", slow_build)
    tags = []
    workers = [threading.Thread(target=lambda: tags.append(environment.base_image("bookworm"))) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert tags == ["codeagent/base:bookworm"] * 4
    assert built == ["bookworm"] and state["most"] == 1


@pytest.mark.usefixtures("no_leaks")
def test_a_long_test_run_reports_its_elapsed_time_and_last_line(make_repo, base_image, monkeypatch):
    from codeagent.sandbox import open_sandbox

    monkeypatch.setattr(task_env, "PROGRESS_EVERY", 0.5)
    heard = []
    with open_sandbox(make_repo({"a.txt": "a\n"})) as box:
        box.run(f"mkdir -p {task_env.PATCH_DIR}")
        run = task_env.run_tests(box, "echo collecting; echo 'test_slow \x1b[31mhanging'; sleep 3", 30,
                                 progress=heard.append)
    assert run.complete and run.exit_code == 0
    assert heard and all(line.startswith("tests running ") for line in heard)
    assert any(line.endswith("test_slow ?[31mhanging") for line in heard)  # control characters never reach a terminal


PYTEST_LOG = """\
=================================== FAILURES ===================================
___________________________ RequestsTestCase.test_get ___________________________
E   requests.exceptions.ConnectionError: HTTPConnectionPool(host='httpbin.org', port=80): Max retries exceeded
E   socket.gaierror: [Errno -3] Temporary failure in name resolution
________________________________ test_unrelated ________________________________
E   assert 1 == 2
=========================== short test summary info ============================
FAILED test_requests.py::RequestsTestCase::test_get - requests.exceptions.ConnectionError
FAILED test_requests.py::test_unrelated - assert 1 == 2
PASSED test_requests.py::test_local
"""


def test_network_failures_name_only_the_tests_that_tried_the_network():
    found = network_failures("pytest", PYTEST_LOG)
    assert found["tried_network"] and found["tests"] == ["test_requests.py::RequestsTestCase::test_get"]
    assert network_failures("pytest", PYTEST_LOG.replace("Temporary failure in name resolution", "x")
                            .replace("ConnectionError", "ValueError"))["tried_network"] is False


def test_the_environment_takes_and_gives_plain_data(tmp_path):
    from codeagent.harness.grading.verdict import grade

    report = task_env.report_dict(grade({"t::a": "PASSED"}, ["t::a"], [], exit_code=0, log_complete=True,
                                        timed_out=False))
    run = task_env.TestRun("PASSED t::a\n", 0, True, False, 1.0)
    assert pickle.loads(pickle.dumps((report, run))) == (report, run)
    assert report["outcome"] == "resolved" and str(tmp_path) not in repr(report)
