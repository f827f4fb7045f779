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
from datetime import datetime, timezone
from pathlib import Path

from ..data.ids import OBJECT_ID
from .candidates import BRANCH, PULL, Commit
from .gitread import END, SAFE_DIFF, commit_messages, git, object_id

# A branch that lives on (a main line, a maintenance line, a release): merging one is no pull request. A
# release, maintenance or proposed line is one whoever's fork it comes from; a main or version-named branch
# only from the project itself (a contributor's pull request from their `master` or `3.x` is a pull request).
RELEASE_LINE = re.compile(r"(?i)(?:origin/|upstream/)?(?:release|releases|proposed|maint|maintenance|hotfix|stable)"
                          r"(?:[-/_.][\w./-]*)?|.*[-_.](?:release|stable|maint|maintenance)")
MAIN_LINE = re.compile(r"(?i)(?:origin/|upstream/)?(?:master|main|trunk|default|develop|development|dev|next|features?|"
                       r"merge-master|gh-pages|HEAD|v?\d+(?:\.\d+)*(?:[-.](?:x|branch))?)")
PULL_LINE_BOUND = 500  # the commits of a pull request's own line read for the pull requests merged into it
_PULL = re.compile(r"^Merge pull request #\d+ from ([^/\s]+)/(\S+)")
_BITBUCKET = re.compile(r"^Merged in \S+ \(pull request #\d+\)")
_BRANCH = re.compile(r"^Merge (?:remote-tracking )?branch '([^']+)'(?P<remote> of \S+)?")
_SYNC = re.compile(r"(?i)^(?:merge(?: with| heads?|d?)?\b.*|merging\b.*|push branch\b.*|resolving merge conflicts.*|"
                   r"fixed merge conflicts.*)$")
_TAG = re.compile(r"^Merge (?:tag|commit) ")
_SQUASHED = re.compile(r"\(#(\d+)\)\s*$")


def merge_kind(message: str, owner: str | None = None) -> str:
    """PULL (the merge is a pull request's: a unit) or BRANCH (a long-lived branch's: walked, not a unit)."""
    subject = message.strip().split("\n", 1)[0].strip()
    if match := _PULL.match(subject):
        fork, branch = match.groups()
        same = owner is not None and fork.lower() == owner.lower()
        return BRANCH if RELEASE_LINE.fullmatch(branch) or (same and MAIN_LINE.fullmatch(branch)) else PULL
    if _BITBUCKET.match(subject):
        return PULL
    if _TAG.match(subject):
        return BRANCH
    if match := _BRANCH.match(subject):
        name = match.group(1)
        if RELEASE_LINE.fullmatch(name) or MAIN_LINE.fullmatch(name) or subject.startswith("Merge remote-tracking"):
            return BRANCH  # a long-lived line, or the same branch pulled from elsewhere
        return PULL  # a topic branch (a contributor's, `of` their fork)
    if _SYNC.match(subject) and not re.search(r"#\d+", subject):
        return BRANCH  # "merge with stable", "Merge master into features", "Merging master"...
    return PULL  # a merge with a message of its own: the change it merges


def history(git_dir: Path, ref: str = "HEAD", *, since: str | None = None, until: str | None = None,
            max_commits: int | None = None, owner: str | None = None) -> list[Commit]:
    """The units of `ref`'s history (the module docstring), newest first along each line (a merged branch's
    line right after its merge), within the dates and the count given; `owner`: the repository's owner (a
    pull request from its own release branch is a branch merge)."""
    walk = _Walk(git_dir, since, until, owner, _pull_heads(git_dir))
    units = walk.line([ref], "", max_commits)
    return units[:max_commits] if max_commits else units


