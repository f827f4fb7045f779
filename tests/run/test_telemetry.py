"""OpenTelemetry through the real CLI: `solve` with CODEAGENT_ENABLE_TELEMETRY=1 sends its spans and metrics to an
OTLP/HTTP receiver on 127.0.0.1 that decodes them; without it nothing is sent and no OpenTelemetry is imported;
a collector that is down or hangs never fails the run nor holds it past a bounded flush."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codeagent.run.examples import example_replay, example_task
from codeagent.trajectory.store import TrajectoryStore

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SECRET = "sk-telemetry-never-sent-0123456789"


class Receiver:
    """An OTLP/HTTP collector: POST /v1/traces and /v1/metrics, protobuf bodies decoded and kept."""

    def __init__(self, hang: bool = False):
        self.requests: list[tuple[str, dict, bytes]] = []
        self.hang = threading.Event() if hang else None
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if receiver.hang is not None:
                    receiver.hang.wait(120)  # a collector that takes the data and never answers
                    return
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list:
        found = []
        for path, _, body in self.requests:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                found += [(resource.resource, span) for resource in request.resource_spans
                          for scope in resource.scope_spans for span in scope.spans]
        return found

    def metrics(self) -> dict[str, list]:
        """Each metric's data points (sums and histograms) over every export, by name."""
        found: dict[str, list] = {}
        for path, _, body in self.requests:
            if path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                for resource in request.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            data = metric.sum if metric.HasField("sum") else metric.histogram
                            found.setdefault(metric.name, []).extend(data.data_points)
        return found

    def close(self):
        if self.hang is not None:
            self.hang.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    served = Receiver()
    yield served
    served.close()


def attrs(item) -> dict:
    values = {}
    for kv in item.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        values[kv.key] = list(v.string_value for v in value.array_value.values) if kind == "array_value" \
            else getattr(value, kind)
    return values


@pytest.fixture
def env(tmp_path):
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "CODEAGENT_ENABLE_TELEMETRY", "CODEAGENT_TELEMETRY"))}
    return {**base, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
            "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml"), "OPENAI_API_KEY": SECRET,
            "OTEL_METRIC_EXPORT_INTERVAL": "600000"}  # the metrics come with the flush at the end


