"""A tamper-evident pytest run (issue 21, item 1): the test log is checked against what a plugin
of codeagent's saw, so a patch cannot pass by rewriting pytest's reports or by printing PASSED lines
and leaving early.

The code under test runs inside the test process, so judging by the paths a patch touches
(integrity.py) misses a trick that lives in the module under test: at import it can wrap pytest's
report factory so that every report says passed, or write `PASSED <id>` lines to the log it finds
among its descriptors and call `os._exit(0)` before any test ran. So, for a test command that runs
pytest (`guarded()`):

1. `install()` puts pytest_guard_plugin.py into the container under a module name drawn for the run,
   inside a zip archive in a folder of its own (zipimport: pytest's assertion rewriter, which is the
   code under test when the repository is pytest, never touches it), with a random key, and returns
   the exports that load it first (`-p NAME` through PYTEST_ADDOPTS, the archive on PYTHONPATH). The
   plugin reads and deletes the key at import, before conftest files and test modules are imported,
   and signs every record with it; the records go to a file no descriptor of the process leads to; its
   helpers and state live in closures. See the plugin for what it records.
2. `collect()` reads the records back and keeps those whose signature holds.
3. `evidence()` compares them with the log: a session that started must have ended (an early exit
   has no end), no record may fail its signature, none of the watched pytest internals may have been
   replaced, and every listed test the log reports passing (PASSED, XFAIL, SKIPPED) must have been
   seen to run by the plugin with an outcome that allows that status: PASSED needs its setup and
   call to have raised nothing; SKIPPED a skip (or an xfail) in setup or call; XFAIL an xfail, or a
   failure of a test marked xfail. A failure the log reports is not checked: it never resolves.
   A listed id that is no node id (no `::`: junk some SWE-bench lists hold, such as pytest-5227's
   `[100%]`, which pytester output prints) names no test the plugin could see: it is not checked.

Any evidence makes the grade unresolved and is named in the report (`tamper_evidence`); rewards
and the regression verifier score it 0 (integrity.reasons). Honest runs give no evidence: the
plugin changes nothing the tests see (it takes itself off sys.path, PYTHONPATH and PYTEST_ADDOPTS).

A JUnit XML is not asked for: pytest writes it from the same reports the log is printed from, in the
same process, so it would add no view the plugin's report outcome does not give.

Not covered: runners other than pytest (Django's runtests.py, SymPy's bin/test), and commands that
reach pytest through another program (tox, a shell script); such runs are graded as before. The
plugin lives in the process it watches: its name is drawn per run and its helpers are closures, so an
attack that looks it up by name and replaces its helpers finds nothing to replace; code that reads its
way into the closures of pytest's registered hooks can still defeat it, and code that changes what a
test checks (not a watched function) is a fix as far as any runner can tell. The key is on disk from just before the test command until pytest loads the plugin:
a process already running then could read it, which in a fresh grading container means only one the
test command itself started (a `pre_test` step that runs the patch's code); in the rollout's own
sandbox (`rollout.grader: sandbox`) processes the model left behind run too (issue 21, item 7).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from importlib import resources
from typing import Any

from ..logs.parsers import parse_log
from .verdict import PYTEST_PARSERS, GradeReport, Outcome, _keys

_RUNS_PYTEST = re.compile(r"(?<![\w.-])(?:py\.test|pytest)(?![\w.-])")
MAX_RECORD_BYTES = 64 * 2**20
PASSING_STATUSES = frozenset({"PASSED", "XFAIL", "SKIPPED"})


def guarded(command: str) -> bool:
    """Whether the test command runs pytest itself (not through tox or a script)."""
    return bool(_RUNS_PYTEST.search(command))


class Guard:
    """One guarded test run in `box`: `install()` before, `collect()` after."""

    def __init__(self, box, parent: str):
        self.box = box
        self.folder = f"{parent}/guard-{secrets.token_hex(6)}"
        self.key = secrets.token_bytes(32)
        self.name = f"cg_{secrets.token_hex(6)}"  # the plugin's module name, drawn for the run

    def install(self) -> str:
        """Write the plugin (in a zip archive) and its key; the exports that load it (before the test command)."""
        from .box_files import put

        archive = f"{self.folder}/plugin.zip"
        self.box.run(f"mkdir -p {self.folder}")
        put(self.box, {archive: plugin_archive(self.name), f"{self.folder}/key": self.key.hex().encode()}, mode=0o600)
        return (f'export PYTHONPATH="{archive}${{PYTHONPATH:+:$PYTHONPATH}}"; '
                f'export PYTEST_ADDOPTS="-p {self.name}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}"; ')

    def collect(self) -> dict[str, Any]:
        """The records the plugin signed: sessions started and ended, the last record of each test's
        phases, the internals it saw replaced, and how many lines did not verify."""
        try:
            raw = self.box.read_file(f"{self.folder}/records", max_bytes=MAX_RECORD_BYTES)
        except FileNotFoundError:
            raw = b""
        except OSError as exc:  # over the cap: what was written there is not what the plugin writes
            return {"started": 0, "ended": 0, "tests": {}, "replaced": [], "unverified": 1, "error": str(exc)}
        return read_records(raw, self.key.hex().encode())


def plugin_archive(name: str) -> bytes:
    """A zip archive that holds pytest_guard_plugin.py as the module `name` (fixed times: the same bytes
    for the same name)."""
    import io
    import zipfile

    source = resources.files(__package__).joinpath("pytest_guard_plugin.py").read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(f"{name}.py", date_time=(2020, 1, 1, 0, 0, 0)), source)
    return buffer.getvalue()


def read_records(raw: bytes, key: bytes) -> dict[str, Any]:
    records: dict[str, Any] = {"started": 0, "ended": 0, "tests": {}, "replaced": [], "unverified": 0, "exit": []}
    replaced: set[str] = set()
    for line in raw.splitlines():
        body, _, mac = line.rpartition(b" ")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        try:
            record = json.loads(body) if hmac.compare_digest(mac, expected) else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            records["unverified"] += 1
            continue
        kind = record.get("k")
        replaced.update(record.get("replaced") or [])
        if kind == "start":
            records["started"] += 1
            records["distributed"] = records.get("distributed", False) or bool(record.get("distributed"))
        elif kind == "end":
            records["ended"] += 1
            records["exit"].append(record.get("exit"))
        elif kind == "phase":
            phases = records["tests"].setdefault(str(record.get("id")), {})
            if record.get("when") == "setup":
                phases.clear()  # a test run again (a rerun plugin): its last run counts
            phases[str(record.get("when"))] = record.get("raw")
            phases["xfail"] = bool(record.get("xfail"))
    records["replaced"] = sorted(replaced)
    return records


def allowed(phases: dict[str, Any]) -> set[str]:
    """The passing statuses a log may give a test whose phases the plugin saw as `phases`."""
    setup, call = phases.get("setup"), phases.get("call")
    found = set()
    if setup == "passed" and call == "passed":
        found.add("PASSED")
    if "skipped" in (setup, call):
        found.add("SKIPPED")
    if "xfailed" in (setup, call) or (phases.get("xfail") and call == "failed"):
        found |= {"XFAIL", "SKIPPED"}  # old pytest reports an xfail as skipped
    return found


def evidence(records: dict[str, Any], log_parser: str, log: str, listed: list[str]) -> list[str]:
    """Why the log cannot be taken as the run that happened; empty when the two agree."""
    found = []
    if records.get("unverified"):
        found.append(f"{records['unverified']} record(s) of the guard do not verify: something else wrote there")
    if not records.get("started"):
        found.append("the guard saw no pytest session start: its plugin did not load or its records were removed")
    elif records.get("ended", 0) < records["started"]:
        found.append("a pytest session did not reach its end: the test process exited early")
    if records.get("replaced"):
        found.append("pytest internals replaced during the run: " + ", ".join(records["replaced"][:10]))
    if records.get("distributed"):
        return found  # pytest-xdist: the tests ran in workers the plugin does not see; the session checks stand
    statuses = parse_log(log_parser, log)
    seen: dict[str, list[dict[str, Any]]] = {}  # several node ids may read as one (a parameter cut at a space)
    for test_id, phases in records.get("tests", {}).items():
        # spelled as the parser spells the log's ids (`-rA` summaries, or `--verbose` lines: SWE-smith's)
        for key in parse_log(log_parser, f"PASSED {test_id}") or parse_log(log_parser, f"{test_id} PASSED"):
            seen.setdefault(key, []).append(phases)
    for test in dict.fromkeys(listed):
        if "::" not in test:
            continue  # not a node id: junk of some SWE-bench lists (pytest-5227's `[100%]`), which no test is
        keys = _keys(statuses, test)
        status = statuses[keys[-1]] if keys else None
        if status not in PASSING_STATUSES:
            continue
        runs = [phases for phases in seen.get(keys[-1], []) if "setup" in phases]
        if not runs:
            found.append(f"{test}: the log says {status}, the guard did not see it run")
        elif not any(status in allowed(phases) for phases in runs):
            saw = "; ".join(", ".join(f"{when} {phases[when]}" for when in ("setup", "call") if when in phases)
                            for phases in runs)
            found.append(f"{test}: the log says {status}, the guard saw {saw}")
    return found


def verdict(graded: GradeReport, records: dict[str, Any] | None, log_parser: str, log: str,
            listed: list[str]) -> GradeReport:
    """The grade with the guard's evidence (unresolved when there is any); unchanged for a run that
    was not guarded or did not complete (it is not resolved then anyway)."""
    if records is None or log_parser not in PYTEST_PARSERS or graded.outcome not in (Outcome.RESOLVED,
                                                                                     Outcome.UNRESOLVED):
        return graded
    found = evidence(records, log_parser, log, listed)
    if not found:
        return graded.model_copy(update={"guard": "pytest"})
    update: dict[str, Any] = {"guard": "pytest", "tamper_evidence": found}
    if graded.outcome is Outcome.RESOLVED:
        update.update(outcome=Outcome.UNRESOLVED, reason="the test log does not match the run the guard saw: "
                                                         + "; ".join(found[:3]))
    return graded.model_copy(update=update)