class _Walk:
    def __init__(self, git_dir: Path, since: str | None, until: str | None, owner: str | None, pulls: dict[str, str]):
        self.git_dir, self.since, self.until, self.owner, self.pulls = git_dir, since, until, owner, pulls
        self.seen: set[str] = set()  # the commits of the lines listed so far (a sync brings the main line again)

    def line(self, revisions: list[str], via: str, max_commits: int | None, merges_only: bool = False) -> list[Commit]:
        """The units of one first-parent line, in its order; a merged line follows its merge. `merges_only`:
        a pull request's own line, whose commits are not units but whose merges of other pull requests are."""
        units: list[Commit] = []
        bound = min(max_commits or PULL_LINE_BOUND, PULL_LINE_BOUND) if merges_only else max_commits
        listed = [entry for entry in _listing(self.git_dir, revisions, self.since, self.until, bound)
                  if entry[0] not in self.seen]
        # a pull request's line claims its merges only: its branch may start on a line walked later (3.x)
        self.seen.update(sha for sha, parents, _ in listed if len(parents) > 1 or not merges_only)
        wanted = [sha for sha, parents, _ in listed if len(parents) > 1 or not merges_only]
        messages = commit_messages(self.git_dir, wanted)
        for sha, parents, date in listed:
            if max_commits and len(units) >= max_commits:
                break
            if sha not in messages:
                continue
            message = messages[sha].strip()
            left = max_commits - len(units) - 1 if max_commits else None
            if len(parents) < 2:
                units.append(self._commit(sha, parents, date, message, via))
            elif merge_kind(message, self.owner) == PULL:
                start = _merge_base(self.git_dir, parents[0], parents[1]) or parents[0]
                base = _tip_at(self.git_dir, parents[0], start, parents[1])
                units.append(Commit(sha, base, date, message, head=parents[1], kind=PULL, line=via,
                                    start="" if base == start else start))
                units += self.line([parents[1], f"^{parents[0]}"], sha, left, merges_only=True)
            else:
                if not merges_only:
                    units.append(Commit(sha, parents[0], date, message, head=parents[1], kind=BRANCH, line=via))
                units += self.line([parents[1], f"^{parents[0]}"], sha, left, merges_only=merges_only)
        return units

    def _commit(self, sha: str, parents: list[str], date: str, message: str, via: str) -> Commit:
        """A commit; a squashed pull request (`Title (#N)`) whose head GitHub keeps (refs/pull/N/head) and whose
        files are the commit's: that pull request's diff, based where it was opened."""
        parent = parents[0] if parents else ""
        match = _SQUASHED.search(message.split("\n", 1)[0])
        head = self.pulls.get(match.group(1)) if match and parent else None
        if head is not None and head != sha:
            start = _merge_base(self.git_dir, head, parent)
            if start and _changed(self.git_dir, start, head) == _changed(self.git_dir, parent, sha):
                base = _tip_at(self.git_dir, parent, start, head)
                return Commit(sha, base, date, message, head=head, kind=PULL, line=via, start="" if base == start else start)
        return Commit(sha, parent, date, message, line=via)


def _listing(git_dir: Path, revisions: list[str], since: str | None, until: str | None,
             max_commits: int | None) -> list[tuple[str, list[str], str]]:
    """(sha, parents, committer date) of each first-parent commit of `revisions`, newest first."""
    args = ["log", "--first-parent", "--format=%H %ct %P"]  # a committer time zone may be anything: the epoch
    if since:
        args.append(f"--since={since}")
    if until:
        args.append(f"--until={until}")
    if max_commits:
        args.append(f"--max-count={max_commits}")
    listed = []
    for line in git(git_dir, *args, END, *revisions, "--").splitlines():
        sha, seconds, *parents = line.split(" ")
        date = datetime.fromtimestamp(int(seconds), timezone.utc).isoformat()  # a ValueError, were it not git's
        listed.append((object_id(sha), [object_id(parent) for parent in parents if parent], date))
    return listed


def _tip_at(git_dir: Path, line: str, start: str, head: str) -> str:
    """Where a pull request was opened: the newest commit of the line it merged into (`line`'s first parents
    after `start`, the merge base) made no later than the pull request's first commit; `start` when none.
    (SWE-bench's base commit is the base branch's tip when the pull request was opened: this finds it for
    every pull request of its Lite instances whose history shows one.)"""
    first = git(git_dir, "log", "--first-parent", "--reverse", "--format=%ct", END, object_id(head), f"^{object_id(start)}",
                "--").split("\n", 1)[0].strip()
    opened = int(first) if first.isdigit() else 0
    for entry in git(git_dir, "log", "--first-parent", "--format=%H %ct", END, object_id(line), f"^{object_id(start)}",
                     "--").splitlines():
        sha, seconds = entry.split(" ")
        if int(seconds) <= opened:
            return object_id(sha)
    return start


def _pull_heads(git_dir: Path) -> dict[str, str]:
    """Pull request number -> its head, where the repository keeps GitHub's refs/pull/N/head."""
    heads = {}
    for line in git(git_dir, "for-each-ref", "--format=%(objectname) %(refname)", END, "refs/pull/").splitlines():
        sha, _, name = line.partition(" ")
        if (match := re.fullmatch(r"refs/pull/(\d+)/head", name)) and OBJECT_ID.fullmatch(sha):
            heads[match.group(1)] = sha
    return heads


def _changed(git_dir: Path, start: str, end: str) -> set[str]:
    out = git(git_dir, "diff", "--name-only", "-z", "--no-renames", *SAFE_DIFF, END, object_id(start), object_id(end))
    return set(out.split("\0")) - {""}


def _merge_base(git_dir: Path, first: str, second: str) -> str | None:
    try:
        found = git(git_dir, "merge-base", END, object_id(first), object_id(second)).strip()
    except RuntimeError:  # unrelated histories
        return None
    return object_id(found) if found else None

