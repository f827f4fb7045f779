"""pyproject.toml's transformers range admits only versions that still take the `past_key_values` argument
models/hf.py and models/batching.py pass: the installed transformers is called as they call it, and the
version its deprecation notice names for the removal is outside the range."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parent.resolve().parents[1]


def train_requirement(name: str) -> Requirement:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return next(Requirement(line) for line in extras["train"] if Requirement(line).name == name)


def test_the_transformers_range_ends_before_past_key_values_is_removed(tmp_path):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from codeagent.train.tiny import build_tiny

    model = AutoModelForCausalLM.from_pretrained(str(build_tiny(tmp_path, vocab_size=512)))
    ids = torch.tensor([[1, 2, 3]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = model(input_ids=ids, past_key_values=None, use_cache=True)  # as models/batching.py calls it
        model(input_ids=torch.tensor([[4]]), past_key_values=first.past_key_values, use_cache=True)
    allowed = train_requirement("transformers").specifier
    assert allowed.contains(Version(transformers.__version__), prereleases=True)
    removal = [re.search(r"removed in version (\d+(?:\.\d+)+)", str(w.message)) for w in caught
               if "past_key_values" in str(w.message)]
    for found in filter(None, removal):
        assert not allowed.contains(Version(found.group(1)), prereleases=True), (
            f"pyproject.toml allows transformers {found.group(1)}, which removes past_key_values ({allowed})")
    assert not allowed.contains(Version("5.40.0"))  # the removal transformers 5.24 announces