def solve(env: dict, *extra: str) -> subprocess.CompletedProcess:
    args = ["solve", "--example", "cart", "--json", "--sandbox", "local",
            "--model", f"replay:{example_replay('cart')}", *extra]
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_a_run_sends_its_span_tree_and_metrics_to_an_otlp_receiver(receiver, env, tmp_path):
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
               OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
               OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer collector-token",
               OTEL_SERVICE_NAME="agents-of-team-a", OTEL_RESOURCE_ATTRIBUTES="team=a,deployment.environment=ci")
    proc = solve(env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    finished = events[-1]
    trajectory = TrajectoryStore(tmp_path / "trajs").load(finished["trajectory_id"])
    assert trajectory.steps and finished["exit_status"] == "submitted"

    assert {path for path, _, _ in receiver.requests} == {"/v1/traces", "/v1/metrics"}
    assert all(headers.get("authorization") == "Bearer collector-token" for _, headers, _ in receiver.requests)
    assert all(headers.get("content-type") == "application/x-protobuf" for _, headers, _ in receiver.requests)
    spans = receiver.spans()
    resource = attrs(spans[0][0])
    assert resource["service.name"] == "agents-of-team-a"
    assert resource["team"] == "a" and resource["deployment.environment"] == "ci"

    by_id = {span.span_id: span for _, span in spans}
    runs = [span for _, span in spans if attrs(span).get("gen_ai.operation.name") == "invoke_agent"]
    assert len(runs) == 1 and not runs[0].parent_span_id
    run = runs[0]
    assert attrs(run)["gen_ai.conversation.id"] == trajectory.id
    assert attrs(run)["codeagent.exit_status"] == "submitted"
    assert attrs(run)["codeagent.steps"] == len(trajectory.steps)
    assert attrs(run)["gen_ai.usage.input_tokens"] == sum(step.prompt_tokens for step in trajectory.steps) > 0
    assert attrs(run)["gen_ai.usage.output_tokens"] == sum(step.completion_tokens for step in trajectory.steps) > 0
    steps = sorted((span for _, span in spans if span.parent_span_id == run.span_id), key=lambda s: s.start_time_unix_nano)
    assert [attrs(step)["codeagent.step"] for step in steps] == [step.index for step in trajectory.steps]
    assert all({span.trace_id for _, span in spans} == {run.trace_id} for _ in [0])

    for step, recorded in zip(steps, trajectory.steps):
        children = [span for span in by_id.values() if span.parent_span_id == step.span_id]
        chats = [span for span in children if attrs(span)["gen_ai.operation.name"] == "chat"]
        tools = [span for span in children if attrs(span)["gen_ai.operation.name"] == "execute_tool"]
        assert len(chats) == 1 and len(children) == 1 + len(tools)
        chat = attrs(chats[0])
        assert chat["gen_ai.request.model"] == trajectory.model
        assert chat["gen_ai.provider.name"] == chat["gen_ai.system"] == "codeagent.replay"
        assert chat["gen_ai.usage.input_tokens"] == recorded.prompt_tokens
        assert chat["gen_ai.usage.output_tokens"] == recorded.completion_tokens
        assert chats[0].name == f"chat {trajectory.model}"
        assert step.start_time_unix_nano <= chats[0].start_time_unix_nano < chats[0].end_time_unix_nano
        assert [(attrs(span)["gen_ai.tool.name"], attrs(span)["gen_ai.tool.call.id"]) for span in tools] == \
            [(call.name, call.id) for call in recorded.tool_calls]
        for span, call in zip(tools, recorded.tool_calls):
            tool = attrs(span)
            assert tool.get("codeagent.tool.exit_code") == call.exit_code
            assert tool["codeagent.tool.duration_s"] == pytest.approx(call.seconds, abs=1e-3)
            assert tool["codeagent.tool.outcome"] in {"success", "error"}
            assert chats[0].end_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
    assert sum(len(step.tool_calls) for step in trajectory.steps) > 0

    metrics = receiver.metrics()
    tokens = {attrs(point)["gen_ai.token.type"]: point.as_int for point in metrics["codeagent.token.usage"]}
    assert tokens == {"input": sum(step.prompt_tokens for step in trajectory.steps),
                      "output": sum(step.completion_tokens for step in trajectory.steps)}
    calls: dict[str, int] = {}
    for step in trajectory.steps:
        for call in step.tool_calls:
            calls[call.name] = calls.get(call.name, 0) + 1
    counted: dict[str, int] = {}
    for point in metrics["codeagent.tool.calls"]:
        counted[attrs(point)["gen_ai.tool.name"]] = counted.get(attrs(point)["gen_ai.tool.name"], 0) + point.as_int
    assert counted == calls
    assert [attrs(point)["codeagent.exit_status"] for point in metrics["codeagent.runs"]] == ["submitted"]
    assert sum(point.count for point in metrics["gen_ai.client.operation.duration"]) == len(trajectory.steps)

    # no prompt, reply, command or output text, and never the key
    sent = b"".join(body for _, _, body in receiver.requests)
    problem = example_task("cart")["problem_statement"]
    replies = [message["content"] for message in trajectory.messages if message["role"] == "assistant"
               and isinstance(message.get("content"), str) and len(message["content"]) > 20]
    outputs = [event["output"] for event in events if event["kind"] == "observation" and len(event["output"]) > 20]
    assert replies and outputs
    for text in [problem[:60], *(reply[:40] for reply in replies), *(output[:40] for output in outputs)]:
        assert text.encode() not in sent, text
    assert SECRET.encode() not in sent and b"collector-token" not in sent


def test_prompts_are_sent_only_when_asked_and_capped(receiver, env):
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", CODEAGENT_TELEMETRY_LOG_PROMPTS="1",
               OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    proc = solve(env)
    assert proc.returncode == 0, proc.stderr
    outputs = [json.loads(line)["output"] for line in proc.stdout.splitlines() if '"observation"' in line]
    results = [attrs(span)["gen_ai.tool.call.result"] for _, span in receiver.spans()
               if "gen_ai.tool.call.result" in attrs(span)]
    assert results == [output[:4096] for output in outputs]
    assert SECRET.encode() not in b"".join(body for _, _, body in receiver.requests)


def test_without_the_variable_nothing_is_sent_nor_imported(receiver, env):
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['codeagent', 'solve', '--example', 'cart', '--json', '--sandbox', 'local', "
            f"'--model', {('replay:' + str(example_replay('cart')))!r}]\n"
            "try:\n    runpy.run_module('codeagent.cli', run_name='__main__')\n"
            "except SystemExit as stop:\n    code = stop.code\n"
            "print(json.dumps({'code': code, 'otel': sorted(m for m in sys.modules if m.startswith('opentelemetry'))}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"code": 0, "otel": []}, proc.stderr
    assert receiver.requests == []


def test_the_console_exporters_print_on_stderr_and_nothing_is_sent(receiver, env):
    """OTEL_TRACES_EXPORTER=console and OTEL_METRICS_EXPORTER=console, as the SDK's variables say: the spans and
    metrics are printed on stderr (stdout keeps the run's events only), nothing goes to a collector."""
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
               OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="console")
    proc = solve(env)
    assert proc.returncode == 0, proc.stderr
    assert all(json.loads(line)["kind"] for line in proc.stdout.splitlines())  # only the run's own events
    assert '"name": "invoke_agent codeagent"' in proc.stderr and '"gen_ai.operation.name": "chat"' in proc.stderr
    assert '"name": "codeagent.token.usage"' in proc.stderr
    assert receiver.requests == []

    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="zipkin")
    proc = solve(env)
    assert proc.returncode == 0 and receiver.requests == [] and "invoke_agent" not in proc.stderr
    assert "OTEL_METRICS_EXPORTER: zipkin not supported" in proc.stderr


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize("collector", ["closed port", "hangs"])
def test_a_collector_down_or_hanging_neither_fails_nor_holds_the_run(env, collector):
    """The exporter alone would wait (OTEL_EXPORTER_OTLP_TIMEOUT=600; the SDK's own shutdown gives up after
    30 s): the run ends as it would, and its process within the 2 s flush of its last event (20 s allowed)."""
    hanging = Receiver(hang=True) if collector == "hangs" else None
    try:
        env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=hanging.url if hanging else closed_port(),
                   OTEL_EXPORTER_OTLP_TIMEOUT="600", OTEL_BSP_SCHEDULE_DELAY="100")  # spans go out during the run
        args = ["solve", "--example", "cart", "--json", "--sandbox", "local", "--model", f"replay:{example_replay('cart')}"]
        proc = subprocess.Popen([sys.executable, "-m", "codeagent.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if '"kind": "finished"' in line:
                finished_at = time.monotonic()
        code = proc.wait(timeout=300)
        after_finish = time.monotonic() - finished_at
        stderr = proc.stderr.read()
        assert code == 0, stderr
        assert json.loads(lines[-1])["exit_status"] == "submitted"
        assert after_finish < 20, after_finish  # not the SDK's 30 s nor the exporter's 600 s
        assert stderr.count("telemetry:") <= 1 and "Traceback" not in stderr, stderr
        if hanging:
            assert hanging.requests  # it was reached, and held the export
    finally:
        if hanging:
            hanging.close()


def test_approvals_by_decision_and_source(receiver, env, tmp_path):
    """The user's PreToolUse hooks refuse every bash call and allow every edit: the tool spans and the
    approvals metric say so."""
    allow = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}})
    config = tmp_path / "user.yaml"
    config.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "^bash$", "hooks": [{"command": "echo 'no shell today' >&2; exit 2"}]},
        {"matcher": "^editor$", "hooks": [{"command": f"echo '{allow}'"}]}]}}))
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, CODEAGENT_CONFIG=str(config))
    proc = solve(env)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    observed = [event for event in events if event["kind"] == "observation"]
    assert "no shell today" in next(event["output"] for event in observed if event["tool"] == "bash")
    expected: dict[tuple, int] = {}
    for event in observed:
        if event["tool"] in ("bash", "editor"):
            key = ("reject" if event["tool"] == "bash" else "accept", "hook", event["tool"])
            expected[key] = expected.get(key, 0) + 1
    assert set(expected) == {("reject", "hook", "bash"), ("accept", "hook", "editor")}
    counted = {(attrs(point)["decision"], attrs(point)["source"], attrs(point)["gen_ai.tool.name"]): point.as_int
               for point in receiver.metrics()["codeagent.approvals"]}
    assert counted == expected
    tools = [attrs(span) for _, span in receiver.spans() if attrs(span).get("gen_ai.operation.name") == "execute_tool"]
    for tool in tools:
        if tool["gen_ai.tool.name"] == "bash":
            assert tool["codeagent.approval.decision"] == "reject" and tool["codeagent.tool.outcome"] == "error"
            assert "codeagent.tool.exit_code" not in tool
        elif tool["gen_ai.tool.name"] == "editor":
            assert tool["codeagent.approval.decision"] == "accept" and tool["codeagent.approval.source"] == "hook"
        else:
            assert "codeagent.approval.decision" not in tool
    outcomes = {(attrs(point)["gen_ai.tool.name"], attrs(point)["outcome"]) for point in receiver.metrics()["codeagent.tool.calls"]}
    assert ("bash", "error") in outcomes


