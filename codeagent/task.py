"""What to solve: a repository at a commit and a problem statement, plus optional grading info.

A SWE-bench instance maps onto it field for field (`Task.from_swebench`). What the harness, the miner and the
trainers read beyond SWE-bench's fields are typed fields too (`EXTRA_FIELDS`); stored rows and trajectories keep
them under "extra", as they always were: a dict read in (`Task(**data)`, `Task.model_validate`) has them lifted
out of "extra", and `model_dump` puts back each one the task was given. Any other key stays in `extra`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import Self


class Task(BaseModel):
    repo: str  # a local path, a local git mirror, or a URL
    problem_statement: str
    base_commit: str | None = None  # None: HEAD of the repository
    instance_id: str = ""
    hints_text: str = ""
    test_patch: str | None = None
    test_command: str | None = None
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    version: str | None = None
    environment_setup_commit: str | None = None
    gold_patch: str | None = None

    # -- stored under "extra" (EXTRA_FIELDS) --
    # which data set, hence which image layout and grading rule: swebench (None), swe-gym, swe-smith, r2e-gym,
    # multi-swe-bench, swe-polybench, swebench-multilingual
    task_format: str | None = None
    swebench_repo: str | None = None  # owner/name of the repository (SWE-bench's `repo`; `repo` is where to clone)
    # its environment: a language task's toolchain, test command and log parser, or a Python spec's fields
    # (harness/specs/); a mapping or the same as JSON text
    environment: dict[str, Any] | str | None = None
    install_config: dict[str, Any] | str | None = None  # a SWE-bench spec given inline (harness/specs/overrides.py)
    log_parser: str | None = None  # how to read its test log (harness/logs/), with `test_command`; None: pytest
    docker_image: str | None = None  # the prebuilt image the data set names (SWE-Gym, SWE-smith, R2E-Gym)
    images: dict[str, str] | None = None  # the image choice recorded for the workers: source, namespace, registry
    bug_patch: str | None = None  # SWE-smith: the patch that makes the bug, applied in its image
    expected_output: dict[str, str] | None = None  # R2E-Gym: each hidden test's expected status
    # mined tasks (mine/): when and where from, and what the miner and its set-up agent found
    created_at: str | datetime | None = None  # the fix's date (ISO 8601)
    commit: str | None = None  # the unit's commit
    unit: str | None = None  # commit, or pull (a pull request's merge)
    head: str | None = None  # a pull request's head
    held: dict[str, Any] | None = None  # files held out of the test patch: {"patch", "files"}
    dropped_files: list[str] | None = None  # docs, changelogs, vendored files left out of the patches
    setup: dict[str, Any] | None = None  # what the set-up agent found and its model: {"model", "found"}
    provenance: dict[str, Any] | None = None  # a mined row's: the repository it came from, its validation
    repository_history: dict[str, Any] | None = None  # what history the run's sandbox had (run/history.py)
    toy_operator: str | None = None  # the toy family (data/toy.py): the right operator, the verb asked for
    toy_verb: str | None = None

    extra: dict[str, Any] = Field(default_factory=dict)  # anything else a row carries, kept as it came

    @model_validator(mode="before")
    @classmethod
    def _lift_typed_extra(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("extra"), dict):
            return data
        extra = dict(data["extra"])
        lifted = {name: extra.pop(name) for name in EXTRA_FIELDS if name in extra}
        if twice := sorted(name for name in lifted if name in data):
            raise ValueError(f"{', '.join(twice)}: given both as a field and in extra")
        return {**data, **lifted, "extra": extra}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; an `extra` in `update` has its typed keys set as the fields they are (not left in extra)."""
        if update is not None and isinstance(update.get("extra"), dict):
            extra = dict(update["extra"])
            update = {**update, **{name: extra.pop(name) for name in EXTRA_FIELDS if name in extra}, "extra": extra}
        return super().model_copy(update=update, deep=deep)

    @model_serializer(mode="wrap")
    def _lower_typed_extra(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        typed = {name: data.pop(name, None) for name in EXTRA_FIELDS}
        given = {name: value for name, value in typed.items() if name in self.model_fields_set}  # None too
        if given or "extra" in data:
            data["extra"] = {**given, **data.get("extra", {})}
        return data

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _decode_test_lists(cls, value):
        # SWE-bench ships these as JSON-encoded strings.
        if isinstance(value, str):
            return json.loads(value) if value.strip() else []
        return value

    def model_post_init(self, _context) -> None:
        if not self.instance_id:
            digest = hashlib.sha256(f"{self.repo}\0{self.base_commit}\0{self.problem_statement}".encode())
            name = self.repo.rstrip("/").split("/")[-1].removesuffix(".git")
            if name in ("", ".", ".."):  # --repo . : the directory's own name
                name = os.path.basename(os.path.abspath(self.repo or ".")) or "task"
            self.instance_id = f"{name}-{digest.hexdigest()[:8]}"

    @classmethod
    def from_swebench(cls, row: dict[str, Any], repo: str | None = None) -> Task:
        """A SWE-bench row; `repo` overrides where the source comes from (default: GitHub URL)."""
        known = {"problem_statement", "base_commit", "instance_id", "hints_text", "test_patch",
                 "FAIL_TO_PASS", "PASS_TO_PASS", "version", "environment_setup_commit"}
        fields = {key: row[key] for key in known if row.get(key) is not None}
        extra = {key: value for key, value in row.items() if key not in known | {"repo", "patch"}}
        return cls(repo=repo or f"https://github.com/{row['repo']}.git", gold_patch=row.get("patch"),
                   extra={"swebench_repo": row.get("repo"), **extra}, **fields)


EXTRA_FIELDS = ("task_format", "swebench_repo", "environment", "install_config", "log_parser", "docker_image",
                "images", "bug_patch", "expected_output", "created_at", "commit", "unit", "head", "held",
                "dropped_files", "setup", "provenance", "repository_history", "toy_operator", "toy_verb")
