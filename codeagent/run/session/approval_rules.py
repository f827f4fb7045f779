"""The user's "always allow" rules, saved per repository so that later sessions keep them.

They live in the user's own folder (beside the user config: allow-rules.json, or
$CODEAGENT_ALLOW_RULES), keyed by the repository's path or URL. Never in the repository: its files
are the repository's word, not the user's. A rule is a command prefix (`python -m pytest`), an
edited path, or a tool's name; what a prefix allows is decided by tools/shell_words.command_prefixes, so a
saved `pytest` does not allow `pytest; rm -rf /`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...config import user_config_path
from ...locks import file_lock

KINDS = ("command", "edit", "tool")
VERSION = 1


def rules_path() -> Path:
    return Path(os.environ.get("CODEAGENT_ALLOW_RULES") or user_config_path().parent / "allow-rules.json")


@dataclass(frozen=True)
class Rule:
    kind: str  # command | edit | tool
    value: tuple[str, ...] | str  # a command prefix's words; a path; a tool's name

    def describe(self) -> str:
        if self.kind == "command":
            return f"`{' '.join(self.value)} …`"
        return f"edits to {self.value}" if self.kind == "edit" else f"the {self.value} tool"


class SavedRules:
    """One repository's rules in the user's rule file; every change is written at once."""

    def __init__(self, repo: str, path: Path | None = None):
        self.repo = repo
        self.path = path or rules_path()
        self.problem: str | None = None  # why the file could not be read (its rules are then not used)

    def load(self) -> list[Rule]:
        try:
            return _parse(self._read().get(self.repo, []))
        except (OSError, ValueError) as exc:
            self.problem = f"the saved allow-rules in {self.path} are not used: {exc}"
            return []

    def add(self, rules: list[Rule]) -> None:
        self._change(lambda saved: saved + [rule for rule in rules if rule not in saved])

    def remove(self, rule: Rule) -> None:
        self._change(lambda saved: [kept for kept in saved if kept != rule])

    def _change(self, how) -> None:
        with file_lock(self.path.with_name(self.path.name + ".lock")):
            data = self._read()
            rules = how(_parse(data.get(self.repo, [])))
            if rules:
                data[self.repo] = [{"kind": rule.kind, "value": list(rule.value) if rule.kind == "command"
                                    else rule.value} for rule in rules]
            else:
                data.pop(self.repo, None)
            _write(self.path, {"version": VERSION, "repositories": data})

    def _read(self) -> dict[str, list]:
        if not self.path.is_file():
            return {}
        document = json.loads(self.path.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or not isinstance(document.get("repositories", {}), dict):
            raise ValueError("expected {\"version\": 1, \"repositories\": {REPO: [RULE, ...]}}")
        return document.get("repositories", {})


def _parse(entries) -> list[Rule]:
    if not isinstance(entries, list):
        raise ValueError("a repository's rules must be a list")
    rules = []
    for entry in entries:
        kind = entry.get("kind") if isinstance(entry, dict) else None
        value = entry.get("value") if isinstance(entry, dict) else None
        if kind == "command" and isinstance(value, list) and value and all(isinstance(w, str) and w for w in value):
            rules.append(Rule(kind, tuple(value)))
        elif kind in ("edit", "tool") and isinstance(value, str) and value:
            rules.append(Rule(kind, value))
        else:
            raise ValueError(f"not a rule: {json.dumps(entry)[:80]}")
    return rules


def _write(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".allow-rules-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2, ensure_ascii=False)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def rules_command(policy, argument: str) -> tuple[str, str]:
    """/rules lists the allow-rules (numbered from 1); `/rules remove N` drops one. Returns the
    text to show and its level."""
    rules = policy.rules()
    where = f"saved for this repository in {policy.saved.path}" if policy.saved else "for this session"
    words = argument.split()
    if words and words[0] in ("remove", "rm", "delete"):
        if len(words) != 2 or not words[1].isdigit() or not 1 <= int(words[1]) <= len(rules):
            return f"/rules remove N: N is a rule's number, 1 to {len(rules)} (/rules lists them).", "warning"
        rule = rules[int(words[1]) - 1]
        try:
            policy.forget(rule)
        except (OSError, ValueError) as exc:
            return f"Could not remove the rule from {policy.saved.path}: {exc}", "error"
        return f"Removed: always allow {rule.describe()}. It is asked about again.", "success"
    if words:
        return "Usage: /rules (list the allow-rules), /rules remove N.", "warning"
    problem = f"\n({policy.saved.problem})" if policy.saved and policy.saved.problem else ""
    if not rules:
        return f"No allow-rules {where}: answer “Always [a]” in an approval dialog to add one.{problem}", "info"
    lines = [f"  {number}. {rule.describe()}" for number, rule in enumerate(rules, start=1)]
    return f"Always allowed, {where}:\n" + "\n".join(lines) + f"\n/rules remove N drops one.{problem}", "info"
