"""The units of a history that become tasks: a pull request where the history shows one, else a commit.

The first-parent line of the walked ref is read newest first. On it:

- a commit is a unit: its diff against its parent;
- a pull request's merge (`Merge pull request #N from fork/branch`, a topic branch merged, a merge with a
  message of its own) is a unit: the pull request's diff, from the merge base of its two parents (where
  the branch started: SWE-bench's base commit) to the branch's head, not the merge's diff against
  whatever the main line had become;
- a merge of a long-lived branch (a maintenance line like `3.x` or `stable`, a release, a sync of a
  remote) is no unit (candidates.py says why), and its own first-parent line is walked the same way:
  the pull requests merged into a maintenance branch are units there.

Ids and dates come from fields git writes itself, messages from gitread.commit_messages: a message
cannot forge a commit, a parent or a date.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from .candidates import BRANCH, PULL, Commit
from .gitread import END, commit_messages, git, object_id

# A branch that lives on (a main line, a maintenance line, a release): merging one is no pull request.
RELEASE_BRANCH = re.compile(
    r"(?i)(?:origin/|upstream/)?(?:master|main|trunk|default|develop|development|dev|stable|next|features?|"
    r"merge-master|gh-pages|HEAD|(?:release|releases|maint|maintenance|hotfix)(?:[-/_.][\w./-]*)?|"
    r"v?\d+(?:\.\d+)*(?:[-.](?:x|release|stable|maint|maintenance|branch))?)")
_PULL = re.compile(r"^Merge pull request #\d+ from ([^/\s]+)/(\S+)")
_BITBUCKET = re.compile(r"^Merged in \S+ \(pull request #\d+\)")
_BRANCH = re.compile(r"^Merge (?:remote-tracking )?branch '([^']+)'(?P<remote> of \S+)?")
_SYNC = re.compile(r"(?i)^(?:merge(?: with| heads?|d?)?\b.*|merging\b.*|push branch\b.*|resolving merge conflicts.*|"
                   r"fixed merge conflicts.*)$")
_TAG = re.compile(r"^Merge (?:tag|commit) ")


def merge_kind(message: str, owner: str | None = None) -> str:
    """PULL (the merge is a pull request's: a unit) or BRANCH (a long-lived branch's: walked, not a unit)."""
    subject = message.strip().split("\n", 1)[0].strip()
    if match := _PULL.match(subject):
        fork, branch = match.groups()
        same = owner is not None and fork.lower() == owner.lower()
        return BRANCH if same and RELEASE_BRANCH.fullmatch(branch) else PULL
    if _BITBUCKET.match(subject):
        return PULL
    if _TAG.match(subject):
        return BRANCH
    if match := _BRANCH.match(subject):
        if match.group("remote") or subject.startswith("Merge remote-tracking"):
            return BRANCH  # the same branch, pulled from elsewhere
        return BRANCH if RELEASE_BRANCH.fullmatch(match.group(1)) else PULL
    if _SYNC.match(subject) and not re.search(r"#\d+", subject):
        return BRANCH  # "merge with stable", "Merge master into features", "Merging master"...
    return PULL  # a merge with a message of its own: the change it merges


def history(git_dir: Path, ref: str = "HEAD", *, since: str | None = None, until: str | None = None,
            max_commits: int | None = None, owner: str | None = None) -> list[Commit]:
    """The units of `ref`'s history (the module docstring), newest first along each line (a merged branch's
    line right after its merge), within the dates and the count given; `owner`: the repository's owner (a
    pull request from its own release branch is a branch merge)."""
    units = _line(git_dir, [ref], "", since, until, max_commits, owner)
    return units[:max_commits] if max_commits else units


def _line(git_dir: Path, revisions: list[str], via: str, since: str | None, until: str | None,
          max_commits: int | None, owner: str | None) -> list[Commit]:
    """The units of one first-parent line, in its order; a branch merge's line follows the merge."""
    units: list[Commit] = []
    listed = _listing(git_dir, revisions, since, until, max_commits)
    messages = commit_messages(git_dir, [sha for sha, _, _ in listed])
    for sha, parents, date in listed:
        if max_commits and len(units) >= max_commits:
            break
        message = messages[sha].strip()
        if len(parents) < 2:
            units.append(Commit(sha, parents[0] if parents else "", date, message, line=via))
        elif merge_kind(message, owner) == PULL:
            base = _merge_base(git_dir, parents[0], parents[1]) or parents[0]
            units.append(Commit(sha, base, date, message, head=parents[1], kind=PULL, line=via))
        else:
            units.append(Commit(sha, parents[0], date, message, head=parents[1], kind=BRANCH, line=via))
            left = max_commits - len(units) if max_commits else None
            units += _line(git_dir, [parents[1], f"^{parents[0]}"], sha, since, until, left, owner)
    return units


def _listing(git_dir: Path, revisions: list[str], since: str | None, until: str | None,
             max_commits: int | None) -> list[tuple[str, list[str], str]]:
    """(sha, parents, committer date) of each first-parent commit of `revisions`, newest first."""
    args = ["log", "--first-parent", "--format=%H %P %cI"]
    if since:
        args.append(f"--since={since}")
    if until:
        args.append(f"--until={until}")
    if max_commits:
        args.append(f"--max-count={max_commits}")
    listed = []
    for line in git(git_dir, *args, END, *revisions, "--").splitlines():
        sha, *parents, date = line.split(" ")
        _when(date)  # a ValueError, were it not git's date
        listed.append((object_id(sha), [object_id(parent) for parent in parents if parent], date))
    return listed


def _merge_base(git_dir: Path, first: str, second: str) -> str | None:
    try:
        found = git(git_dir, "merge-base", END, object_id(first), object_id(second)).strip()
    except RuntimeError:  # unrelated histories
        return None
    return object_id(found) if found else None


def _when(date: str) -> datetime:
    return datetime.fromisoformat(date.replace("Z", "+00:00"))
