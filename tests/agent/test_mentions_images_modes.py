"""@path mentions (read from git objects, symlink escapes refused), image attachments (stored by hash,
inlined only in the request), and plan mode's tool filter: the parts, without a sandbox."""

from __future__ import annotations

import base64
import os

import pytest

from codeagent.agent.images import ImageError, StoredImage, inline, store_image
from codeagent.agent.modes import PLAN, offered_specs, refusal, switch_messages, told_mode
from codeagent.agent.prompts import render
from codeagent.run.session.mentions import FILE_CHARS, RepoFiles, expand
from codeagent.run.session.slash import plan_mode
from codeagent.tools.registry import ToolRegistry
from tests.support.git import git
from tests.support.images import PNG


@pytest.fixture
def repo(make_repo):
    repo = make_repo({"src/app.py": "def main():\n    return 42\n", "docs/guide.md": "# Guide\n",
                      "big.txt": "line\n" * FILE_CHARS, "logo.bin": b"\x00\x01binary"})
    os.symlink("../../../etc/passwd", repo / "escape")
    os.symlink("src/app.py", repo / "inside")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "links")
    return repo


def files_of(repo) -> RepoFiles:
    return RepoFiles.load(repo / ".git", git(repo, "rev-parse", "HEAD").strip())


def test_a_mention_puts_the_committed_file_in_the_message(repo):
    (repo / "src/app.py").write_text("uncommitted edit\n")  # the host's working tree is not read
    text, notes = expand("Why does @src/app.py return 42?", files_of(repo))
    assert text.startswith("Why does @src/app.py return 42?\n\n")
    assert '<file path="src/app.py">\ndef main():\n    return 42\n</file>' in text
    assert "uncommitted" not in text and notes == []


def test_escapes_are_refused_with_a_note_and_links_inside_are_followed(repo):
    text, notes = expand("see @escape and @../outside.txt and @/etc/passwd, @inside, @nothere.py, @bob", files_of(repo))
    assert "root:" not in text and "passwd" not in text.split("\n\n", 1)[-1].replace("@/etc/passwd", "")
    assert any(note.startswith("@escape: refused: a symlink that leaves the repository") for note in notes)
    assert any(note.startswith("@../outside.txt: refused: a path with `..`") for note in notes)
    assert any(note.startswith("@/etc/passwd: refused") for note in notes)
    assert any(note.startswith("@nothere.py: not a file in the repository") for note in notes)
    assert '<file path="inside">\ndef main():' in text  # a link to src/app.py, inside the tree
    assert not any("bob" in note for note in notes)  # a name, not a path


def test_binary_folders_and_caps(repo):
    files = files_of(repo)
    text, notes = expand("@logo.bin @docs @big.txt", files)
    assert any("binary" in note for note in notes) and any("a folder" in note for note in notes)
    assert '<file path="big.txt">' in text and len(text) < FILE_CHARS + 1000
    assert f"@big.txt: cut to its first {FILE_CHARS:,} of {5 * FILE_CHARS:,} characters" in notes


def test_completion_comes_from_the_tree(repo):
    files = files_of(repo)
    assert files.complete("s") == "rc/"  # what follows the typed prefix, one folder at a time
    assert files.complete("src/") == "app.py"
    assert files.complete("d") == "ocs/"
    assert files.complete("") == ""  # several first names: nothing in common
    assert files.complete("zzz") == ""
    assert "escape" in files.paths and ".git/config" not in files.paths


