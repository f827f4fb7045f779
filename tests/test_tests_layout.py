"""The tests mirror the package (issue 41): tests/<package>/ holds the tests of codeagent/<package>/ (tests/datasets/
those of codeagent/data/: tests/data/ holds fixture repositories); at the top only the tests of codeagent's own
modules and of the project as a whole (layers, README, lock, module sizes, CLI processes end to end)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
PACKAGE = TESTS.parent / "codeagent"
ALIASES = {"datasets": "data"}
NOT_TESTS = {"data", "snapshots", "support", "__pycache__"}


def packages() -> set[str]:
    return {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}


def test_every_test_folder_is_a_package_of_codeagent():
    folders = {path.name for path in TESTS.iterdir() if path.is_dir() and path.name not in NOT_TESTS}
    assert {ALIASES.get(name, name) for name in folders} <= packages(), folders
    assert all((TESTS / name / "__init__.py").exists() for name in folders)


def test_no_test_at_the_top_is_named_after_a_package():
    """A new `test_<package>_*.py` goes in its package's folder, not at the top."""
    misplaced = [path.name for path in TESTS.glob("test_*.py")
                 if path.stem.removeprefix("test_").split("_")[0] in packages() | set(ALIASES)]
    assert misplaced == []
