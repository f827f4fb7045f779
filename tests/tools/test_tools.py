"""The tools, on a real Docker sandbox, through the registry as the agent calls them."""

from __future__ import annotations

import pytest

from codeagent.sandbox import open_sandbox
from codeagent.tools.base import ToolContext, ToolSettings
from codeagent.tools.registry import ToolRegistry, ToolSpecError

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "pkg/dup.py": "x = 1\ny = 2\nx = 1\n",
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
    "latin1.txt": "caf\xe9\n".encode("latin-1"),
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, base_image):
    import subprocess

    repo = tmp_path_factory.mktemp("tools-repo")
    for rel, content in FILES.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "i"]):
        subprocess.run(cmd, cwd=repo, check=True, env={**__import__("os").environ, **env})
    with open_sandbox(repo) as box:
        yield box


@pytest.fixture
def call(sandbox):
    registry = ToolRegistry()
    context = ToolContext(sandbox=sandbox, settings=ToolSettings(command_timeout=5, observation_chars=2000,
                                                                  max_listing=3))

    def run(name, **arguments):
        return registry.call(name, arguments, context)

    yield run
    context.close()
    sandbox.run("git checkout -q -- . && git clean -qfd")


def test_registry_reads_specs_from_the_tools_folder():
    registry = ToolRegistry()
    assert {"bash", "editor", "search", "navigate", "submit"} <= set(registry.names())
    spec = next(s for s in registry.specs() if s["function"]["name"] == "editor")
    assert "str_replace" in spec["function"]["parameters"]["properties"]["command"]["enum"]
    with pytest.raises(ToolSpecError, match="unknown tool"):
        ToolRegistry(["bash", "teleport"])


def test_read_only_comes_from_the_tool_specs(tmp_path):
    """Which tools change no file is data in tools/*.yaml, read by the registry, and what the TUI's
    approval and the loop go by: a new read-only tool needs no code change."""
    from codeagent.run.session.approval import classify

    registry = ToolRegistry()
    assert {name for name in registry.names() if registry.read_only(name)} == {"search", "navigate", "submit", "skill"}
    assert not registry.read_only("bash") and not registry.read_only("teleport")
    assert classify("navigate", {}) == "read" and classify("bash", {"command": "ls"}) == "command"
    (tmp_path / "peek.yaml").write_text("name: peek\nimplementation: codeagent.tools.search:search\n"
                                        "read_only: true\ndescription: Look.\n")
    assert ToolRegistry(["peek"], folder=tmp_path).read_only("peek")
    (tmp_path / "peek.yaml").write_text("name: peek\nimplementation: codeagent.tools.search:search\n"
                                        "read_only: 'yes'\ndescription: Look.\n")
    with pytest.raises(ToolSpecError, match="read_only must be true or false"):
        ToolRegistry(["peek"], folder=tmp_path)


def test_unknown_tool_and_bad_arguments_are_errors_for_the_model(call):
    result = call("teleport", where="mars")
    assert result.error and "Unknown tool 'teleport'" in result.output and "bash" in result.output
    result = call("editor", command="view")
    assert result.error and "'path' is a required property" in result.output
    result = call("editor", command="explode", path="x")
    assert result.error and "'explode' is not one of" in result.output
    assert call("bash", command="true", colour="red").error


def test_bash_shows_exit_code_timeout_and_truncation(call):
    result = call("bash", command="echo hi; exit 3")
    assert result.exit_code == 3 and "hi" in result.output
    hung = call("bash", command="sleep 60", timeout=1)
    assert hung.timed_out and "timed out after 1s and was killed" in hung.output
    flood = call("bash", command="head -c 100000000 /dev/zero | tr '\\0' a")  # 100 MB
    assert flood.exit_code == 0 and len(flood.output) < 4000
    assert "characters elided" in flood.output and "The output was 100000000 bytes" in flood.output


def test_editor_view_create_insert_undo(call, sandbox):
    view = call("editor", command="view", path="pkg/core.py", view_range=[4, 6])
    assert view.output.splitlines() == ["4\t", "5\tdef sub(a, b):", "6\t    return a - b"]
    listing = call("editor", command="view", path="pkg")
    assert "core.py" in listing.output and "dup.py" in listing.output
    assert call("editor", command="view", path="pkg/core.py", view_range=[9, 12]).error
    created = call("editor", command="create", path="pkg/new.py", file_text="A = 1\n")
    assert not created.error
    assert call("editor", command="create", path="pkg/new.py", file_text="again").error
    inserted = call("editor", command="insert", path="pkg/new.py", insert_line=0, new_str="# header")
    assert "1\t# header" in inserted.output
    assert sandbox.read_file("pkg/new.py") == b"# header\nA = 1\n"
    call("editor", command="undo_edit", path="pkg/new.py")
    assert sandbox.read_file("pkg/new.py") == b"A = 1\n"
    call("editor", command="undo_edit", path="pkg/new.py")
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("pkg/new.py")
    assert "no edit of pkg/new.py to undo" in call("editor", command="undo_edit", path="pkg/new.py").output


