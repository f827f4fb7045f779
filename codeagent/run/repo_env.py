"""The sandbox's image for a user's repository (harness/toolchain/resolve.py): its devcontainer when the
user trusts the repository, else `sandbox.image` when set, else its toolchain, said in one line before
the sandbox starts."""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, repository_trusted
from ..harness import Environment, resolve
from ..sandbox import RepoSnapshot, snapshot


def repository_environment(snap: RepoSnapshot, config: Config, say: Callable[[str], None],
                           warn: Callable[[str], None] | None = None) -> Environment:
    """The environment of the repository at `snap` under `config` (its sandbox.image, whether the
    user trusts the repository: trusted_projects, or --trust), said with `say`; what failed to be set
    up (a step, its log, its last lines) with `warn` (default: `say`, as `warning: ...`)."""
    environment = resolve(snap, config.sandbox.image, log=say, trusted=repository_trusted(config, snap.source))
    say(environment.line)
    for text in environment.warnings:
        (warn or (lambda line: say(f"warning: {line}")))(text)
    return environment


def with_repository_environment(config: Config, repo: str, commit: str | None,
                                say: Callable[[str], None]) -> Config:
    """`config` whose sandbox.image is the repository's environment (the same config for a local sandbox)."""
    if config.sandbox.kind != "docker":
        return config
    image = repository_environment(snapshot(repo, commit), config, say).image
    if image == config.sandbox.image:
        return config
    return config.model_copy(update={"sandbox": config.sandbox.model_copy(update={"image": image})})


def repository_tests(snap: RepoSnapshot):
    """The repository's own tests in their graded form (a TestReport: command, log parser): its toolchain's
    (harness/toolchain/test_command.py), else pytest where its files say so; None when neither is found."""
    from ..harness import TestReport, test_report
    from ..scaling.test_command import detect_in_git

    report = test_report(snap)
    if report is None and (found := detect_in_git(str(snap.git_dir), snap.commit)):
        report = TestReport("python", found[0], "pytest")
    return report


def counted(report, output: str) -> str:
    """One line: how many tests the output reports, by status (its parser's reading)."""
    from collections import Counter

    from ..harness import parse_log

    statuses = Counter(parse_log(report.log_parser, output).values())
    if not statuses:
        return f"tests: none found in the output (read as {report.log_parser})"
    return "tests: " + ", ".join(f"{count} {status.lower()}" for status, count in statuses.most_common()) + \
        f" (read as {report.log_parser})"
