"""The judge of a graded test run: a pass is believed only on evidence the code under test cannot
produce or reach (issue 34).

Every verdict (eval, the verifiers, GRPO rewards, `traj grade`, mined-task validation) comes from a test
run whose code the model wrote, and that code runs inside the test process: it can print a runner's
PASS lines and exit before any test ran, neutralise the assertion library, or ship a report file. The
log alone cannot tell. So each run is watched by the observers its command calls for, one contract with
a small part per runner (which part watches which command: the `judge:` block of languages/*.yaml):

    install(context) -> shell   before the test command: what the observer needs in the container, in a
                                folder of its own outside the repository (a canary, a launcher, a preload)
    collect(context) -> seen    after it: what the observer recorded, as plain data
    evidence(seen, run) -> [..] why the log cannot be the run that happened; empty when they agree
    doubts(seen, run) -> [..]   (optional) why its passes cannot be believed though nothing shows tampering
                                (a test binary that crashed before its canary ran): unresolved, not counted

The parts (each module says what it catches and what it cannot):
- `go`: a secret canary test compiled into every package by `-overlay` and every test binary started
  through a launcher that keeps its real exit status and the tests it reported (go.py);
- `process`: a preloaded library in every process of the run (C/C++ and Rust test programs) that records
  how each one ended: before its main ran, with its status replaced after main returned (process.py);
- `node`: a preloaded module that checks node:assert at every exit, and canary tests appended to the
  hidden test files that must fail through the file's own assertions (node.py);
- `reports`: JUnit XML reports (Maven Surefire, Gradle, CTest) only as written during the run; a test
  JVM that died without saying goodbye (reports.py);
- `pytest`: codeagent's pytest plugin (../guard.py);
- `files`, in every run: the hidden test files hashed before and after the command (a build that
  rewrites them: CMake's file(WRITE), a procedural macro) (files.py).

Evidence is mostly looked for where it could change a verdict: a run whose listed tests the log reports
passing (and a run whose log was cut short, which evidence turns from a masked harness_error into a scored
failure). A detected tamper makes the run `unresolved` with `tamper_evidence` (reward 0, verifier score 0,
never an SFT/DPO positive: integrity.reasons), and the report names the observers (`guard`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import yaml

from ....assets import asset_dir, asset_path
from ..box_files import put, read  # noqa: F401 (the parts' file I/O, re-exported)

__all__ = ["Context", "InfrastructureRule", "Observer", "Watch", "infrastructure_rules", "judge_evidence",
           "observers_for", "source", "verdict", "without_canaries"]


@dataclass
class Context:
    """One graded run: the sandbox, the judge's folder in it, the command, and what the verdict relies on."""

    box: Any
    folder: str
    command: str
    log_parser: str = ""
    test_files: list[str] = field(default_factory=list)  # the files the hidden tests come from
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    secret: str = field(default_factory=lambda: secrets.token_hex(16))


class Observer(Protocol):
    name: str

    def install(self, context: Context) -> str: ...

    def collect(self, context: Context) -> dict[str, Any]: ...

    def evidence(self, seen: dict[str, Any], log: str, listed: Sequence[str], exit_code: int | None) -> list[str]: ...


def source(asset: str, **values: str) -> str:
    """A runner part's file from languages/judge/, its `@KEY@` placeholders filled in."""
    text = asset_path("languages", "judge", asset).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"@{key.upper()}@", value)
    return text


@dataclass(frozen=True)
class Rule:
    """One entry of a language's `judge: observers:` list: which observer watches which runs."""

    observer: str
    command: re.Pattern[str] | None  # the test command must match it (when given)
    parsers: frozenset[str]  # the run's log parser must be one of them (when given)
    exclude: re.Pattern[str] | None = None  # and the command must not match this (when given)
    options: tuple[tuple[str, str], ...] = ()  # the rest: the observer's own settings

    def applies(self, command: str, log_parser: str) -> bool:
        return ((self.command is None or bool(self.command.search(command)))
                and (not self.parsers or log_parser in self.parsers)
                and (self.exclude is None or not self.exclude.search(command)))