def test_str_replace_needs_exactly_one_match(call, sandbox):
    none = call("editor", command="str_replace", path="pkg/core.py", old_str="return a * b", new_str="")
    assert none.error and "does not occur" in none.output
    spaces = call("editor", command="str_replace", path="pkg/core.py", old_str="return a + b  ", new_str="")
    assert spaces.error and "different surrounding whitespace" in spaces.output
    several = call("editor", command="str_replace", path="pkg/dup.py", old_str="x = 1", new_str="x = 3")
    assert several.error and "occurs 2 times" in several.output and "lines 1, 3" in several.output
    done = call("editor", command="str_replace", path="pkg/core.py", old_str="return a + b", new_str="return b + a")
    assert not done.error and "2\t    return b + a" in done.output
    assert b"return b + a" in sandbox.read_file("pkg/core.py")


def test_editor_refuses_binary_missing_and_non_utf8_files(call):
    binary = call("editor", command="str_replace", path="assets/logo.png", old_str="PNG", new_str="GIF")
    assert binary.error and "binary file" in binary.output
    missing = call("editor", command="view", path="pkg/nope.py")
    assert missing.error and "does not exist" in missing.output
    latin = call("editor", command="view", path="latin1.txt")
    assert latin.error and "not valid UTF-8" in latin.output


def test_search_counts_and_caps(call):
    found = call("search", command="grep", pattern="return", path="pkg")
    assert found.output.startswith("2 match(es) in 1 file(s)") and "pkg/core.py:2:" in found.output
    regex = call("search", command="grep", pattern="^(x|y) = ", regex=True)
    assert regex.output.startswith("3 match(es) in 1 file(s)")
    capped = call("search", command="grep", pattern="b", include="*.py")
    assert capped.output.startswith("4 match(es)") and "[1 more matches not shown" in capped.output  # cap 3
    assert "No matches" in call("search", command="grep", pattern="zebra").output
    bad = call("search", command="grep", pattern="(unclosed", regex=True)
    assert bad.error and "grep:" in bad.output
    files = call("search", command="find_files", pattern="core")
    assert files.output == "1 file(s) matching '*core*' under .:\npkg/core.py"


def test_submit_reports_the_patch_and_review_mode(sandbox):
    registry = ToolRegistry()
    context = ToolContext(sandbox=sandbox, settings=ToolSettings(review_on_submit=True))
    sandbox.write_file("pkg/core.py", "def add(a, b):\n    return b + a\n")
    first = registry.call("submit", {}, context)
    assert not first.submitted and "Review your change" in first.output and "+    return b + a" in first.output
    assert registry.call("submit", {}, context).submitted
    sandbox.run("git checkout -q -- .")


def test_navigate_sees_the_agents_edits(call, sandbox):
    outline = call("navigate", command="outline", path="pkg/core.py")
    assert "function add  lines 1-2: def add(a, b):" in outline.output
    assert "function sub  lines 5-6" in outline.output
    call("editor", command="insert", path="pkg/core.py", insert_line=6,
         new_str="\n\nclass Calc:\n    def mul(self, a, b):\n        return add(a, b) * 0 + a * b\n")
    outline = call("navigate", command="outline", path="pkg/core.py")
    assert "method Calc.mul  lines 10-11" in outline.output
    assert "pkg/core.py:10: method Calc.mul" in call("navigate", command="definition", symbol="Calc.mul").output
    references = call("navigate", command="references", symbol="add").output
    assert "pkg/core.py:11:" in references
    sandbox.run("git checkout -q -- pkg/core.py")  # reverting is seen too
    assert "Calc" not in call("navigate", command="outline", path="pkg/core.py").output
    assert call("navigate", command="outline", path="nope.py").error
    assert "pkg/core.py" in call("navigate", command="localize", focus="the sub function subtracts wrongly").output
    assert "pkg/core.py:" in call("navigate", command="repo_map").output


def test_outline_of_a_file_navigate_cannot_parse_is_an_observation(call):
    result = call("navigate", command="outline", path="latin1.txt")
    assert result.error and "no language registered" in result.output and "view" in result.output