def solve_served(receiver, server, make_repo, env, model="openai/test-model") -> subprocess.CompletedProcess:
    """`solve` with the scripted OpenAI-compatible server's model (tests/conftest.py `server`)."""
    env.pop("OPENAI_API_KEY")
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(make_repo({"app.py": "\n"})),
                           "--issue", "Print one.", "--model", model, "--api-base", server.base,
                           "--set", "agent.localize=false", "--sandbox", "local", "--json"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_served_model_names_its_provider_the_answering_model_and_its_retries(receiver, server, make_repo, env):
    """Through LiteLLM to the scripted OpenAI-compatible server: the server's own model name is the
    response model, and a 503 that was retried is an event of the model call's span."""
    from tests.support.fake_server import completion, tool_call

    edit = json.dumps({"command": "echo 'print(1)' > app.py"})
    server.replies += [  # whole replies: LiteLLM's streams name the model asked for, not the server's
        (503, {"error": {"message": "overloaded"}}),
        (200, completion({"content": "Editing.", "tool_calls": [tool_call(edit)]}, "tool_calls", model="test-model-0613")),
        (200, completion({"content": "Done.", "tool_calls": [tool_call("{}", "submit", "call_b")]}, "tool_calls",
                         model="test-model-0613"))]
    proc = solve_served(receiver, server, make_repo, env, model="openai/gpt-4o")  # a model LiteLLM has a price for
    assert proc.returncode == 0, proc.stderr
    finished = json.loads(proc.stdout.splitlines()[-1])
    trajectory = TrajectoryStore(env["CODEAGENT_TRAJECTORY_DIR"]).load(finished["trajectory_id"])
    chats = sorted((span for _, span in receiver.spans() if attrs(span).get("gen_ai.operation.name") == "chat"),
                   key=lambda span: span.start_time_unix_nano)
    assert [attrs(span)["gen_ai.response.model"] for span in chats] == ["test-model-0613"] * 2
    first = attrs(chats[0])
    assert first["gen_ai.request.model"] == "gpt-4o" and first["gen_ai.provider.name"] == "openai"  # not LiteLLM's id
    assert chats[0].name == "chat gpt-4o"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (120, 30)
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert [event.name for event in chats[0].events] == ["model_retry"] and not chats[1].events
    assert "overloaded" in attrs(chats[0].events[0])["reason"]
    assert chats[0].start_time_unix_nano < chats[0].events[0].time_unix_nano < chats[0].end_time_unix_nano
    costs = [step.cost for step in trajectory.steps]
    assert all(cost and cost > 0 for cost in costs)
    assert [attrs(span)["codeagent.cost_usd"] for span in chats] == pytest.approx(costs)
    assert sum(point.as_double for point in receiver.metrics()["codeagent.cost.usage"]) == pytest.approx(sum(costs))
    runs = [span for _, span in receiver.spans() if span.name == "invoke_agent codeagent"]
    assert attrs(runs[0])["codeagent.cost_usd"] == pytest.approx(trajectory.totals.cost)


