"""Rows of the multilingual task formats into Task, one function each (loaders.py registers them).

What each format holds (read from the projects' own code and data cards; facts, not their code):

- SWE-bench Multilingual: SWE-bench's schema as it is (instance_id, repo, base_commit, patch,
  test_patch, problem_statement, version, FAIL_TO_PASS, PASS_TO_PASS). Its `version` is the key of the
  repository's environment spec (evals/environments/languages/<owner>__<name>.yaml; usually the pull
  request's number), so a row without one cannot be run. Its repositories are those of
  evals/environments/languages/_split.yaml: that is how a row is told from a Python SWE-bench row.
- Multi-SWE-bench: one row per pull request: org, repo, number, base {label, ref, sha}, fix_patch (the
  gold fix), test_patch, resolved_issues [{number, title, body}], and the tests as maps of test name ->
  {run, test, fix}: the test's status with no patch, with the test patch, and with both (PASS, FAIL,
  SKIP, NONE). f2p_tests fail before and pass after; s2p_tests were skipped and n2p_tests absent
  before (new tests), and pass after: a fix must make all three pass. p2p_tests pass throughout.
  Its prebuilt images are `mswebench/<org>_m_<repo>:pr-<number>` (lower case), the repository at
  /home/<repo> (recorded on the task, not pulled: codeagent's pulled images have SWE-bench's layout).
- SWE-PolyBench: instance_id, repo (owner/name), base_commit, patch, test_patch, problem_statement,
  language (Java, JavaScript, TypeScript or Python), F2P and P2P (a list written as a Python literal),
  test_command, Dockerfile (the instance's environment), modified_nodes (JSON). Its log parsers are
  its own classes, none of codeagent's: the task carries the test command, not a parser.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from typing import Any

import yaml

from ..assets import asset_path
from ..task import Task
from .errors import DatasetError, TaskFormatError
from .swebench import validate_row

MULTI_SWE_IMAGE = "mswebench/{org}_m_{repo}:pr-{number}"
# PolyBench's languages -> the toolchain names of languages/*.yaml (Python: the Python route as before)
POLYBENCH_TOOLCHAINS = {"java": "java", "javascript": "node", "typescript": "node"}


@lru_cache(maxsize=1)
def multilingual_repos() -> frozenset[str]:
    """owner/name of every repository of SWE-bench Multilingual (evals/environments/languages/_split.yaml)."""
    data = yaml.safe_load(asset_path("evals", "environments", "languages", "_split.yaml").read_text())
    return frozenset(data["repos"])


def is_swebench_multilingual(row: dict[str, Any]) -> bool:
    repo = row.get("repo")
    return "base_commit" in row and "FAIL_TO_PASS" in row and isinstance(repo, str) and repo in multilingual_repos()


def is_multi_swe_bench(row: dict[str, Any]) -> bool:
    return "org" in row and "number" in row and "fix_patch" in row


def is_polybench(row: dict[str, Any]) -> bool:
    return "F2P" in row and "language" in row


def swebench_multilingual_task(row: dict[str, Any], where: str) -> Task:
    _need(row, where, "version")
    try:
        checked = validate_row(row, where)
    except DatasetError as error:
        raise TaskFormatError(str(error)) from None
    task = Task.from_swebench(checked)
    task.task_format = "swebench-multilingual"
    return task


def multi_swe_bench_task(row: dict[str, Any], where: str) -> Task:
    _need(row, where, "org", "repo", "fix_patch")
    number = row.get("number")
    if isinstance(number, bool) or not isinstance(number, (int, str)) or not str(number).strip().isdigit():
        raise TaskFormatError(f"{where}: missing or bad field 'number' (the pull request's number)")
    org, name, number = row["org"], row["repo"], int(number)
    base = _mapping(row.get("base"), where, "base")
    if not isinstance(base.get("sha"), str) or not base["sha"].strip():
        raise TaskFormatError(f"{where}: missing or empty field 'base.sha' (the base commit)")
    tests = {key: _test_map(row.get(key), where, key) for key in ("f2p_tests", "s2p_tests", "n2p_tests", "p2p_tests")}
    # s2p (skipped before) and n2p (absent before, new tests) must pass after the fix just as f2p must:
    # all three are what SWE-bench calls FAIL_TO_PASS.
    f2p = list(dict.fromkeys([*tests["f2p_tests"], *tests["s2p_tests"], *tests["n2p_tests"]]))
    if not f2p:
        raise TaskFormatError(f"{where}: no test to fix: f2p_tests, s2p_tests and n2p_tests are all empty")
    known = {"org", "repo", "number", "base", "fix_patch", "test_patch", "resolved_issues", "instance_id",
             "f2p_tests", "s2p_tests", "n2p_tests", "p2p_tests"}
    return Task(repo=f"https://github.com/{org}/{name}.git", base_commit=base["sha"],
                instance_id=row.get("instance_id") or f"{org}__{name}-{number}",
                problem_statement=_issues(row.get("resolved_issues"), where),
                test_patch=row.get("test_patch") or "", gold_patch=row["fix_patch"],
                FAIL_TO_PASS=f2p, PASS_TO_PASS=list(tests["p2p_tests"]), version=str(number),
                extra={"task_format": "multi-swe-bench", "swebench_repo": f"{org}/{name}",
                       # its own image, recorded, not used: a pulled image here means SWE-bench's layout
                       "multi_swe_bench": {"image": MULTI_SWE_IMAGE.format(org=org, repo=name, number=number).lower(),
                                           "workdir": f"/home/{name}", "base_ref": base.get("ref")},
                       "test_statuses": {key: value for key, value in tests.items() if value},
                       **{k: v for k, v in row.items() if k not in known}})


def polybench_task(row: dict[str, Any], where: str) -> Task:
    _need(row, where, "instance_id", "repo", "base_commit", "problem_statement", "language", "test_command")
    f2p = _literal_list(row.get("F2P"), where, "F2P")
    if not f2p:
        raise TaskFormatError(f"{where}: field 'F2P' is empty: no test to fix")
    language = row["language"]
    extra: dict[str, Any] = {"task_format": "swe-polybench", "swebench_repo": row["repo"], "language": language}
    toolchain = POLYBENCH_TOOLCHAINS.get(language.lower())
    if toolchain:
        # the task's own environment: PolyBench's repositories (gson, three.js) may also have a
        # Multilingual spec file, whose versions are not PolyBench's instances
        extra["environment"] = {"language": toolchain, "test_cmd": row["test_command"]}
    if row.get("Dockerfile"):
        extra["dockerfile"] = row["Dockerfile"]
    if row.get("modified_nodes"):
        extra["modified_nodes"] = _json(row["modified_nodes"], where, "modified_nodes")
    known = {"instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "language", "F2P",
             "P2P", "test_command", "Dockerfile", "modified_nodes"}
    return Task(repo=f"https://github.com/{row['repo']}.git", base_commit=row["base_commit"],
                instance_id=row["instance_id"], problem_statement=row["problem_statement"],
                test_patch=row.get("test_patch") or "", gold_patch=row.get("patch"), test_command=row["test_command"],
                FAIL_TO_PASS=f2p, PASS_TO_PASS=_literal_list(row.get("P2P"), where, "P2P"),
                extra={**extra, **{k: v for k, v in row.items() if k not in known}})


def _need(row: dict[str, Any], where: str, *fields: str) -> None:
    for name in fields:
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise TaskFormatError(f"{where}: missing or empty field {name!r}")


def _json(value: Any, where: str, name: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise TaskFormatError(f"{where}: field {name!r} is not valid JSON") from None


def _mapping(value: Any, where: str, name: str) -> dict[str, Any]:
    value = _json(value, where, name)
    if not isinstance(value, dict):
        raise TaskFormatError(f"{where}: missing field {name!r} (an object)")
    return value


def _test_map(value: Any, where: str, name: str) -> dict[str, Any]:
    """{test name: {run, test, fix}} (absent or null: no test)."""
    if value is None:
        return {}
    value = _mapping(value, where, name)
    if not all(isinstance(status, dict) for status in value.values()):
        raise TaskFormatError(f"{where}: field {name!r} must map test names to {{run, test, fix}} statuses")
    return value


def _issues(value: Any, where: str) -> str:
    issues = _json(value, where, "resolved_issues")
    if not isinstance(issues, list) or not issues:
        raise TaskFormatError(f"{where}: missing or empty field 'resolved_issues' (the problem statement comes "
                              f"from the issues the pull request resolves)")
    parts = []
    for issue in issues:
        if not isinstance(issue, dict) or not (issue.get("title") or issue.get("body")):
            raise TaskFormatError(f"{where}: field 'resolved_issues' must hold issues with a title or a body")
        parts.append("\n\n".join(str(issue[key]).strip() for key in ("title", "body") if issue.get(key)))
    return "\n\n".join(parts)


def _literal_list(value: Any, where: str, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError):
            raise TaskFormatError(f"{where}: field {name!r} is not a list of test names") from None
    if hasattr(value, "tolist"):  # a numpy array, from parquet
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TaskFormatError(f"{where}: field {name!r} must be a list of test names")
    return value
