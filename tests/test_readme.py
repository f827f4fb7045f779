"""The README stays a short front page (under 400 lines) that links every file of docs/, and no link of the
README or of docs/ points at a file or a heading that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # a code block holds no link
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]  # http(s), mailto


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    titles = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}


def test_the_readme_is_under_400_lines():
    lines = len(README.read_text().splitlines())
    assert lines < 400, f"README.md has {lines} lines: move the long parts to docs/"


def test_every_docs_file_is_linked_from_the_readme_and_every_link_there_exists():
    linked = {target.split("#")[0] for target in links(README) if target.startswith("docs/")}
    assert linked, "the README links no file of docs/"
    missing = sorted(target for target in linked if not (ROOT / target).is_file())
    assert not missing, f"the README links files that do not exist: {missing}"
    unlinked = sorted(str(path.relative_to(ROOT)) for path in DOCS.glob("*.md"))
    unlinked = [path for path in unlinked if path not in linked]
    assert not unlinked, f"files of docs/ the README does not link: {unlinked}"


def test_relative_links_and_anchors_resolve_in_the_readme_and_docs():
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in links(page):
            file, _, anchor = target.partition("#")
            goal = (page.parent / file).resolve() if file else page
            if not goal.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