def test_a_model_call_that_fails_is_a_span_in_error(receiver, server, make_repo, env):
    server.replies += [(400, {"error": {"message": "this request is malformed"}})]
    proc = solve_served(receiver, server, make_repo, env)
    assert proc.returncode == 5, proc.stderr
    spans = {span.name: span for _, span in receiver.spans()}
    assert set(spans) == {"invoke_agent codeagent", "step", "chat test-model"}  # the name the server is asked for
    chat, run = spans["chat test-model"], spans["invoke_agent codeagent"]
    assert chat.parent_span_id == spans["step"].span_id
    assert attrs(chat)["error.type"] == attrs(run)["error.type"] == "model_error"
    assert chat.status.code == run.status.code == 2  # STATUS_CODE_ERROR
    assert "malformed" in chat.status.message
    assert "gen_ai.usage.input_tokens" not in attrs(chat)


def test_the_tuis_approvals_are_the_users(receiver, make_repo, tmp_path, monkeypatch):
    """A TUI session (its logic, without Textual) subscribes the same consumer: the user's yes and no are
    approvals of source `user`, a call the approval mode lets through is `config`."""
    from codeagent.config import Config
    from codeagent.models import ScriptedModel
    from codeagent.run import telemetry
    from codeagent.run.session import Session
    from codeagent.run.session.approval import Decision
    from tests.support.scripted import call
    from tests.support.session import Recorder

    monkeypatch.setattr(telemetry, "_started", [])
    monkeypatch.setattr(telemetry.atexit, "register", lambda function: None)
    for key in [key for key in os.environ if key.startswith("OTEL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("CODEAGENT_ENABLE_TELEMETRY", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    turns = [call("navigate", command="ls", path="."), call("bash", command="echo hi > new.txt"),
             call("bash", command="rm calc.py"), call("submit")]
    recorder = Recorder([Decision("once"), Decision("deny", "keep it")])
    config = Config(agent={"localize": False}, sandbox={"kind": "local"}, trajectories_dir=str(tmp_path / "trajs"))
    session = Session(config, ScriptedModel(turns), repo=str(make_repo({"calc.py": "x = 1\n"})),
                      store=TrajectoryStore(tmp_path / "trajs"), ask=recorder.ask, emit=recorder.emit)
    try:
        assert session.submit("make a file") == "started" and session.wait_idle(60), recorder.notices()
        assert session.last_status == "submitted", recorder.notices()
    finally:
        session.close()
        telemetry._started[0].close()
    counted = {(attrs(point)["gen_ai.tool.name"], attrs(point)["decision"], attrs(point)["source"]): point.as_int
               for point in receiver.metrics()["codeagent.approvals"]}
    assert counted == {("navigate", "accept", "config"): 1, ("bash", "accept", "user"): 1,
                       ("bash", "reject", "user"): 1, ("submit", "accept", "config"): 1}
    runs = [span for _, span in receiver.spans() if span.name == "invoke_agent codeagent"]
    assert len(runs) == 1 and attrs(runs[0])["gen_ai.conversation.id"] == session.trajectory_id


def test_the_provider_is_litellms_and_an_error_never_carries_a_key(monkeypatch):
    from codeagent.models.litellm_model import LiteLLMModel
    from codeagent.run.telemetry import provider_name, scrub

    assert [LiteLLMModel(name).provider for name in ("gpt-4o", "claude-sonnet-4-20250514", "hosted_vllm/qwen")] \
        == ["openai", "anthropic", "hosted_vllm"]
    assert [provider_name(name) for name in ("replay:/x/y.jsonl", "hf:Qwen/Qwen3", "anthropic/claude", "gpt-4o")] \
        == ["codeagent.replay", "codeagent.hf", "anthropic", ""]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-0123456789abcdef")
    assert scrub("AuthenticationError: invalid x-api-key sk-ant-0123456789abcdef") == \
        "AuthenticationError: invalid x-api-key <hidden>"


def test_candidates_are_runs_of_their_own(receiver, env):
    """--candidates 2: two runs side by side (their events from their own threads), each its own whole tree."""
    env.update(CODEAGENT_ENABLE_TELEMETRY="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    proc = solve(env, "--candidates", "2")
    assert proc.returncode == 0, proc.stderr
    started = [json.loads(line)["run_id"] for line in proc.stdout.splitlines() if '"run_started"' in line]
    spans = [span for _, span in receiver.spans()]
    runs = {attrs(span)["gen_ai.conversation.id"]: span for span in spans if span.name == "invoke_agent codeagent"}
    assert sorted(runs) == sorted(started) and len(started) == 2
    for run in runs.values():
        tree = [span for span in spans if span.trace_id == run.trace_id]
        steps = [span for span in tree if span.parent_span_id == run.span_id]
        assert steps and all(span.name == "step" for span in steps)
        assert len(tree) == 1 + len(steps) + sum(1 for span in tree if span.parent_span_id in {s.span_id for s in steps})
        assert attrs(run)["codeagent.steps"] == len(steps)
