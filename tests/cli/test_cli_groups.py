"""The command line's front door is cli/: every click group `codeagent` mounts, and every command in them, is
defined there (the work each command does stays in its package: train/commands.py, serve/commands.py, ...)."""

from __future__ import annotations

import click

from codeagent.cli import cli

NOT_YET_MOVED: set[str] = set()  # paths of groups still defined outside cli/: none
# commands (not groups) still defined outside cli/: none
COMMANDS_NOT_YET_MOVED: set[str] = set()


def groups(group: click.Group, path: str = "codeagent") -> dict[str, str]:
    """{command path: the module defining it} for `group` and every group under it."""
    found = {path: group.callback.__module__ if group.callback else type(group).__module__}
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if isinstance(command, click.Group):
            found |= groups(command, f"{path} {name}")
    return found


def test_every_command_group_is_defined_in_cli():
    defined = groups(cli)
    assert {"codeagent", "codeagent traj", "codeagent eval", "codeagent train"} <= set(defined)
    outside = {path: module for path, module in defined.items()
               if not module.startswith("codeagent.cli") and path not in NOT_YET_MOVED}
    assert outside == {}


def test_traj_grade_is_defined_with_the_traj_group():
    traj = cli.get_command(click.Context(cli), "traj")
    assert isinstance(traj, click.Group)
    grade = traj.get_command(click.Context(traj), "grade")
    assert grade is not None and grade.callback is not None
    assert grade.callback.__module__ == traj.callback.__module__ == "codeagent.cli.traj_commands"


def test_every_command_is_defined_in_cli():
    """Not only the groups: `codeagent serve` and each `codeagent train X` are click definitions of cli/ too."""
    def commands(group: click.Group, path: str) -> dict[str, str]:
        found = {}
        context = click.Context(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None and command.callback is not None
            found[f"{path} {name}"] = command.callback.__module__
            if isinstance(command, click.Group):
                found |= commands(command, f"{path} {name}")
        return found

    defined = commands(cli, "codeagent")
    assert {"codeagent serve", "codeagent train sft", "codeagent train grpo", "codeagent traj grade"} <= set(defined)
    outside = {path: module for path, module in defined.items()
               if not module.startswith("codeagent.cli") and path not in COMMANDS_NOT_YET_MOVED}
    assert outside == {}
