"""Never silently without the language (issue 36): a dependencies step that fails keeps the toolchain, and
what failed is said with the path of its full build log and the log's last lines; the session shows it as
a warning. On 0972c8d a failed step dropped the whole toolchain ("running on the base image": no Node at
all) with one cut line of the error, and no log was kept."""

from __future__ import annotations

import json
import subprocess

import pytest

from codeagent.harness.toolchain.resolve import Environment, resolve
from codeagent.sandbox import snapshot

MISSING = "codeagent-no-such-package-4d1f0c"
LOCK = json.dumps({"name": "x", "version": "1.0.0", "lockfileVersion": 3, "requires": True, "packages": {
    "": {"name": "x", "version": "1.0.0", "dependencies": {MISSING: "1.0.0"}},
    f"node_modules/{MISSING}": {"version": "1.0.0",
                                "resolved": f"https://registry.npmjs.org/{MISSING}/-/{MISSING}-1.0.0.tgz",
                                "integrity": "sha512-AAAA"}}})
PACKAGE = json.dumps({"name": "x", "version": "1.0.0", "dependencies": {MISSING: "1.0.0"},
                      "scripts": {"test": "node --test"}})


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_failed_dependencies_step_keeps_the_toolchain_and_says_why_with_its_log(make_repo):
    snap = snapshot(make_repo({"package.json": PACKAGE, "package-lock.json": LOCK, "index.js": ""}))
    environment = resolve(snap)
    assert environment.image and not environment.missing, environment.line
    node = subprocess.run(["docker", "run", "--rm", "--network", "none", environment.image, "node", "--version"],
                          capture_output=True, text=True)
    assert node.returncode == 0 and node.stdout.startswith("v"), node.stderr  # the language is there
    [warning] = environment.warnings
    assert warning.startswith("the node/npm dependencies step failed; full log: ")
    log = warning.split("full log: ", 1)[1].split(";", 1)[0]
    with open(log, encoding="utf-8", errors="replace") as kept:
        assert MISSING in kept.read()  # the whole log, kept
    tail = [line for line in warning.splitlines()[1:] if line.startswith("  | ")]
    assert 1 <= len(tail) <= 30 and any("404" in line or MISSING in line for line in tail), warning
    assert "not installed" in environment.line or "dependencies" not in environment.line


def test_the_warnings_reach_the_user_as_warnings(monkeypatch, make_repo):
    from codeagent.config import Config
    from codeagent.run import repo_env

    found = Environment("codeagent/lang-node:x", "environment: node", warnings=["the node/npm dependencies step failed"])
    monkeypatch.setattr(repo_env, "resolve", lambda *args, **kwargs: found)
    said, warned = [], []
    repo_env.repository_environment(snapshot(make_repo({"package.json": "{}"})), Config(), said.append, warned.append)
    assert said == ["environment: node"] and warned == ["the node/npm dependencies step failed"]
    said.clear()
    repo_env.repository_environment(snapshot(make_repo({"package.json": "{}"})), Config(), said.append)
    assert said == ["environment: node", "warning: the node/npm dependencies step failed"]


def test_the_session_shows_them_at_the_warning_level(monkeypatch, make_repo, tmp_path):
    """The TUI's session: its sandbox's environment warnings are Notices at the warning level."""
    from codeagent.run import repo_env

    from ..support.session import Recorder, make_session

    found = Environment(None, "environment: go", warnings=["the go toolchain step failed; full log: /x.log"])
    monkeypatch.setattr(repo_env, "resolve", lambda *args, **kwargs: found)
    recorder = Recorder()
    session, _ = make_session(make_repo({"go.mod": "module x\n"}), [], tmp_path, recorder)
    try:
        repo_env.repository_environment(snapshot(make_repo({"go.mod": "module x\n"})), session.config,
                                        session.slot.say, session.slot.warn)
    finally:
        session.close()
    assert recorder.notices("warning") == ["warning: the go toolchain step failed; full log: /x.log"]
    assert "environment: go" in recorder.notices("info")
