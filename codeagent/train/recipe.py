"""Training recipes: a YAML file plus `key=value` overrides, validated strictly.

    method: sft | dpo | grpo
    model:   base (hub id or local path), adapter (start from one), dtype, trust_remote_code
    lora:    r, alpha, dropout, target_modules, modules_to_save
    data:    store, filters (resolved, min_reward, exit_status, max_tokens, instance, repo, model), tasks (grpo)
    trainer: passed to TRL's SFTConfig / DPOConfig / GRPOConfig as they are (checked against their fields)
    rollout: grpo only: agent config, sandbox, grading, generation, compact filtering
    rewards: grpo only: weights of the outcome, patch-similarity and gated step rewards
    output_dir, resume, seed

Unknown keys are errors that name the key and the close matches, in the file and in overrides alike.
Overrides use dotted paths: `trainer.learning_rate=1e-4 lora.r=8 data.resolved=null`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..nested import Conflict, deep_merge, put
from ..status import LIMITS, ExitStatus
from . import TrainError

METHODS = ("sft", "dpo", "grpo")
# Set by codeagent itself from other recipe keys; not allowed under `trainer:`.
RESERVED_TRAINER_KEYS = {"output_dir": "output_dir", "resume_from_checkpoint": "resume", "seed": "seed",
                         "ddp_timeout": "distributed.timeout_seconds"}


class _Loader(yaml.SafeLoader):
    """YAML with floats written as in Python too (`1e-4`, which YAML 1.1 reads as a string)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    base: str  # hub id or local directory
    build: str | None = None  # the command that makes `base` when it is missing ({base}: its path), e.g. train tiny
    adapter: str | None = None  # continue training this PEFT adapter (e.g. GRPO after SFT)
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    trust_remote_code: bool = False
    attn_implementation: str | None = None


class LoraSection(_Strict):
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"
    modules_to_save: list[str] | None = None


