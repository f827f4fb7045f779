"""The judge's part for JVM builds: Maven Surefire (and Failsafe) and Gradle (see __init__.py).

Surefire runs the tests in a forked JVM and writes the JUnit XML reports from the Maven process, with
what the fork tells it; the graded command then prints those reports (parser `junit_xml`) or Maven's
own lines (parser `maven`). The code under test runs in the fork: it can end the fork with System.exit
or Runtime.halt before its failures are told, and leave report files that are not the run's (shipped
in the patch, or written by the fork itself). So:

- before the command, every report folder already there (`target/surefire-reports`, `failsafe-reports`,
  Gradle's `build/test-results`) is moved out of the repository into the judge's folder: the command
  reads only what this run wrote (a shipped report is also flagged as test infrastructure: integrity.py);
- `mvn` is, first on PATH, languages/judge/mvn_wrapper.sh: it records that each Maven run started and
  how it ended;
- evidence, whatever the log says: a Maven run never ended or was killed by a signal (the test JVM
  killed its parents: a dead Maven prints no failure, and what the log then says was printed, or the
  reports written, by the tests themselves; a log cut short by it is the code's doing, not the harness's);
- evidence, when the log reports a listed test passing: Maven says the test JVM died without saying
  goodbye (its "Crashed tests"), or Maven's own summary names as failing a listed test the log reports
  passing (a report written over the real one).

Not caught: code that knows Surefire's reports and writes a passing one after Surefire's, while
Maven's summary is kept quiet (a fork that tells Surefire its test passed, speaking its protocol);
Maven started by a path (`./mvnw`) rather than by name; Gradle's daemon.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from ...logs.parsers import PASSING, parse_log
from . import Context, put, read, register, source

REPORT_FOLDERS = ("*/target/surefire-reports", "*/target/failsafe-reports", "*/build/test-results")
_DIED = re.compile(r"The forked VM terminated without properly saying goodbye|There was an error in the forked process"
                   r"|The forked VM terminated|SurefireBooterForkException")
_CRASHED = re.compile(r"^\[ERROR\]\s+Crashed tests:\s*$")
_METHOD_FAILED = re.compile(r"^\[ERROR\]\s+([\w.$]+)\.(\w+)\s+--\s+Time elapsed.*<<<\s*(?:FAILURE|ERROR)!")
_SUMMARY_ENTRY = re.compile(r"^\[ERROR\]\s{2,}(?:[\w.$]+\.)?(\w[\w$]*)\.(\w+)[:(\s]")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@register
class ReportsObserver:
    name = "reports"

    def install(self, context: Context) -> str:
        box, folder = context.box, context.folder
        found = " -o ".join(f"-path '{pattern}'" for pattern in REPORT_FOLDERS)
        box.run(f"mkdir -p {folder}/before {folder}/bin && n=0; find . \\( {found} \\) -prune -type d -print 2>/dev/null | "
                f"while IFS= read -r old; do n=$((n+1)); mv -- \"$old\" {folder}/before/$n && "
                f"printf '%s\\n' \"$old\" >> {folder}/moved; done", timeout=300)
        real = box.run("command -v mvn").output.strip().splitlines()
        if not real or not real[-1].startswith("/"):
            return ""
        put(box, {f"{folder}/bin/mvn": source("mvn_wrapper.sh", real=real[-1], dir=folder)}, mode=0o755)
        return f"export PATH={shlex.quote(folder + '/bin')}:\"$PATH\"; "

    def collect(self, context: Context) -> dict[str, Any]:
        moved = read(context.box, f"{context.folder}/moved")
        builds = context.box.run(f"( cd {context.folder} && for f in mvn.*; do [ -f \"$f\" ] && tr '\\n' ' ' < \"$f\" "
                                 "&& echo; done )", timeout=60).output
        return {"parser": context.log_parser, "moved": moved.splitlines()[:100], "builds": builds.splitlines()[:200]}

    def evidence(self, seen: dict[str, Any], log: str, listed: Sequence[str], exit_code: int | None) -> list[str]:
        # a build its tests killed is evidence whatever the log says: the run that should have told the results
        # was cut by the code under test (a log with no result then must not read as a harness failure)
        found = [problem for problem in map(_build_problem, seen.get("builds") or []) if problem][:3]
        statuses = parse_log(seen.get("parser") or "junit_xml", log)
        passing = [test for test in listed if statuses.get(test) in PASSING or statuses.get(test) == "SKIPPED"]
        if not passing:
            return found
        lines = [_ANSI.sub("", line) for line in log.splitlines()]
        if any(_DIED.search(line) for line in lines):
            crashed = _crashed(lines)
            found.append("the test JVM ended without saying goodbye to Surefire (System.exit or halt in the code "
                         "under test?)" + (f"; crashed: {', '.join(crashed[:5])}" if crashed else ""))
        failing = _failing_methods(lines)
        for test in passing:
            klass, method = _split(test)
            if (klass.rsplit(".", 1)[-1], method) in failing:
                found.append(f"{test}: the log reports it passing, Maven's own summary reports it failing")
        return found


def _build_problem(record: str) -> str | None:
    """Why a Maven run (the wrapper's record: `start`, then `end STATUS`) cannot have told the results."""
    words = record.split()
    if "end" not in words:
        return "a Maven build never ended: it was killed during the tests (with the wrapper that watched it)"
    status = words[words.index("end") + 1] if len(words) > words.index("end") + 1 else ""
    if status.isdigit() and int(status) > 128:
        return f"a Maven build was killed by signal {int(status) - 128} during the tests"
    return None


def _crashed(lines: list[str]) -> list[str]:
    found = []
    for index, line in enumerate(lines):
        if _CRASHED.match(line):
            for following in lines[index + 1:index + 20]:
                name = following.removeprefix("[ERROR]").strip()
                if not re.fullmatch(r"[\w.$]+", name):
                    break
                found.append(name)
    return sorted(set(found))


def _failing_methods(lines: list[str]) -> set[tuple[str, str]]:
    """(simple class name, method) of every test Maven's own output reports failed or in error."""
    found = set()
    for line in lines:
        match = _METHOD_FAILED.match(line) or _SUMMARY_ENTRY.match(line)
        if match:
            found.add((match.group(1).rsplit(".", 1)[-1], match.group(2)))
    return found


def _split(test: str) -> tuple[str, str]:
    """`pkg.Class.method`, `pkg.Class#method`, `Class.method(...)` -> (class, method)."""
    test = test.split("(", 1)[0].split("[", 1)[0]
    if "#" in test:
        klass, _, method = test.partition("#")
    else:
        klass, _, method = test.rpartition(".")
    return klass, method
