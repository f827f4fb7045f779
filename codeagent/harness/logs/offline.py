"""Which failing tests tried to reach the network: the tests run with none (only declared
services), so a connection error is the environment's doing, not the patch's. Read from the log:
pytest's failure sections (`____ test_name ____`) and short summary lines (`FAILED id - error`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .parsers import parse_log

NETWORK_ERROR = re.compile(
    r"Name or service not known|Temporary failure in name resolution|Network is unreachable"
    r"|No address associated with hostname|nodename nor servname|Failed to establish a new connection"
    r"|\bConnectionError\b|getaddrinfo failed")
_SECTION = re.compile(r"^_{3,} (?:ERROR (?:at \w+ of |collecting ))?(.+?) _{3,}$")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+)")
FAILING = ("FAILED", "ERROR")
EVIDENCE_LINES = 5


def network_failures(log_parser: str, log: str, wanted: Sequence[str] = ()) -> dict[str, Any]:
    """{"tried_network": bool, "tests": failing test ids whose failure shows a network error,
    "evidence": a few of the log's lines that say so}."""
    statuses = parse_log(log_parser, log)
    failing = [test for test, status in statuses.items() if status in FAILING]
    failing += [test for test in wanted if test not in statuses and test not in failing]
    tests: list[str] = []
    evidence: list[str] = []
    section = None
    for line in log.splitlines():
        header = _SECTION.match(line.strip())
        if header:
            section = header.group(1)
            continue
        if not NETWORK_ERROR.search(line):
            continue
        if len(evidence) < EVIDENCE_LINES:
            evidence.append(line.strip()[:300])
        summary = _SUMMARY.match(line)
        named = [summary.group(1)] if summary and summary.group(1) in failing else _named(section, failing)
        tests += [test for test in named if test not in tests]
    return {"tried_network": bool(evidence), "tests": tests, "evidence": evidence}


def _named(section: str | None, failing: list[str]) -> list[str]:
    """The failing ids a pytest section title names (`test_x`, `Class.test_x`, `test_x[param]`)."""
    if not section:
        return []
    tail = section.replace(".", "::")
    return [test for test in failing if test == section or test.endswith("::" + tail)
            or test.rsplit("::", 1)[-1] == section]