class DataSection(_Strict):
    store: str | None = None  # trajectory directory; default $CODEAGENT_TRAJECTORY_DIR or ~/.codeagent/trajectories
    resolved: bool | None = True  # sft: only trajectories verified as resolved (null: any)
    min_reward: float | None = None
    exit_status: list[str] = Field(default_factory=list)  # e.g. [submitted]; empty: any
    max_tokens: int | None = None  # drop sequences longer than this
    instance: str | None = None  # instance id glob, e.g. 'django__*'
    repo: str | None = None  # repository glob (task repo or SWE-bench owner/name)
    model: str | None = None  # substring of the model that produced the trajectory
    token_exact: Literal["auto", "always", "never"] = "auto"  # use recorded token ids when a run has them all
    max_pairs_per_task: int | None = None  # dpo
    tasks: str | None = None  # grpo: SWE-bench file or dataset name, or toy[:N]
    repos: str | None = None  # grpo: DIR/owner/name mirrors for SWE-bench tasks (air-gapped)
    task_slice: str | None = None  # grpo: e.g. 0:50
    tasks_format: str = "auto"  # grpo: data.tasks' format, auto or a name of codeagent.data's registry
    held_out: float | int | None = None  # grpo: hold out this fraction (or count) of the tasks, whole repositories
    split: Literal["train", "held_out"] = "train"  # which side of the held-out split to use
    split_seed: int = 0
    held_out_by: Literal["repo", "task"] = "repo"  # hold out whole repositories (no leak), or single tasks
    # Train on what `codeagent traj export` wrote (--format jsonl: full trajectories; --format sft: chat
    # rows) instead of the store.
    dataset: str | None = None
    max_format_errors: int | None = 0  # sft: drop runs with more malformed turns than this (null: keep all)
    # sft/dpo: runs the grader flagged (Trajectory.integrity_flags: test infrastructure touched, masked
    # failures, a tampered test run) are no positive example (sft: left out; dpo: never chosen) unless true
    allow_flagged: bool = False

    @field_validator("tasks_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from ..data import format_of

        if value != "auto":
            format_of(value)  # a ValueError naming the known formats
        return value


class RolloutSection(_Strict):
    agent_config: str | None = None  # a codeagent config YAML for the rollouts (limits, tools, prompts, sandbox)
    set: dict[str, Any] = Field(default_factory=dict)  # overrides of that config, e.g. {limits.max_steps: 30}
    store: str | None = None  # where rollouts are written; default data.store
    environment: Literal["harness", "base"] = "harness"  # sandbox image: the task's harness image, or the base one
    # harness: the harness's grade (task spec, instance image); sandbox: a fresh sandbox of the rollout's
    # environment with the run's patch applied (never the one the model worked in)
    grader: Literal["harness", "sandbox"] = "harness"
    workers: int = 2  # rollouts in flight at once (per process; their turns decode together on one engine)
    # Sandboxes started ahead (a warm pool per task) so the next rollout's is ready when one finishes; None:
    # as many as workers, 0: off. Local executor, tasks without services only.
    warm_sandboxes: int | None = Field(default=None, ge=0)
    executor: Literal["local", "ray"] = "local"  # ray: each rollout's sandbox (and harness grade) on a Ray node
    ray_address: str | None = None  # the Ray cluster; default: a new one-node Ray here
    max_tokens: int = 1024  # per model call
    temperature: float = 1.0  # also the temperature the GRPO loss uses
    top_p: float | None = None
    generation: Literal["auto", "transformers", "vllm"] = "auto"  # vllm: TRL's vLLM engine (use_vllm on GPU)
    # async mode: sample through `vllm serve`, one LoRA adapter per policy version (vllm_server.py); a server
    # started here, or one at vllm_server_url started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING
    served: bool = False
    vllm_server_url: str | None = None
    vllm_server_args: list[str] = Field(default_factory=list)  # more `vllm serve` flags (e.g. memory)
    vllm_max_model_len: int | None = None
    # How the trained weights reach vLLM each step: merged (TRL's sync: the adapter merged into the base
    # weights) is the one way. `adapter` (hot-loading the LoRA adapter) was removed: TRL 1.16 builds its
    # vLLM engine without LoRA, so no adapter could ever be loaded into it.
    vllm_weights: Literal["merged"] = "merged"

    @field_validator("vllm_weights", mode="before")
    @classmethod
    def _only_merged(cls, value):
        if value != "merged":
            raise ValueError(f"{value!r} is not a weight-sync mode; the one that exists is 'merged' (TRL's "
                             "sync, the adapter merged into vLLM's weights each step). 'adapter' was removed: "
                             "TRL builds its vLLM engine without LoRA, so an adapter could never be loaded")
        return value
    # Compact filtering: runs that ended on a limit (steps, time, cost, unusable replies in a row) or
    # broke leave the loss; their reward still counts in their group's baseline.
    mask_exit_statuses: list[str] = Field(
        default_factory=lambda: [status.value for status in (*LIMITS, ExitStatus.FORMAT_ERRORS, ExitStatus.MODEL_ERROR,
                                                             ExitStatus.SANDBOX_ERROR)])
    mask_truncated: bool = True  # a reply cut at max_tokens, or a sequence longer than max_completion_length
    # A group whose rewards are all equal has no signal; always counted, left out of the loss when true.
    drop_uniform_groups: bool = False
    # DAPO dynamic sampling (train/grpo/objectives.py): such groups are replaced by newly sampled groups of other
    # tasks, for up to this many extra generation rounds per step (0: off); counted in metrics.jsonl.
    dynamic_sampling: int = Field(default=0, ge=0)
    # Periodic evaluation on the held-out tasks (data.held_out): every N optimizer steps (0: never),
    # `eval_samples` rollouts per task with the current policy; pass@1 and pass@eval_samples are logged.
    eval_every: int = 0
    eval_samples: int = 4
    # Async GRPO (train/grpo/async_rollouts.py): rollout workers keep sampling from versioned copies of the policy
    # while the trainer steps; each rollout records the version that sampled it; groups staler than
    # max_staleness optimizer steps are dropped (counted in metrics.jsonl); at most buffer_batches generation
    # batches are started ahead (default max_staleness + 1).
    asynchronous: bool = False
    max_staleness: int = Field(default=1, ge=0)
    buffer_batches: int | None = Field(default=None, ge=1)
    # Every path (sync or async, transformers or vLLM): the loss weighs each token by the ratio of the trainer's
    # logprob to the sampler's recorded one (offpolicy.py): token_truncate at off_policy_cap, token_mask outside
    # [1/cap, cap] (those tokens leave the loss and its normaliser), or none (measured only).
    off_policy_correction: Literal["token_truncate", "token_mask", "none"] = "token_truncate"
    off_policy_cap: float = Field(default=2.0, gt=1.0)


class RewardsSection(_Strict):
    resolved: float = 1.0  # weight of the outcome reward: 1 when the harness grades the patch resolved
    similarity: float = 0.0  # weight of the patch similarity to the gold patch (SWE-RL)
    steps: float = 0.0  # weight of the gated step reward (G-RA)
    steps_gate: float = 1.0  # step rewards count only when the outcome reward reaches this
    step_signals: list[Literal["well_formed", "tool_ok", "edited", "tested"]] = ["well_formed", "tool_ok"]
    # How the gated step rewards make the return: averaged over the steps (in [0, 1] whatever the run's length,
    # the default), or summed (G-RA's accumulation: a longer run earns more, so a policy learns to pad its runs
    # with cheap well-formed steps).
    steps_aggregate: Literal["sum", "mean"] = "mean"
    # The baseline an advantage is measured from: TRL's group mean, or the mean of the other members of the
    # group (leave_one_out, RLOO; train/grpo/objectives.py).
    baseline: Literal["group_mean", "leave_one_out"] = "group_mean"
    # A patch that touches test infrastructure (conftest.py, test settings, test files: see
    # codeagent/harness/grading/integrity.py) earns 0 on every component ("zero"), or is rewarded as graded ("allow").
    test_infrastructure: Literal["zero", "allow"] = "zero"


class DistributedSection(_Strict):
    # The accelerate config the recipe is launched with (`accelerate launch --config_file ...`), relative to
    # the recipe's folder: `train grpo --dry-run` reads its processes and sharding for the memory per device.
    accelerate_config: str | None = None
    # How long a rank waits at a collective (the process group's timeout, TRL's ddp_timeout) before the run is
    # killed. Ranks wait at the next step while the others finish their rollouts (an agent run may take
    # rollout limits of 30 min plus grading and image builds) or the slowest rank finishes its share of the
    # held-out evaluation: torch's default, 30 min, is shorter than one rollout batch.
    timeout_seconds: int = Field(default=4 * 3600, gt=0)


class Recipe(_Strict):
    method: Literal["sft", "dpo", "grpo"]
    model: ModelSection
    lora: LoraSection = Field(default_factory=LoraSection)
    data: DataSection = Field(default_factory=DataSection)
    trainer: dict[str, Any] = Field(default_factory=dict)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    rewards: RewardsSection = Field(default_factory=RewardsSection)
    distributed: DistributedSection = Field(default_factory=DistributedSection)
    output_dir: str = "runs/train"
    resume: bool | str = "auto"  # auto: from the last checkpoint in output_dir if any; a path: from that one
    seed: int = 42
    cpu_threads: int | None = None  # torch threads on CPU (1 is fastest for tiny models on a busy machine)
    description: str = ""
    source: str | None = Field(default=None, exclude=True)  # the file it came from (for the card)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"source"})


def trl_config_class(method: str):
    import trl

    return {"sft": trl.SFTConfig, "dpo": trl.DPOConfig, "grpo": trl.GRPOConfig}[method]


@functools.lru_cache(maxsize=4)
def trainer_keys(method: str) -> frozenset[str]:
    return frozenset(field.name for field in dataclasses.fields(trl_config_class(method)) if field.init)


def resolve_recipe_path(name_or_path: str | Path) -> Path:
    """A file path, or the name of a bundled recipe in train/ (e.g. `sft-tiny`)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    from ..assets import asset_dir

    bundled = asset_dir("train")
    for candidate in (bundled / str(name_or_path), bundled / f"{name_or_path}.yaml"):
        if candidate.is_file():
            return candidate
    names = ", ".join(sorted(p.stem for p in bundled.glob("*.yaml")))
    raise TrainError(f"no recipe {name_or_path!r}: not a file, nor a bundled recipe ({names})")


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`a.b=value` pairs (values parsed as YAML) into a nested dict."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise TrainError(f"override {pair!r} is not of the form key=value (e.g. trainer.learning_rate=1e-4)")
        try:
            put(result, key.strip(), _yaml(raw))
        except Conflict as conflict:
            raise TrainError(f"override {pair!r} conflicts with another override of {conflict.part!r}") from None
    return result


def load_recipe(name_or_path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
                method: str | None = None) -> Recipe:
    """Read a recipe, apply overrides, validate everything (TRL keys included)."""
    data: dict[str, Any] = {}
    source = None
    if name_or_path is not None:
        path = resolve_recipe_path(name_or_path)
        source = str(path)
        try:
            data = _yaml(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise TrainError(f"recipe {path} is not valid YAML: {error}") from None
        if not isinstance(data, dict):
            raise TrainError(f"recipe {path} must be a mapping of sections, not {type(data).__name__}")
    data = deep_merge(data, parse_overrides(overrides), whole=("set",))  # rollout.set is replaced whole
    if method is not None:
        if data.get("method") not in (None, method):
            raise TrainError(f"recipe {source or ''} is a {data['method']} recipe; run `codeagent train "
                             f"{data['method']}` or pass a {method} recipe")
        data["method"] = method
    return validate_recipe(data, source)


CISPO_CAP_EXAMPLE = 5.0  # ScaleRL's epsilon_max, TRL's recommendation for loss_type cispo


def cispo_cap(trainer: dict[str, Any]) -> str | None:
    """TRL's CISPO clamps each token's importance weight at `epsilon_high` itself (not at 1 + epsilon_high, as
    the clipped losses do): a DAPO-style 0.28 would clip every token, the on-policy ones (ratio 1) included."""
    if trainer.get("loss_type") != "cispo":
        return None
    cap = trainer.get("epsilon_high", trainer.get("epsilon", 0.2))
    if cap is None or float(cap) <= 1.0:
        return (f"trainer.loss_type=cispo takes trainer.epsilon_high as the cap of each token's importance weight "
                f"(TRL clamps the ratio at it): {cap} is below 1, so every token, on-policy ones included, would be "
                f"clipped. Set trainer.epsilon_high to the cap itself, e.g. {CISPO_CAP_EXAMPLE} (ScaleRL)")
    return None


def validate_recipe(data: dict[str, Any], source: str | None = None) -> Recipe:
    where = f"recipe {source}" if source else "recipe"
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as error:
        raise TrainError(f"{where}: " + "; ".join(_explain(e) for e in error.errors())) from None
    recipe.source = source
    _check_trainer_keys(recipe, where)
    if recipe.method == "grpo":
        _check_grpo_dropout(recipe, where)
        if problem := cispo_cap(recipe.trainer):
            raise TrainError(f"{where}: {problem}")
        if recipe.rollout.served and not recipe.rollout.asynchronous:
            raise TrainError(f"{where}: rollout.served samples the versions of async GRPO: set rollout.asynchronous")
    if recipe.method != "grpo":
        for section in ("rollout", "rewards"):
            if section in data:
                raise TrainError(f"{where}: `{section}` is for grpo recipes only (this one is {recipe.method})")
    return recipe


def _explain(error: Mapping[str, Any]) -> str:
    location = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        parent, _, key = location.rpartition(".")
        known = _known_fields(parent)
        close = difflib.get_close_matches(key, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known keys: {', '.join(sorted(known))}"
        return f"unknown key {location!r}{hint}"
    if error["type"] == "missing":
        return f"{location} is required"
    return f"{location}: {error['msg']}"


def _known_fields(parent: str) -> list[str]:
    model: type[BaseModel] = Recipe
    for part in [p for p in parent.split(".") if p]:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [name for name in model.model_fields if name != "source"]


def _check_trainer_keys(recipe: Recipe, where: str) -> None:
    for key, replacement in RESERVED_TRAINER_KEYS.items():
        if key in recipe.trainer:
            raise TrainError(f"{where}: set `{replacement}` in the recipe, not trainer.{key}")
    try:
        known = trainer_keys(recipe.method)
    except ImportError as error:
        raise TrainError(f"training needs TRL ({error}); pip install 'codeagent[train]'") from None
    unknown = sorted(set(recipe.trainer) - known)
    if unknown:
        name = trl_config_class(recipe.method).__name__
        problems = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=3)
            problems.append(f"trainer.{key}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise TrainError(f"{where}: unknown key(s) for TRL's {name}: {'; '.join(problems)}")


def _check_grpo_dropout(recipe: Recipe, where: str) -> None:
    """Rollouts sample from the policy in eval mode, without dropout. Trained with dropout on, the
    model that computes the loss is not the one that sampled: the importance ratio of every token is
    off by the dropout noise, and clipping acts on noise. GRPO trains with dropout off: the default
    here, and an explicit lora.dropout > 0 is refused."""
    if "dropout" not in recipe.lora.model_fields_set:
        recipe.lora.dropout = 0.0
    elif recipe.lora.dropout > 0:
        raise TrainError(f"{where}: lora.dropout={recipe.lora.dropout}, but GRPO rollouts sample without dropout "
                         "(eval mode), so the loss would score tokens with another model than the one that "
                         "sampled them; set lora.dropout=0")
