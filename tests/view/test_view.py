"""`codeagent view`: the token and Host checks, the JSON API over a replayed run, escaping of what runs
hold, filters, candidates, eval reports and training curves (Starlette's TestClient, and the real command
on uvicorn)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.view_runs import SCRIPT, replay_solve, write_hostile

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from codeagent.trajectory import TrajectoryStore  # noqa: E402
from codeagent.view.app import create_app  # noqa: E402

TOKEN = "test-token"
BASE = "http://127.0.0.1:8123"


def client(store: Path, **kwargs) -> TestClient:
    return TestClient(create_app(store, TOKEN, **kwargs), base_url=BASE)


def api_runs(test_client: TestClient, **params) -> list[str]:
    response = test_client.get("/api/runs", params={"token": TOKEN, **params})
    assert response.status_code == 200, response.text
    return [run["id"] for run in response.json()["runs"]]


def test_no_token_a_wrong_token_or_a_foreign_host_is_refused(tmp_path):
    trajectory_id = write_hostile(TrajectoryStore(tmp_path))
    viewer = client(tmp_path)
    for path in ("/", f"/runs/{trajectory_id}", "/api/runs", f"/api/runs/{trajectory_id}"):
        assert viewer.get(path).status_code == 403
        assert viewer.get(path, params={"token": "wrong"}).status_code == 403
        assert viewer.get(path, params={"token": TOKEN}).status_code == 200
        for host in ("evil.example:8123", "127.0.0.1.evil.example:8123", "127.0.0.1:9999", "127.0.0.1"):
            refused = viewer.get(path, params={"token": TOKEN}, headers={"Host": host})
            assert refused.status_code == 403 and "does not name this server" in refused.text
    assert viewer.get("/", params={"token": TOKEN}, headers={"Host": "localhost:8123"}).status_code == 200
    refused = viewer.get("/api/runs")
    assert refused.headers["x-content-type-options"] == "nosniff" and trajectory_id not in refused.text


def test_the_run_page_escapes_markup_and_allows_no_script(tmp_path):
    store = TrajectoryStore(tmp_path)
    trajectory_id = write_hostile(store)
    response = client(tmp_path).get(f"/runs/{trajectory_id}", params={"token": TOKEN})
    assert response.status_code == 200
    page = response.text
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the reply, the output, the patch: shown as text
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "\\xdcff" in page or "\ufffd" in page  # the patch's undecodable byte is shown, not a crash
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy  # no script of any kind runs
    nonce = re.search(r"style-src 'nonce-([^']+)'", policy).group(1)
    assert f'<style nonce="{nonce}">' in page
    assert response.headers["x-content-type-options"] == "nosniff"
    # the token ids and logprobs are there, collapsed; per-step tokens and cost
    assert re.search(r'<details class="tokens">\s*<summary>3 completion token ids', page)
    assert "<td>303</td><td>-2</td>" in page and "10 prompt + 3 completion tokens" in page and "cost $0.0020" in page
    record = client(tmp_path).get(f"/api/runs/{trajectory_id}", params={"token": TOKEN})
    assert record.json()["patch"].endswith(f"{SCRIPT}\udcff\n")  # ASCII JSON: the byte survives as \udcff
    assert record.headers["content-type"] == "application/json"


def test_the_real_command_lists_a_replayed_run_and_refuses_strangers(tmp_path):
    trajectory_id = replay_solve(tmp_path / "store")
    proc = subprocess.Popen([sys.executable, "-m", "codeagent.cli", "view", "--store", str(tmp_path / "store")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})", url)
        assert match, (url, proc.stderr.read() if proc.poll() is not None else "")
        port, token = int(match.group(1)), match.group(2)

        def get(path: str, host: str | None = None) -> tuple[int, dict, bytes]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", path, headers={"Host": host} if host else {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()

        status, headers, body = get(f"/api/runs?token={token}")
        assert status == 200 and [run["id"] for run in json.loads(body)["runs"]] == [trajectory_id]
        status, _, body = get(f"/api/runs/{trajectory_id}?token={token}")
        run = json.loads(body)
        assert status == 200 and run["exit_status"] == "submitted"
        assert run["patch"].startswith("diff --git a/shop/cart.py b/shop/cart.py")
        status, headers, body = get(f"/runs/{trajectory_id}?token={token}")
        assert status == 200 and "del self._lines[sku]" in body.decode()
        assert headers["x-content-type-options"] == "nosniff" and "default-src 'none'" in headers["content-security-policy"]
        assert get("/api/runs")[0] == 403
        assert get(f"/api/runs?token={token}", host=f"attacker.example:{port}")[0] == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_filters_by_task_model_status_reward_and_date(tmp_path):
    store = TrajectoryStore(tmp_path)
    old = write_hostile(store, task={"instance_id": "django__django-1"}, model="gpt-x",
                        created=datetime(2025, 1, 2, tzinfo=timezone.utc))
    new = write_hostile(store, task={"instance_id": "sympy__sympy-2"}, model="qwen-coder",
                        created=datetime(2026, 3, 4, tzinfo=timezone.utc))
    store.add_rewards(old, {"total": 0.25})
    store.add_rewards(new, {"total": 1.0})
    with store.open(new) as writer:
        writer.update(exit_status="step_limit")
    viewer = client(tmp_path)
    assert api_runs(viewer) == [new, old]  # newest first
    assert api_runs(viewer, task="django") == [old] and api_runs(viewer, task="sympy__*") == [new]
    assert api_runs(viewer, model="qwen") == [new] and api_runs(viewer, status="submitted") == [old]
    assert api_runs(viewer, min_reward="0.5") == [new] and api_runs(viewer, max_reward="0.5") == [old]
    assert api_runs(viewer, since="2026-01-01") == [new] and api_runs(viewer, until="2025-12-31") == [old]
    page = viewer.get("/", params={"token": TOKEN, "task": "sympy"}).text
    assert new in page and old not in page
    bad = viewer.get("/api/runs", params={"token": TOKEN, "since": "yesterday"})
    assert bad.status_code == 400 and "since: not a date" in bad.json()["error"]
    assert viewer.get("/api/runs/nonexistent", params={"token": TOKEN}).status_code == 404


def test_candidates_side_by_side_with_their_scores(tmp_path):
    store = TrajectoryStore(tmp_path)
    ids = [write_hostile(store, group_id="group-abc", candidate_index=index) for index in (1, 0)]
    store.add_verification(ids[0], {"scores": {"regression": 0.5, "judge": 0.75}})
    store.add_verification(ids[1], {"scores": {"regression": 1.0}, "verifier_details": {"discarded": "no patch"}})
    viewer = client(tmp_path)
    page = viewer.get("/groups/group-abc", params={"token": TOKEN}).text
    cards = page.split('<div class="card candidate">')[1:]
    assert len(cards) == 2 and ids[1] in cards[0] and ids[0] in cards[1]  # by candidate index
    assert "<td>regression</td><td>1</td>" in cards[0] and "discarded" in cards[0]
    assert "<td>judge</td><td>0.75</td>" in cards[1] and "<td>regression</td><td>0.5</td>" in cards[1]
    assert '<div class="add">+&lt;script&gt;' in cards[0] and "<script" not in page
    assert viewer.get("/groups/none", params={"token": TOKEN}).status_code == 404


def test_eval_report_by_repository_with_failures_and_cost(tmp_path):
    out = tmp_path / "eval"
    reports = {
        "django__django-1": {"instance_id": "django__django-1", "resolved": True, "outcome": "resolved", "cost": 0.5},
        "django__django-2": {"instance_id": "django__django-2", "resolved": False, "outcome": "unresolved",
                             "cost": 0.25, "trajectory_id": "20260101-000000-abcdef12"},
        "sympy__sympy-3": None,  # only an error.json: the run broke
    }
    for instance, report in reports.items():
        folder = out / "instances" / instance
        folder.mkdir(parents=True)
        if report:
            (folder / "report.json").write_text(json.dumps(report))
        else:
            (folder / "error.json").write_text(json.dumps(
                {"instance_id": instance, "resolved": False, "outcome": "error", "reason": f"docker died {SCRIPT}"}))
    viewer = client(tmp_path / "store", evals=[out])
    report = viewer.get("/api/evals/0", params={"token": TOKEN}).json()
    assert (report["instances"], report["resolved"], report["errors"], report["cost"]) == (3, 1, 1, 0.75)
    assert report["per_repo"] == {"django/django": {"total": 2, "resolved": 1, "errors": 0},
                                  "sympy/sympy": {"total": 1, "resolved": 0, "errors": 1}}
    failures = {row["instance_id"]: row for row in report["failures"]}
    assert set(failures) == {"django__django-2", "sympy__sympy-3"}
    assert failures["sympy__sympy-3"]["reason"] == f"docker died {SCRIPT}"
    page = viewer.get("/evals/0", params={"token": TOKEN}).text
    assert "1/3 resolved (33.33%)" in page and "docker died &lt;script&gt;" in page and "<script" not in page
    assert "/runs/20260101-000000-abcdef12?token=" in page
    assert viewer.get("/evals/1", params={"token": TOKEN}).status_code == 404


def test_training_curves_as_inline_svg(tmp_path):
    out = tmp_path / "train"
    out.mkdir()
    lines = [json.dumps({"step": step, "reward": step / 10, "kl": 0.01 * step, "loss": 1.0 / step,
                         "sampling/sampling_logp_difference/mean": 0.001 * step}) for step in range(1, 6)]
    lines += ['{"event": "rollouts", "rewards": [1, 0]}', "not json", json.dumps({"step": 6, "reward": "nan"})]
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    viewer = client(tmp_path / "store", training=[out])
    curves = viewer.get("/api/training/0", params={"token": TOKEN}).json()
    assert curves["skipped_lines"] == 1 and set(curves["curves"]) == {"reward", "kl", "mismatch", "loss"}
    reward = curves["curves"]["reward"]
    assert (reward["count"], reward["x_min"], reward["x_max"], reward["y_max"]) == (5, 1, 5, 0.5)
    first, *_, last = reward["points"].split()
    assert float(first.split(",")[1]) > float(last.split(",")[1])  # rising reward: the line goes up the SVG
    page = viewer.get("/training/0", params={"token": TOKEN}).text
    for name in ("reward", "kl", "mismatch"):
        assert f'<svg class="curve" id="curve-{name}"' in page
    assert page.count("<polyline points=") == 4


def test_help_lists_view_without_importing_the_web_stack():
    code = ("import sys, runpy; sys.argv = ['codeagent', 'view', '--help']\n"
            "try: runpy.run_module('codeagent.cli', run_name='__main__')\n"
            "except SystemExit: pass\n"
            "import json; print(json.dumps(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "--evals" in proc.stdout and "--training" in proc.stdout
    assert not {name for name in loaded if name.split(".")[0] in ("starlette", "uvicorn")}
    assert "codeagent.view.app" not in loaded


def test_a_solve_session_is_listed_by_its_issue_with_steps_from_one_commands_and_dollars(tmp_path):
    """A `solve` run (no grading info: its instance id is the folder's name and a hash) is listed by its
    issue's first line; the timeline counts steps from 1 (as the TUI and the headless output do); a tool's row
    shows its command; a cost shows its currency."""
    store = TrajectoryStore(tmp_path)
    header = {"task": {"instance_id": "myapp-1a2b3c4d", "repo": "/home/me/myapp",
                       "problem_statement": "Totals are off by one\nfor carts with one line."},
              "model": "openai/gpt-4o", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
    with store.create(**header) as writer:
        call = {"id": "c1", "type": "function", "function": {"name": "bash",
                                                             "arguments": json.dumps({"command": "pytest -q tests"})}}
        writer.append_step({"index": 0, "prompt_tokens": 5, "completion_tokens": 2, "cost": 0.0123,
                            "tool_calls": [{"id": "c1", "name": "bash", "exit_code": 1, "seconds": 0.5}]},
                           [{"role": "assistant", "content": "Running the tests.", "tool_calls": [call]},
                            {"role": "tool", "tool_call_id": "c1", "content": "1 failed"}])
        writer.update(exit_status="answered")
        run_id = writer.id
    viewer = client(tmp_path)
    listed = viewer.get("/", params={"token": TOKEN}).text
    assert "Totals are off by one" in listed and "myapp-1a2b3c4d" not in listed and "$0.0123" in listed
    assert api_runs(viewer, task="myapp-1a2b") == [run_id] == api_runs(viewer, task="off by one")  # either finds it
    page = viewer.get(f"/runs/{run_id}", params={"token": TOKEN}).text
    assert "<b>step 1</b>" in page and "<b>step 0</b>" not in page
    assert re.search(r"tool <b>bash</b> <code>\$ pytest -q tests</code> · exit 1", page), page
    assert "cost $0.0123" in page
