"""The evaluation harness: a task's environment (images built from specs, or prebuilt ones pulled) and
grading a patch in it, with SWE-bench's rule and codeagent's integrity checks.

Doors (the only modules code outside harness/ imports; pyproject's import-linter contract keeps it so):
    env_images.py      a task's images: built from its spec or pulled (image_source, built_images, pulled)
    env_sandbox.py     the agent's sandboxes in a task's image
    env_grade.py       grade a patch on a task (grade_patch, grade_in_sandbox, grade_shipped)
    env_tests.py       run a test plan in a task's image (mining's validation, the verifiers)
    this module        the other names outside code needs, imported lazily (`codeagent --help` stays fast)

Rooms (sub-packages; a room imports only the rooms below it):
    grading/    the verdict (verdict.py), the flow that applies a patch and runs a plan (plan.py, task_env.py),
                integrity rules, the tamper-evident pytest run (guard.py + pytest_guard_plugin.py, package
                data copied into the container), the judge (judge/), prebuilt images' rules (prebuilt_rules.py)
    toolchain/  a repository's toolchains by evidence (detect.py), its test command (test_command.py), the
                layers that install them (deps.py), a user's repository's environment (resolve.py), a
                language task's images (images.py)
    images/     tasks whose images are pulled from a registry (prebuilt.py)
    layers/     one image layer (layer.py), SWE-bench's Python images (python_env.py), devcontainers, sidecar
                services
    specs/      environment specs (swebench.py, languages.py and the files, model, overrides they read) and
                which tests to run (directives.py)
    logs/       a test log -> {test id: status} (parsers.py and one module per language), offline failures
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .grading import integrity as integrity
    from .grading.integrity import reasons as reasons
    from .grading.integrity import zeroed as zeroed
    from .grading.task_env import TaskEnvironment as TaskEnvironment
    from .images import prebuilt as prebuilt
    from .images.prebuilt import mark as mark
    from .logs.parsers import PASSING as PASSING
    from .logs.parsers import parse_log as parse_log
    from .specs.directives import test_command as test_command
    from .specs.files import load_library as load_library
    from .specs.model import SpecError as SpecError
    from .specs.swebench import spec_for as spec_for
    from .toolchain.resolve import Environment as Environment
    from .toolchain.resolve import TestReport as TestReport
    from .toolchain.resolve import detect as detect
    from .toolchain.resolve import resolve as resolve
    from .toolchain.resolve import test_report as test_report
    from .toolchain.test_command import human_test_command as human_test_command

# name -> (module, attribute; None: the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "integrity": (".grading.integrity", None),
    "reasons": (".grading.integrity", "reasons"),
    "zeroed": (".grading.integrity", "zeroed"),
    "TaskEnvironment": (".grading.task_env", "TaskEnvironment"),
    "prebuilt": (".images.prebuilt", None),
    "mark": (".images.prebuilt", "mark"),
    "PASSING": (".logs.parsers", "PASSING"),
    "parse_log": (".logs.parsers", "parse_log"),
    "test_command": (".specs.directives", "test_command"),
    "load_library": (".specs.files", "load_library"),
    "SpecError": (".specs.model", "SpecError"),
    "spec_for": (".specs.swebench", "spec_for"),
    "Environment": (".toolchain.resolve", "Environment"),
    "TestReport": (".toolchain.resolve", "TestReport"),
    "detect": (".toolchain.resolve", "detect"),
    "human_test_command": (".toolchain.test_command", "human_test_command"),
    "resolve": (".toolchain.resolve", "resolve"),
    "test_report": (".toolchain.resolve", "test_report"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = import_module(module_name, __name__)
    return module if attribute is None else getattr(module, attribute)
