"""Skills and custom slash commands through the real CLI (`solve --headless` against a scripted
OpenAI-compatible server on 127.0.0.1): a skill's description is in the system prompt and its body
only once the model calls `skill`; the model cannot read a file outside the skill's folder on the host;
a repository's .claude/skills and .claude/commands are loaded only when it is trusted; a custom
command's body is rendered with its arguments and its allowed-tools are the tools offered; /help in
the TUI lists the custom commands."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_server import answer, completion, tool_call

pytestmark = pytest.mark.timeout(300)

BODY = "SECRET-BODY: run scripts/check.sh before you submit."
DESCRIPTION = "Release checklist for this project; use it when asked to cut a release."


@pytest.fixture
def env(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    environment = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
                   "CODEAGENT_CONFIG": str(user / "config.yaml")}
    environment.pop("OPENAI_API_KEY", None)
    return environment


def user_folder(env) -> Path:
    return Path(env["CODEAGENT_CONFIG"]).parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_file(folder: Path, name: str, description: str, body: str) -> None:
    write(folder / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


def solve(server, repo, env, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--sandbox", "local", "--set",
               "agent.localize=false", "--repo", str(repo), "--model", "openai/test-model", "--api-base", server.base,
               *flags]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)


_ids = itertools.count(1)


def use(tool: str, **arguments) -> tuple[int, dict]:
    return 200, completion({"content": "", "tool_calls": [tool_call(json.dumps(arguments), name=tool,
                                                                    call_id=f"call_{next(_ids)}")]}, "tool_calls")


def requests(server) -> list[dict]:
    return [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]


def tool_names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def test_a_skill_is_disclosed_step_by_step_and_confined_to_its_folder(server, make_repo, env, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    skills = user_folder(env) / "skills"
    skill_file(skills, "release", DESCRIPTION, BODY)
    write(skills / "release" / "scripts" / "check.sh", "echo CHECKED\n")
    write(tmp_path / "outside.txt", "OUTSIDE-SECRET\n")
    (skills / "release" / "escape.txt").symlink_to(tmp_path / "outside.txt")
    server.replies += [use("skill", name="release"), use("skill", name="release", file="scripts/check.sh"),
                       use("skill", name="release", file="../../../outside.txt"),
                       use("skill", name="release", file=str(tmp_path / "outside.txt")),
                       use("skill", name="release", file="escape.txt"),
                       use("skill", name="release", file="../../config.yaml"),
                       answer("Read the skill.")]
    write(Path(env["CODEAGENT_CONFIG"]), "model: {temperature: 0}\n")
    proc = solve(server, repo, env, "--issue", "Cut a release.")
    assert proc.returncode == 0, proc.stderr
    sent = requests(server)
    first = sent[0]
    system = first["messages"][0]["content"]
    assert "release: " + DESCRIPTION in system and "SECRET-BODY" not in json.dumps(first)
    assert "skill" in tool_names(first)
    observations = [m["content"] for m in sent[-1]["messages"] if m["role"] == "tool"]
    assert len(observations) == 6
    assert BODY in observations[0] and "scripts/check.sh" in observations[0] and "escape.txt" not in observations[0]
    assert "CHECKED" in observations[1]
    for refused in observations[2:]:
        assert "OUTSIDE-SECRET" not in refused and "temperature" not in refused
    assert "no absolute path, no '..'" in observations[2] and "no absolute path" in observations[3]
    assert "leads out of the skill's folder" in observations[4]


def repo_with_claude_folders(make_repo):
    repo = make_repo({"app.py": "print('hello')\n"})
    skill_file(repo / ".claude" / "skills", "deploy", "Deploys the app from the repository.", "DEPLOY-BODY")
    write(repo / ".claude" / "commands" / "greet.md", "---\ndescription: greet someone\n---\nSay hello to $1.\n")
    return repo


def test_an_untrusted_repositorys_skills_and_commands_are_not_loaded(server, make_repo, env):
    repo = repo_with_claude_folders(make_repo)
    server.replies += [answer("ok")]
    proc = solve(server, repo, env, "--issue", "/greet Ada")
    assert proc.returncode == 0, proc.stderr
    request = requests(server)[0]
    assert "deploy" not in request["messages"][0]["content"] and "skill" not in tool_names(request)
    assert "<issue>\n/greet Ada\n</issue>" in request["messages"][1]["content"]  # sent as typed, not run
    assert f"not loading the skills in {repo / '.claude' / 'skills'}" in proc.stderr
    assert f"not loading the commands in {repo / '.claude' / 'commands'}" in proc.stderr


def test_a_trusted_repositorys_skills_and_commands_are_loaded(server, make_repo, env):
    repo = repo_with_claude_folders(make_repo)
    server.replies += [answer("ok")]
    proc = solve(server, repo, env, "--trust", "--issue", "/greet Ada")
    assert proc.returncode == 0, proc.stderr
    request = requests(server)[0]
    assert "deploy: Deploys the app" in request["messages"][0]["content"] and "skill" in tool_names(request)
    assert "Say hello to Ada." in request["messages"][1]["content"]
    assert "not loading" not in proc.stderr


def test_a_custom_commands_arguments_and_allowed_tools(server, make_repo, env):
    repo = make_repo({"app.py": "print('hello')\n"})
    commands = user_folder(env) / "commands"
    write(commands / "frontend" / "build.md", "---\ndescription: build one package\nargument-hint: PACKAGE [MODE]\n"
          "allowed-tools: Bash(npm run:*), Read\n---\nBuild $1 in $2 mode (asked: $ARGUMENTS).\n")
    write(commands / "help.md", "I shadow a built-in.\n")
    server.replies += [answer("ok")]
    proc = solve(server, repo, env, "--issue", "/frontend:build web release")
    assert proc.returncode == 0, proc.stderr
    request = requests(server)[0]
    assert "Build web in release mode (asked: web release)." in request["messages"][1]["content"]
    assert sorted(tool_names(request)) == ["bash", "editor", "submit"]
    assert "/help is a built-in command" in proc.stderr


def test_help_in_the_tui_lists_the_custom_commands(make_repo, tmp_path, monkeypatch):
    import asyncio

    from codeagent.config import Config
    from codeagent.models import ScriptedModel
    from codeagent.run.session import Session
    from codeagent.trajectory.store import TrajectoryStore
    from codeagent.tui.app import CodeagentApp
    from tests.support.tui import screen_text, send, until

    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "user" / "config.yaml"))
    write(tmp_path / "user" / "commands" / "review.md",
          "---\ndescription: review the diff\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully.\n")
    repo = make_repo({"app.py": "print('hello')\n"})
    seen = []

    def reply(messages):
        seen.append(messages)
        return {"role": "assistant", "content": "Reviewed."}

    session = Session(Config(agent={"localize": False}, sandbox={"kind": "local"}), ScriptedModel([reply]),
                      repo=str(repo), store=TrajectoryStore(tmp_path / "t"))
    app = CodeagentApp(session)

    async def drive():
        async with app.run_test(size=(100, 40)) as pilot:
            await send(pilot, "/help")
            await pilot.pause(0.2)
            assert "/review FILE" in screen_text(app) and "review the diff" in screen_text(app)
            await pilot.press(*"/rev")  # the popup offers it beside the built-in commands
            await pilot.pause(0.05)
            assert [entry.value for entry in app.menu.entries] == ["/review "]
            await pilot.press("tab", *"app.py", "enter")

            await until(pilot, lambda: seen and not session.busy, what="the command's turn")
            assert "<issue>\nReview app.py carefully.\n</issue>" in seen[0][-1]["content"]
            await pilot.press("ctrl+q")
            await until(pilot, lambda: not app.is_running or session.sandbox_state == "closed", what="quit")

    asyncio.run(drive())


def test_a_repository_skill_folder_that_links_out_is_not_loaded(make_repo, tmp_path):
    from codeagent.tools.skill import find_skills, skill_roots

    repo = make_repo({"app.py": "print('hello')\n"})
    skill_file(tmp_path / "elsewhere", "stolen", "Reads your home folder.", "x")
    (repo / ".claude" / "skills").mkdir(parents=True)
    (repo / ".claude" / "skills" / "stolen").symlink_to(tmp_path / "elsewhere" / "stolen")
    skill_file(repo / ".codeagent" / "skills", "ok", "A skill of the repository.", "y")
    warnings: list[str] = []
    found = find_skills(skill_roots(tmp_path / "no-user-skills", repo, trusted=True), warnings.append)
    assert [skill.name for skill in found] == ["ok"]


def test_rendering_a_commands_arguments():
    from codeagent.run.commands import CustomCommand

    command = CustomCommand("c", "", "", Path("c.md"), "Fix issue #$1 ($2) for: $ARGUMENTS")
    assert command.render('42 "two words"') == 'Fix issue #42 (two words) for: 42 "two words"'
    assert command.render("") == "Fix issue # () for:"
    plain = CustomCommand("p", "", "", Path("p.md"), "Review the diff.")
    assert plain.render("carefully") == "Review the diff.\n\nARGUMENTS: carefully"