def test_an_image_is_stored_by_hash_and_inlined_only_in_the_request(tmp_path):
    image_file = tmp_path / "shot.png"
    image_file.write_bytes(PNG)
    image = store_image(image_file, tmp_path / "store")
    assert image == StoredImage(image.sha256, "image/png", len(PNG))
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": f"Look:\n{image.marker}"},
                {"role": "tool", "tool_call_id": "1", "content": image.marker}]  # a tool's output is never inlined
    request = inline(messages, tmp_path / "store")
    assert messages[1]["content"] == f"Look:\n{image.marker}"  # the conversation (and trajectory) keeps the marker
    text, picture = request[1]["content"]
    assert text == {"type": "text", "text": f"Look:\n{image.marker}"}
    assert picture == {"type": "image_url",
                       "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    assert request[2] == messages[2]
    (tmp_path / "store" / "images" / f"{image.sha256}.png").write_bytes(PNG + b"tampered")
    assert "is not available any more" in inline(messages, tmp_path / "store")[1]["content"][0]["text"]


def test_a_non_image_or_huge_file_is_refused(tmp_path):
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP image"):
        store_image(tmp_path / "notes.png", tmp_path)
    huge = tmp_path / "huge.png"
    with open(huge, "wb") as out:
        out.write(PNG)
        out.truncate(6 * 1024 * 1024)
    with pytest.raises(ImageError, match="more than the 5 MiB"):
        store_image(huge, tmp_path)
    with pytest.raises(ImageError, match="no such file"):
        store_image(tmp_path / "missing.png", tmp_path)


def test_plan_mode_offers_reading_only():
    """Plan mode offers the read-only tools, the editor for viewing and bash for read-only commands
    (their specs' `plan:`), and no submit."""
    tools = ToolRegistry()
    offered = {spec["function"]["name"]: spec["function"] for spec in offered_specs(tools, PLAN)}
    assert set(offered) == {"bash", "editor", "search", "navigate", "skill"}  # skill: read-only; offered while there are skills
    assert offered["editor"]["parameters"]["properties"]["command"]["enum"] == ["view"]
    assert "read-only" in offered["bash"]["description"]
    assert len(offered_specs(tools, "normal")) == len(tools.specs())
    assert "plan mode is on" in refusal(tools, PLAN, "bash", {"command": "rm -rf ."})
    assert "plan mode is on" in refusal(tools, PLAN, "submit", {})
    assert refusal(tools, PLAN, "bash", {"command": "git diff HEAD~1 | head"}) is None
    assert refusal(tools, PLAN, "search", {}) is None
    assert refusal(tools, "normal", "bash", {"command": "rm -rf ."}) is None


def test_the_conversation_is_told_when_the_mode_changes():
    system = render("system", workdir="/testbed", network=False, scratch_dir=".s", mode=PLAN, interactive=True)
    assert "[plan mode]" in system and "answer in plain text" in system
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "explain"}]
    assert told_mode(messages) == PLAN and switch_messages(messages, PLAN, None) == []
    back = switch_messages(messages, "normal", None)
    assert back[0]["content"].startswith("[normal mode]")
    assert told_mode(messages + back) == "normal"
    headless = render("system", workdir="/testbed", network=False, scratch_dir=".s")
    assert "You work alone" in headless and "[plan mode]" not in headless
    assert plan_mode("normal", "") == "plan" and plan_mode("plan", "") == "normal" and plan_mode("plan", "on") == "plan"
    with pytest.raises(ValueError, match="/plan on or /plan off"):
        plan_mode("normal", "maybe")


def test_a_mention_in_a_session_reads_the_working_tree_and_no_host_file(repo, tmp_path, monkeypatch):
    """In a session the mentioned files are the working tree's (the sandbox's copy): an uncommitted
    edit is there; a link out of the repository is refused, its host file never read."""
    from types import SimpleNamespace

    from codeagent.run.session.message import repo_files

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    (repo / "src/app.py").write_text("def main():\n    return 43  # uncommitted\n")
    (tmp_path / "host.txt").write_text("HOST-SECRET\n")
    os.symlink(tmp_path / "host.txt", repo / "hostlink")
    session = SimpleNamespace(task=None, commit=None, repo=str(repo), apply_repo=str(repo))
    text, notes = expand("Why does @src/app.py return 43? See @hostlink", repo_files(session, fresh=True))
    assert "return 43  # uncommitted" in text and "as in my working tree" in text
    assert "HOST-SECRET" not in text and any(note.startswith("@hostlink: refused") for note in notes)
    assert git(repo, "status", "--porcelain") == " M src/app.py\n?? hostlink\n"
