"""Where a task's images come from: decided here, and only here (`image_source`).

- `BuiltImages`: codeagent builds them from the task's environment spec (layers/python_env.py: base ->
  env -> instance, content-hashed, cached). The agent works in the instance image, the patch is
  graded in a fresh container of it, with the spec's test command, log parser and services.
- `PulledImages`: the task runs in a prebuilt image pulled from a registry (images/prebuilt.py: the official
  SWE-bench images with `--images official`, SWE-Gym, SWE-smith, R2E-Gym), prepared with codeagent's
  thin layer. The agent's image has the hidden tests taken out; grading uses the one that keeps them,
  with the layout's own plan (grading/prebuilt_rules.py).

- `LanguageImages`: a task in another language (Go, Rust, JavaScript, Java, C/C++; specs/languages.py says
  which): codeagent builds its toolchain, dependencies and instance layers (toolchain/images.py) and grades
  with its spec's test commands and log parser.

Every caller (eval, the regression verifier, GRPO rollouts, `traj grade`, `--prebuild`) asks
`image_source(task)` and uses what it gives; none reads the task's image mark itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..sandbox.workspace import RepoSnapshot
from ..task import Task
from .grading.plan import TestPlan

Phase = Callable[[str], None]

# Said where a repository given by URL cannot be cloned: the usual cause is a machine offline.
OFFLINE_HINT = ("the repository could not be cloned (offline, or no access?): pass --repos DIR, where DIR/owner/name "
                "is a git clone or mirror of each repository")


def pulled(task: Task) -> bool:
    """Does the task run in a pulled image (marked so by prebuilt.mark, or a format that names its image)?"""
    return (task.images or {}).get("source") in ("official", "prebuilt") or bool(task.docker_image)


@dataclass
class Grading:
    """Where and how a patch is graded: a fresh container of `image` standing on `workspace` (None: the
    task's repository), the `services` the tests reach, the plan; `facts` open the report."""

    image: str
    plan: TestPlan
    workspace: RepoSnapshot | None = None
    services: list[Any] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


class _Built:
    """Images codeagent builds itself: what its two sources share (`images()`: theirs)."""

    pulled = False
    sandbox_grades = True  # a fresh agent sandbox holds everything grading needs (the tests come as a patch)

    def __init__(self, task: Task):
        self.task = task

    def images(self, log_dir: Path | None = None, phase: Phase | None = None) -> Any:
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        raise NotImplementedError

    def prepare(self, log_dir: Path | None = None, phase: Phase | None = None) -> list[str]:
        """Build what is missing of the images; the layers built."""
        return self.images(log_dir, phase).built

    def agent_image(self, log_dir: Path | None = None, phase: Phase | None = None) -> tuple[str, RepoSnapshot]:
        """(the image the agent works in, the snapshot its sandboxes stand on)."""
        from ..sandbox.workspace import snapshot

        return self.images(log_dir, phase).instance, snapshot(self.task.repo, self.task.base_commit)

    def test_image(self, log_dir: Path | None = None, phase: Phase | None = None) -> str:
        """The image tests run in (built when missing)."""
        return self.images(log_dir, phase).instance

    @staticmethod
    def reason(error: Exception) -> str:
        """Why grading broke, as a harness error's reason."""
        return f"{type(error).__name__}: {error}"

    def unavailable(self, error: Exception) -> dict[str, Any]:
        """The report's fields when the images could not be had."""
        from ..sandbox.errors import CloneFailed

        missing = isinstance(error, CloneFailed)  # not the environment's defect: its repository is not here
        reason = f"{OFFLINE_HINT}. {error}" if missing else f"the environment could not be built: {error}"
        return {"reason": reason, **self.facts(), **({"repository_unavailable": True} if missing else {})}


class BuiltImages(_Built):
    """Images codeagent builds from the task's environment spec (harness/specs/swebench.py)."""

    @cached_property
    def spec(self):
        from .specs.swebench import spec_for

        return spec_for(self.task)

    @property
    def services(self) -> list[Any]:
        return list(self.spec.services)

    def images(self, log_dir: Path | None = None, phase: Phase | None = None):
        from .layers.python_env import task_images

        return task_images(self.task, self.spec, log_dir=log_dir, phase=phase)

    def facts(self) -> dict[str, Any]:
        spec = self.spec
        return {"python_requested": spec.python_requested, "python_used": spec.python_used,
                "python_fallback": spec.fallback, "log_parser": spec.log_parser}

    def plan(self, *, network: bool = False) -> TestPlan:
        from .grading.plan import spec_plan

        return spec_plan(self.task, self.spec, network=network)

    def grading(self, log_dir: Path | None = None, phase: Phase | None = None) -> Grading:
        images = self.images(log_dir, phase)
        facts = {"image": images.instance, **self.facts(),
                 "images": {"base": images.base, "system": images.system, "env": images.env,
                            **({"deps": images.deps} if images.deps else {}), "instance": images.instance},
                 "layers_built": images.built, "image_seconds": round(images.seconds, 2)}
        return Grading(images.instance, self.plan(network=True), services=self.services, facts=facts)


class LanguageImages(_Built):
    """A language task's images (toolchain/images.py), from its language spec (specs/languages.py)."""

    services: list[Any] = []

    @cached_property
    def spec(self):
        from .specs.languages import language_spec_for
        from .specs.model import SpecError

        spec = language_spec_for(self.task)
        if spec is None:
            raise SpecError(f"task {self.task.instance_id} is not a language task")
        return spec

    def images(self, log_dir: Path | None = None, phase: Phase | None = None):
        from .toolchain.images import language_images

        return language_images(self.task, self.spec, log_dir=log_dir, phase=phase)

    def facts(self) -> dict[str, Any]:
        """The language and the toolchain version the spec asks for ('' the repository's, else Debian's;
        `toolchain_fallback`: the recipe cannot install it, Debian's is used); what a spec that cannot
        be resolved still says (the report's opening, before any build)."""
        from .specs.model import SpecError

        try:
            spec = self.spec
        except SpecError:
            from .specs.languages import load_language_specs, task_environment
            from .specs.swebench import repo_name

            try:
                own = task_environment(self.task) or {}
                file = load_language_specs().get(repo_name(self.task))
            except SpecError:
                own, file = {}, None
            return {"language": own.get("language") or (file.language if file else "")}
        facts = {"language": spec.language, "toolchain_version": spec.toolchain_version or "", "log_parser": spec.log_parser}
        if spec.toolchain_version:
            from .toolchain.images import installs_versions

            facts["toolchain_fallback"] = not installs_versions(spec.language)  # True: Debian's is used instead
        return facts

    def plan(self, *, network: bool = False) -> TestPlan:
        from .grading.plan import language_plan

        return language_plan(self.task, self.spec, network=network)

    def grading(self, log_dir: Path | None = None, phase: Phase | None = None) -> Grading:
        images = self.images(log_dir, phase)
        facts = {"image": images.instance, **self.facts(), "toolchain": images.found.label,
                 "images": {"base": images.base, **images.layers}, "layers_built": images.built,
                 "image_seconds": round(images.seconds, 2)}
        return Grading(images.instance, self.plan(network=True), facts=facts)


class PulledImages:
    """A prebuilt image pulled from a registry, with codeagent's layer (harness/images/prebuilt.py)."""

    pulled = True
    sandbox_grades = False  # the hidden tests are not in the agent's image: graded in the grading image
    services: list[Any] = []

    def __init__(self, task: Task, registry: str | None = None):
        from .images.prebuilt import mark

        if registry and not (task.images or {}).get("registry"):  # the mirror unless the task names one
            task = mark([task], registry=registry)[0]
        self.task = task

    def prepare(self, log_dir: Path | None = None, phase: Phase | None = None) -> list[str]:
        from .images.prebuilt import prepare

        return prepare(self.task, log_dir).built

    def agent_image(self, log_dir: Path | None = None, phase: Phase | None = None) -> tuple[str, RepoSnapshot]:
        from .images.prebuilt import image_snapshot, prepare

        image = prepare(self.task, log_dir).agent
        return image, image_snapshot(image)

    def test_image(self, log_dir: Path | None = None, phase: Phase | None = None) -> str:
        from .images.prebuilt import prepare

        return prepare(self.task, log_dir).eval

    def grading(self, log_dir: Path | None = None, phase: Phase | None = None) -> Grading:
        from .grading.prebuilt_rules import layout_plan
        from .images.prebuilt import image_snapshot, prepare

        plan = layout_plan(self.task)
        images = prepare(self.task, log_dir)
        facts = {"image": images.remote, "images": {"remote": images.remote, "eval": images.eval, "agent": images.agent},
                 "layers_built": images.built, "log_parser": plan.log_parser}
        return Grading(images.eval, plan, workspace=image_snapshot(images.eval), facts=facts)

    def facts(self) -> dict[str, Any]:
        from .images.prebuilt import layout

        return {"image_source": (self.task.images or {}).get("source", "prebuilt"), "layout": layout(self.task)}

    @staticmethod
    def reason(error: Exception) -> str:
        from .images.prebuilt import PrebuiltImageError

        if isinstance(error, PrebuiltImageError):  # one line already: the image that cannot be had
            return str(error)
        first = str(error).strip().splitlines()
        return f"{type(error).__name__}: {first[0][:500] if first else ''}"

    def unavailable(self, error: Exception) -> dict[str, Any]:
        return {"reason": self.reason(error)}


ImageSource = BuiltImages | LanguageImages | PulledImages


def built_images(task: Task) -> BuiltImages | LanguageImages:
    """The images codeagent builds for the task: a language task's (specs/languages.py), else Python's."""
    from .specs.languages import is_language_task

    return LanguageImages(task) if is_language_task(task) else BuiltImages(task)


def image_source(task: Task, registry: str | None = None) -> ImageSource:
    """The one decision: are the task's images pulled, or built from codeagent's spec (a language's or
    Python's)? `registry`: the mirror pulled images come through, where the task names none."""
    return PulledImages(task, registry) if pulled(task) else built_images(task)
