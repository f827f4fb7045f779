"""Service sidecars (a local httpbin under the name httpbin.org), network failures named in the
report, and the progress of a long test run: real Docker."""

from __future__ import annotations

import pytest

from codeagent.evals.batch import grade_task
from codeagent.task import Task
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")

SOURCE = "import json\nimport urllib.request\n\n\ndef fetch(url):\n    return json.load(urllib.request.urlopen(url, timeout=10))\n"
TESTS = ("from client import fetch\n\n\ndef test_local():\n    assert fetch.__name__ == 'fetch'\n\n\n"
         "def test_get():\n    assert fetch('http://httpbin.org/get?x=1')['args'] == {'x': '1'}\n\n\n"
         "def test_get_tls():\n    assert fetch('https://httpbin.org/get?x=2')['args'] == {'x': '2'}\n\n\n"
         "def test_get_vendored_bundle():\n    import json, ssl, urllib.request\n"
         "    context = ssl.create_default_context(cafile='certs/bundle.pem')\n"
         "    answer = urllib.request.urlopen('https://httpbin.org/get?x=3', context=context, timeout=10)\n"
         "    assert json.load(answer)['args'] == {'x': '3'}\n")
TEST_PATCH = f"""diff --git a/tests/test_client.py b/tests/test_client.py
new file mode 100644
--- /dev/null
+++ b/tests/test_client.py
@@ -0,0 +1,{len(TESTS.splitlines())} @@
""" + "".join("+" + line + "\n" for line in TESTS.splitlines())
HTTPBIN = {"name": "httpbin", "hosts": ["httpbin.org"], "pip_packages": ["httpbin==0.10.4", "gunicorn==23.0.0"],
           "command": ["/opt/service/bin/gunicorn", "--bind", "0.0.0.0:80", "httpbin:app"], "port": 80,
           "tls_command": ["/opt/service/bin/gunicorn", "--bind", "0.0.0.0:443", "--certfile",
                           "/opt/service/tls/server.pem", "--keyfile", "/opt/service/tls/server.key", "httpbin:app"],
           "tls_port": 443, "ca_files": ["certs/bundle.pem"]}
CONFIG = {"python": "3.11", "system_packages": [], "pip_packages": ["pytest"], "install": [],
          "test_cmd": "python -m pytest -rA", "log_parser": "pytest", "directives": "paths", "test_timeout": 60}


def make_task(root, services):
    repo = root / "client"
    repo.mkdir()
    (repo / "client.py").write_text(SOURCE)
    (repo / "tests").mkdir()
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "certs").mkdir()
    (repo / "certs" / "bundle.pem").write_text("")  # a vendored CA bundle: the harness adds its test CA
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "client")
    return Task(repo=str(repo), base_commit=git(repo, "rev-parse", "HEAD").strip(), instance_id="synthetic__client-1",
                problem_statement="-", test_patch=TEST_PATCH, gold_patch="",
                FAIL_TO_PASS=["tests/test_client.py::test_get", "tests/test_client.py::test_get_tls",
                              "tests/test_client.py::test_get_vendored_bundle"], PASS_TO_PASS=["tests/test_client.py::test_local"],
                extra={"install_config": {**CONFIG, **({"services": services} if services else {})}})


def test_a_declared_service_answers_under_the_host_name_the_tests_use(tmp_path, base_image):
    report = grade_task(make_task(tmp_path, [HTTPBIN]), "", tmp_path / "out")
    assert report["outcome"] == "resolved", report.get("reason")
    assert report["network"]["services"] == ["httpbin"] and report["network"]["tests"] == []


def test_without_the_service_the_report_names_the_tests_that_tried_the_network(tmp_path, base_image):
    report = grade_task(make_task(tmp_path, None), "", tmp_path / "out")
    assert report["outcome"] == "unresolved"
    assert report["network"]["available"] is False and report["network"]["tried_network"]
    assert report["network"]["tests"] == ["tests/test_client.py::test_get", "tests/test_client.py::test_get_tls"]
    assert any("name resolution" in line or "not known" in line for line in report["network"]["evidence"])


def test_a_rollout_sandbox_has_the_services_and_grades_in_place(tmp_path, base_image):
    from codeagent.config import Config
    from codeagent.harness.env_grade import grade_in_sandbox
    from codeagent.harness.env_sandbox import open_agent_sandbox
    from codeagent.sandbox import Limits

    task = make_task(tmp_path, [HTTPBIN])
    with open_agent_sandbox(task, limits=Limits.from_settings(Config().sandbox)) as box:
        assert box.run("python -c \"from client import fetch; print(fetch('http://httpbin.org/get')['url'])\"",
                       timeout=60).output.strip() == "http://httpbin.org/get"
        grade = grade_in_sandbox(box, task, "", harness=True)
    assert grade["outcome"] == "resolved", grade.get("reason")
