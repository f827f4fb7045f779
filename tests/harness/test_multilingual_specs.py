"""SWE-bench Multilingual's environment specs (evals/environments/languages/, issue 22): every file is
contract 2's shape, and every repository and version of the split resolves to a spec. CPU only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from codeagent.assets import asset_path
from codeagent.task import Task

SPECS = asset_path("evals", "environments", "languages")
TOOLCHAINS = {"go", "rust", "node", "java", "c/c++"}
UNCOVERED = {"php", "ruby"}  # no toolchain in codeagent: in the split, no spec file (README says so)
LAYER = {"toolchain_version", "system_packages", "pre_install", "install", "env", "test_env", "pre_test", "test_cmd",
         "log_parser", "test_timeout"}
# Contract 1: the official harness's parsers of these languages (swebench/harness/log_parsers/*.py, the
# function's name without parse_log_) and codeagent's own structured ones.
OFFICIAL_PARSERS = {"gotest", "cargo", "jest", "jest_json", "vitest", "karma", "tap", "immutable_js", "maven", "ant",
                    "gradle_custom", "redis", "jq", "doctest", "micropython_test", "googletest"}
OWN_PARSERS = {"go_json", "nextest", "jest_json", "vitest_json", "mocha_json", "junit_xml", "ctest"}


def spec_files() -> list[Path]:
    return sorted(path for path in SPECS.glob("*.yaml") if not path.name.startswith("_"))


def split() -> dict[str, dict]:
    return yaml.safe_load((SPECS / "_split.yaml").read_text())["repos"]


def resolved(data: dict, version: str) -> dict:
    """A version's layer over the file's defaults, field by field (contract 2)."""
    return {**(data.get("defaults") or {}), **(data["versions"][version] or {})}


def commands(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def instances() -> list[tuple[str, str, str]]:
    return [(repo, str(version), entry["language"]) for repo, entry in split().items()
            for version in entry["versions"] if entry["language"] in TOOLCHAINS]


@pytest.mark.parametrize("path", spec_files(), ids=lambda path: path.stem)
def test_every_file_is_a_contract_2_spec_whose_versions_all_have_a_test_command_and_a_parser(path):
    data = yaml.safe_load(path.read_text())
    assert set(data) == {"repo", "language", "defaults", "versions"}
    assert path.stem == data["repo"].replace("/", "__")
    assert data["language"] in TOOLCHAINS
    assert data["versions"] and all(isinstance(key, str) for key in data["versions"])
    for version in data["versions"]:
        layer = resolved(data, version)
        assert set(layer) <= LAYER, (version, set(layer) - LAYER)
        tests = commands(layer.get("test_cmd") or [])
        assert tests and all(isinstance(cmd, str) and cmd.strip() for cmd in tests), version
        assert layer.get("log_parser") in OFFICIAL_PARSERS | OWN_PARSERS, version
        # install is always set: where the official spec has none, [] (not the toolchain's own prefetch)
        assert isinstance(layer.get("install"), list), version
        for field in ("system_packages", "pre_install", "install", "pre_test"):
            assert all(isinstance(item, str) and item for item in layer.get(field, [])), (version, field)
        for field in ("env", "test_env"):
            assert all(isinstance(value, str) for value in (layer.get(field) or {}).values()), (version, field)
        if "toolchain_version" in layer:
            assert isinstance(layer["toolchain_version"], str) and layer["toolchain_version"][0].isdigit()


def test_the_split_is_the_300_instances_of_41_repositories_and_each_covered_one_has_its_file():
    repos = split()
    assert sum(len(entry["versions"]) for entry in repos.values()) == 300
    assert len(repos) == 41
    assert {entry["language"] for entry in repos.values()} == TOOLCHAINS | UNCOVERED
    files = {yaml.safe_load(path.read_text())["repo"]: path for path in spec_files()}
    assert set(files) == {repo for repo, entry in repos.items() if entry["language"] in TOOLCHAINS}
    for repo, path in files.items():
        data = yaml.safe_load(path.read_text())
        assert data["language"] == repos[repo]["language"]
        assert list(data["versions"]) == [str(version) for version in repos[repo]["versions"]], repo
    readme = (SPECS / "README.md").read_text()
    assert all(repo in readme for repo, entry in repos.items() if entry["language"] in UNCOVERED)


def test_the_facts_of_a_few_instances_match_the_official_harness():
    """Spot checks against SWE-bench's constants (go.py, rust.py, c.py, java.py at fa79f3a)."""
    def layer(repo: str, version: str) -> dict:
        return resolved(yaml.safe_load((SPECS / f"{repo.replace('/', '__')}.yaml").read_text()), version)

    caddy = layer("caddyserver/caddy", "5404")
    assert caddy["toolchain_version"] == "1.20.14" and caddy["log_parser"] == "gotest"
    assert caddy["install"] == ["go test -c ./caddyconfig/caddyfile"]
    assert caddy["test_cmd"] == "go test -v ./caddyconfig/caddyfile"
    # `build` runs at install time and again after the test patch, before the tests
    jq = layer("jqlang/jq", "2839")
    assert jq["install"] == jq["pre_test"] and jq["install"][-1] == "make -j$(nproc)"
    assert jq["test_cmd"] == "make check" and jq["log_parser"] == "jq"
    nushell = layer("nushell/nushell", "13246")
    assert nushell["install"] == ["cargo test -p nu-command --no-run --test main find::", "cargo build"]
    assert nushell["pre_test"] == ["cargo build"] and nushell["toolchain_version"] == "1.77"
    lombok = layer("projectlombok/lombok", "3571")
    assert lombok["toolchain_version"] == "17" and lombok["log_parser"] == "ant"
    assert "lombok.transform.TestWithDelombok" in lombok["pre_install"][0]
    assert layer("google/gson", "2024")["test_cmd"][0].startswith("mvnd test -B -pl gson -Dtest=")
    assert "fixtures/tokio-rs__axum-691.Cargo.lock" in layer("tokio-rs/axum", "691")["pre_install"][0]
    assert layer("sharkdp/bat", "562")["install"] == []  # official: "any fetch or build command makes the gold fail"


# ------------------------------------------------------- through the harness's API (contract 2, langenv)

def multilingual_task(repo: str, version: str) -> Task:
    """A task as a SWE-bench Multilingual row becomes one (Task.from_swebench: swebench_repo, version)."""
    return Task.from_swebench({"repo": repo, "instance_id": f"{repo.replace('/', '__')}-{version}",
                               "base_commit": "0" * 40, "problem_statement": "p", "version": version})


def test_every_instance_of_the_split_maps_to_its_spec():
    from codeagent.harness.specs.languages import language_spec_for

    for repo, version, language in instances():
        data = yaml.safe_load((SPECS / f"{repo.replace('/', '__')}.yaml").read_text())
        layer = resolved(data, version)
        spec = language_spec_for(multilingual_task(repo, version))
        assert spec is not None, (repo, version)
        assert (spec.repo, spec.version, spec.language) == (repo, version, language)
        assert spec.test_cmds == commands(layer["test_cmd"]), (repo, version)
        assert spec.log_parser == layer["log_parser"]
        assert spec.toolchain_version == layer.get("toolchain_version")
        assert list(spec.install or []) == layer["install"]


def test_a_version_the_split_does_not_have_is_a_clear_error_naming_the_file():
    from codeagent.harness.specs.languages import SpecError, language_spec_for

    with pytest.raises(SpecError, match="gin-gonic__gin"):
        language_spec_for(multilingual_task("gin-gonic/gin", "999999"))