@cache
def _judge_blocks() -> tuple[dict[str, Any], ...]:
    """Every language's `judge:` block (languages/*.yaml)."""
    blocks = []
    for path in sorted(asset_dir("languages").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if isinstance(data.get("judge"), dict):
            blocks.append(data["judge"])
    return tuple(blocks)


@dataclass(frozen=True)
class InfrastructureRule:
    """A path a patch must not touch (integrity.py): by its glob, or, with `lines`, by a changed line."""

    glob: str
    rule: str
    lines: re.Pattern[str] | None = None

    def matches(self, path: str) -> bool:
        from fnmatch import fnmatchcase

        return fnmatchcase(path, self.glob) or (self.glob.startswith("**/") and fnmatchcase(path, self.glob[3:]))


@cache
def infrastructure_rules() -> tuple[InfrastructureRule, ...]:
    """Every language's `judge: test_infrastructure:` entries."""
    return tuple(InfrastructureRule(str(entry["glob"]), str(entry["rule"]), _pattern(entry.get("lines")))
                 for block in _judge_blocks() for entry in block.get("test_infrastructure") or ())


@cache
def _rules() -> tuple[Rule, ...]:
    rules = []
    for block in _judge_blocks():
        for entry in block.get("observers") or ():
            options = {key: str(value) for key, value in entry.items()
                       if key not in ("observer", "command", "parsers", "exclude")}
            rules.append(Rule(str(entry["observer"]), _pattern(entry.get("command")),
                              frozenset(map(str, entry.get("parsers") or ())), _pattern(entry.get("exclude")),
                              tuple(sorted(options.items()))))
    return tuple(rules)


def _pattern(text: str | None) -> re.Pattern[str] | None:
    return re.compile(text) if text else None


def observers_for(command: str, log_parser: str) -> list[Observer]:
    """The observers a test run calls for: each rule whose command pattern the command matches, or
    whose log parsers include the run's (a rule with both needs both)."""
    _load_parts()
    chosen: dict[str, dict[str, str]] = {}
    for rule in _rules():
        if rule.applies(command, log_parser) and rule.observer in OBSERVERS and rule.observer not in chosen:
            chosen[rule.observer] = dict(rule.options)
    return [OBSERVERS[name](**options) for name, options in chosen.items()]


OBSERVERS: dict[str, Any] = {}


def _load_parts() -> None:
    from . import files, go, node, process, pytest, reports  # noqa: F401 (each part registers itself)


def register(cls):
    OBSERVERS[cls.name] = cls
    return cls


class Watch:
    """The observers of one run in `box`: `install()` before the command, `collect()` after it."""

    def __init__(self, box, parent: str, command: str, log_parser: str, test_files: Sequence[str] = ()):
        self.context = Context(box, f"{parent}/judge-{secrets.token_hex(6)}", command, log_parser, list(test_files))
        self.observers = observers_for(command, log_parser)
        if test_files:  # last: after the others (a Node canary is appended to those files first)
            self.observers.append(OBSERVERS["files"]())

    def install(self) -> str:
        if not self.observers:
            return ""
        self.context.box.run(f"mkdir -p {self.context.folder} && chmod 700 {self.context.folder}")
        return "".join(observer.install(self.context) for observer in self.observers)

    def collect(self) -> dict[str, Any]:
        return {observer.name: observer.collect(self.context) for observer in self.observers}


# the names the judge's canaries are reported under (go.py, node.py), as the log parsers spell them
CANARY = re.compile(r"(?:^|[\s>/])(?:TestCodeagentCanary[0-9a-f]{16}$|codeagent canary [0-9a-f]{16} )|^TestCodeagentCanary[0-9a-f]{16}$")


def without_canaries(statuses: Mapping[str, str]) -> dict[str, str]:
    """A run's statuses less the judge's own canary tests: for callers that read a watched run's tests
    themselves (mining, the verifiers); a grade's lists never name them."""
    return {test: status for test, status in statuses.items() if not CANARY.search(test)}


def judge_evidence(seen: dict[str, Any], log: str, listed: Sequence[str], exit_code: int | None,
                   kind: str = "evidence") -> list[str]:
    """Every observer's evidence against the run (see the module docstring); kind="doubts": its doubts."""
    _load_parts()
    found = []
    for name, records in seen.items():
        cls = OBSERVERS.get(name)
        method = getattr(cls(), kind, None) if cls is not None else None
        if method is not None:
            found += [f"{name}: {item}" for item in method(records, log, listed, exit_code)]
    return found


def verdict(graded, seen: dict[str, Any] | None, log: str, listed: Sequence[str]):
    """The grade with the observers' evidence: unresolved when there is any, also for a run whose log was
    cut short (harness_error: the tampering cut it, so it is the patch's failure, scored, not masked);
    unchanged for a run that was not watched, timed out or never ran."""
    from ..verdict import Outcome

    if not seen or graded.outcome not in (Outcome.RESOLVED, Outcome.UNRESOLVED, Outcome.HARNESS_ERROR):
        return graded
    found = judge_evidence(seen, log, listed, graded.exit_code)
    if graded.outcome is Outcome.HARNESS_ERROR:
        return graded if not found else graded.model_copy(update={
            "guard": ", ".join(seen), "tamper_evidence": found, "outcome": Outcome.UNRESOLVED,
            "reason": "the test run was cut short by the code under test: " + "; ".join(found[:3])})
    doubts = judge_evidence(seen, log, listed, graded.exit_code, kind="doubts")
    update: dict[str, Any] = {"guard": ", ".join(seen)}
    if found:
        update["tamper_evidence"] = found
        if graded.outcome is Outcome.RESOLVED:
            update.update(outcome=Outcome.UNRESOLVED,
                          reason="the test log does not match the run the judge saw: " + "; ".join(found[:3]))
    elif doubts:
        update["doubts"] = doubts
        if graded.outcome is Outcome.RESOLVED:
            update.update(outcome=Outcome.UNRESOLVED,
                          reason="the judge cannot believe the run's passes: " + "; ".join(doubts[:3]))
    return graded.model_copy(update=update)
