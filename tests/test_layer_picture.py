"""The README's layer picture is the import contract, layer for layer (pyproject.toml's layers contract)."""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_pictures_the_layers_contract_exactly():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [contract["layers"] for contract in contracts
                if contract["type"] == "layers" and contract.get("containers") == ["codeagent"]]
    readme = (ROOT / "README.md").read_text()
    picture = re.search(r"\n```\n(cli .*?)```\n", readme, re.S)
    assert picture, "no layer picture (a code block starting with `cli`) in the README"
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in picture.group(1).splitlines() if line.strip()]
    assert drawn == layers


def test_train_and_evals_are_independent_peers():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [contract["layers"] for contract in contracts
                if contract["type"] == "layers" and contract.get("containers") == ["codeagent"]]
    assert "train | evals | mine" in layers
    assert any(contract["type"] == "independence" and set(contract["modules"]) >= {"codeagent.train", "codeagent.evals", "codeagent.mine"}
               for contract in contracts)
