"""Where the editor is shown (or given) a file the model names: inside the session's folder only (issue 35,
item 6: `acp/updates.py` joined the model's path to the folder unchecked)."""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("path", ["/etc/passwd", "../../x", "/testbed/../etc/passwd", "a/../../x", ".git/hooks/pre-commit",
                                  "/testbed/.git/config", "sub/.GIT/x", "", "/testbed", "link-out/secret", "/testbedX/a"])
def test_a_path_outside_the_folder_has_no_place_in_the_editor(tmp_path, path):
    from codeagent.acp.editor_files import host_path

    (tmp_path / "sub").mkdir()
    os.symlink("/etc", tmp_path / "link-out")
    assert host_path(tmp_path, "/testbed", path) is None


@pytest.mark.parametrize("path, relative", [("/testbed/a.py", "a.py"), ("a.py", "a.py"), ("./sub/b.py", "sub/b.py"),
                                            ("sub/../a.py", "a.py"), ("link-in/c.py", "link-in/c.py")])
def test_a_path_inside_the_folder_is_shown_there(tmp_path, path, relative):
    from codeagent.acp.editor_files import host_path

    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "sub", tmp_path / "link-in")
    assert host_path(tmp_path, "/testbed", path) == tmp_path / relative
