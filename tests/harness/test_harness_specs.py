"""Environment specs (evals/environments/swebench/) and test directives, on real SWE-bench Lite rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeagent.harness.logs.parsers import PARSERS, parser_for_repo
from codeagent.harness.specs.directives import (
    patched_files,
    test_command,
    test_directives,
    test_files,
)
from codeagent.harness.specs.swebench import (
    PythonImage,
    SpecError,
    choose_python,
    clean_requirements,
    load_library,
    requirements_text,
    spec_dir,
    spec_for,
)
from codeagent.task import Task


@pytest.fixture(scope="module")
def rows(lite_raw) -> dict[str, dict]:
    return {row["instance_id"]: row for row in lite_raw["test"] + lite_raw["dev"]}


def task(rows, instance_id: str, **extra) -> Task:
    row = dict(rows[instance_id])
    row.update(extra)
    return Task.from_swebench(row)


# ----------------------------------------------------------------------------------- coverage

def test_every_lite_test_and_dev_instance_has_a_spec(rows):
    assert len(rows) == 323
    library = load_library()
    available = {image.python for image in library.pythons}
    for instance_id, row in rows.items():
        spec = spec_for(Task.from_swebench(row))
        assert spec.repo == row["repo"] and spec.version == row["version"], instance_id
        assert spec.python_used in available, instance_id
        assert spec.fallback == (spec.python_used != spec.python_requested), instance_id
        assert spec.install and spec.test_cmd, instance_id
        # The parser named by the data exists, and is the one SWE-bench uses for the repo.
        assert spec.log_parser in PARSERS, (instance_id, spec.log_parser)
        assert spec.log_parser == parser_for_repo(row["repo"]), instance_id
        assert "build-essential" in spec.system_packages and "git" in spec.system_packages


def official_versions() -> dict[str, dict[str, list[str]]]:
    import yaml

    return yaml.safe_load((spec_dir() / "_official_versions.yaml").read_text())


def test_every_version_of_full_and_verified_maps_to_a_spec():
    """Every (repo, version) of SWE-bench full and Verified resolves to a spec (issue 12).

    The pairs come from evals/environments/swebench/_official_versions.yaml: NOT the datasets
    (they cannot be downloaded here) but the key set of the official harness's per-repo version
    maps (MAP_REPO_VERSION_TO_SPECS_PY, SWE-bench commit 096a15a9), which the harness needs for
    every instance it evaluates, so it covers those splits' versions."""
    data = official_versions()
    assert data["source"]["commit"].startswith("096a15a9")
    library = load_library()
    available = {image.python for image in library.pythons}
    pairs = [(repo, version) for split in ("test", "dev") for repo, versions in data[split].items()
             for version in versions]
    assert len(pairs) == 282
    for repo, version in pairs:
        spec = spec_for(Task(repo=f"https://github.com/{repo}", problem_statement="", base_commit="0" * 40,
                             instance_id=f"{repo.replace('/', '__')}-0", version=version))
        assert (spec.repo, spec.version) == (repo, version)
        assert spec.python_used in available and spec.install and spec.test_cmd, (repo, version)
        assert spec.log_parser == parser_for_repo(repo), (repo, version)


def test_the_data_files_cover_exactly_the_official_versions(rows):
    data = official_versions()
    wanted = {repo: set(versions) for split in ("test", "dev") for repo, versions in data[split].items()}
    assert {repo: set(specs.versions) for repo, specs in load_library().repos.items()} == wanted
    for row in rows.values():  # the one split we do have is inside the list
        assert row["version"] in wanted[row["repo"]], row["instance_id"]


def test_python_table_is_data_with_the_three_debian_suites():
    table = {image.python: image.suite for image in load_library().pythons if not image.download}
    assert table == {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}


def test_a_python_no_suite_has_is_fetched_when_downloads_are_allowed_else_the_fallback_is_recorded(rows, monkeypatch):
    """issue 12: 3.10 (xarray) is obtainable with `uv python install` when the network allows;
    air-gapped (the default) the nearest suite Python is used and the fallback recorded."""
    xarray = task(rows, "pydata__xarray-4094")
    monkeypatch.delenv("CODEAGENT_PYTHON_DOWNLOADS", raising=False)
    offline = spec_for(xarray)
    assert (offline.python_used, offline.fallback, offline.python_download) == ("3.9", True, False)
    assert "python_download" not in offline.env_payload()  # keys of images built before stay valid
    monkeypatch.setenv("CODEAGENT_PYTHON_DOWNLOADS", "1")
    online = spec_for(xarray)
    assert (online.python_requested, online.python_used, online.fallback, online.python_download, online.suite) == \
        ("3.10", "3.10", False, True, "bookworm")
    assert online.env_key() != offline.env_key()
    # uv has no 3.6: the nearest download, still a recorded fallback.
    django = spec_for(task(rows, "django__django-11099"))
    assert (django.python_requested, django.python_used, django.fallback) == ("3.6", "3.7", True)
    from codeagent.harness.layers.python_env import _env_layer, _system_layers
    from codeagent.sandbox.workspace import RepoSnapshot

    system = _system_layers(online, "base")[-1]  # the Python is fetched once in a system layer, shared by its envs
    script = _env_layer(online, system.tag, RepoSnapshot(Path("/nonexistent"), "0" * 40, "0" * 40, "")).script
    assert "uv python install 3.10" in system.script and "uv venv --seed --python 3.10 /opt/env" in script
    assert "python3 -m venv /opt/env" not in script


# ----------------------------------------------------------------------------------- python

def test_fallback_is_recorded(rows):
    django30 = spec_for(task(rows, "django__django-11099"))  # version 3.0: Python 3.6 officially
    assert (django30.python_requested, django30.python_used, django30.fallback, django30.suite) == \
        ("3.6", "3.9", True, "bullseye")
    xarray = spec_for(task(rows, "pydata__xarray-4094"))  # 3.10: a tie, goes to the lower one
    assert (xarray.python_requested, xarray.python_used, xarray.fallback) == ("3.10", "3.9", True)
    django50 = spec_for(task(rows, "django__django-17087"))
    assert (django50.python_requested, django50.python_used, django50.fallback, django50.suite) == \
        ("3.11", "3.11", False, "bookworm")
    sympy = spec_for(task(rows, "sympy__sympy-20590"))
    assert (sympy.python_used, sympy.fallback) == ("3.9", False)


def test_choose_python_nearest_ties_lower_and_respects_minimum():
    table = load_library().pythons
    pick = lambda want, minimum=None: choose_python(want, table, minimum).python
    assert [pick(v) for v in ("3.5", "3.6", "3.7", "3.8", "3.9")] == ["3.9"] * 5
    assert [pick(v) for v in ("3.10", "3.11", "3.12", "3.13", "3.14")] == ["3.9", "3.11", "3.11", "3.13", "3.13"]
    assert pick("3.10", minimum="3.10") == "3.11"
    with pytest.raises(SpecError, match="provide only 3.9, 3.11, 3.13"):
        pick("3.14", minimum="3.14")
    assert choose_python("3.10", table, downloads=True).python == "3.10"
    assert choose_python("3.6", table, downloads=True).python == "3.7"  # uv has no 3.6: the nearest


def test_on_python_adapts_pins_only_for_the_python_used(rows):
    # scikit-learn 0.21 asks for 3.6 with numpy==1.19.2, which has no wheel for 3.9.
    fallback = spec_for(task(rows, "scikit-learn__scikit-learn-13142"))
    assert fallback.python_used == "3.9" and "numpy==1.19.5" in fallback.pip_packages
    assert any("on_python.3.9" in layer for layer in fallback.layers)
    # A machine whose images provide 3.6 (say, a registry with python:3.6-slim) gets the official pins.
    with36 = [PythonImage(python="3.6", suite="buster", pull="python:3.6-slim"), *load_library().pythons]
    exact = spec_for(task(rows, "scikit-learn__scikit-learn-13142"), pythons=with36)
    assert (exact.python_used, exact.fallback, exact.suite) == ("3.6", False, "buster")
    assert "numpy==1.19.2" in exact.pip_packages and "numpy==1.19.5" not in exact.pip_packages
    assert exact.env_key() != fallback.env_key()


# ---------------------------------------------------------------------------------- overrides

def test_task_install_config_overrides_field_by_field(rows):
    base = spec_for(task(rows, "pytest-dev__pytest-7373"))
    config = {"pip_packages": ["pluggy==1.0.0"], "test_cmd": "pytest -rA -p no:cacheprovider"}
    over = spec_for(task(rows, "pytest-dev__pytest-7373", install_config=config))
    assert over.pip_packages == ["pluggy==1.0.0"]
    assert over.test_cmd == "pytest -rA -p no:cacheprovider"
    # Everything the override does not name comes from the repo/version spec.
    for name in ("python_used", "install", "pre_install", "system_packages", "log_parser", "directives", "test_timeout"):
        assert getattr(over, name) == getattr(base, name), name
    assert over.layers[-1] == "task: install_config"
    assert test_command(task(rows, "pytest-dev__pytest-7373", install_config=config), over) == \
        "pytest -rA -p no:cacheprovider testing/test_mark.py"


def test_swebench_style_install_config_as_json_text(rows):
    config = {
        "python": "3.12",
        "packages": "requirements.txt",
        "reqs_path": ["requirements/test.txt"],
        "install": "pip install -e .",
        "pip_packages": "pytest==8.3.3 hypothesis",
        "eval_commands": ["export LANG=C.UTF-8", "ulimit -n 4096"],
        "nano_cpus": 2_000_000_000,
        "log_parser": "parse_log_pytest",
        "test_cmd": "pytest --no-header -rA",
        "no_use_env": True,
    }
    spec = spec_for(task(rows, "pallets__flask-5063", environment=json.dumps(config)))
    assert (spec.python_requested, spec.python_used, spec.fallback) == ("3.12", "3.11", True)
    assert spec.requirements == ["requirements/test.txt"]
    assert spec.install == ["pip install -e ."]
    assert spec.pip_packages == ["pytest==8.3.3", "hypothesis"]
    assert spec.test_env == {"LANG": "C.UTF-8"} and spec.pre_test == ["ulimit -n 4096"]
    assert spec.cpus == 2.0 and spec.log_parser == "pytest"
    assert spec.notes == ["no_use_env ignored"]
    assert test_command(task(rows, "pallets__flask-5063", environment=json.dumps(config)), spec) == \
        "ulimit -n 4096; LANG=C.UTF-8 pytest --no-header -rA tests/test_cli.py"


def test_a_task_with_its_own_config_needs_no_repo_file():
    config = {"python": "3.11", "install": ["pip install -e ."], "pip_packages": ["pytest"]}
    patch = "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-x\n+y\n"
    unknown = Task(repo="https://github.com/acme/widgets.git", problem_statement="p", base_commit="abc",
                   version="0.1", test_patch=patch, extra={"install_config": config})
    spec = spec_for(unknown)
    assert (spec.repo, spec.python_used, spec.log_parser) == ("acme/widgets", "3.11", "pytest")
    assert test_command(unknown, spec) == "pytest -rA tests/test_a.py"
    without = unknown.model_copy(update={"install_config": None})
    with pytest.raises(SpecError, match="no environment spec for repository 'acme/widgets'"):
        spec_for(without)


def test_unknown_version_says_which_versions_exist(rows):
    with pytest.raises(SpecError, match=r"version '9\.9' \(known: 3\.0, 3\.1"):
        spec_for(task(rows, "django__django-11099", version="9.9"))


def test_a_task_command_is_used_verbatim(rows):
    t = task(rows, "django__django-11099").model_copy(update={"test_command": "make check"})
    assert test_command(t, spec_for(t)) == "make check"


# ----------------------------------------------------------------------------------- keys

def test_keys_are_stable_and_track_what_defines_the_image(rows):
    t = task(rows, "astropy__astropy-14182")
    spec = spec_for(t)
    assert spec.env_key() == spec_for(t).env_key() and len(spec.env_key()) == 64
    # Instances of one repo/version share the env image, not the instance image.
    other = spec_for(task(rows, "astropy__astropy-14365"))
    assert (other.repo, other.version) == (spec.repo, spec.version)
    assert other.env_key() == spec.env_key() and other.instance_key() != spec.instance_key()

    pins = [p if not p.startswith("numpy==") else "numpy==1.25.1" for p in spec.pip_packages]
    repinned = spec.model_copy(update={"pip_packages": pins})
    assert repinned.env_key() != spec.env_key() and repinned.instance_key() != spec.instance_key()
    reinstalled = spec.model_copy(update={"install": ["python -m pip install ."]})
    assert reinstalled.env_key() == spec.env_key() and reinstalled.instance_key() != spec.instance_key()
    retested = spec.model_copy(update={"test_cmd": "pytest -x", "test_timeout": 60, "log_parser": "pytest"})
    assert (retested.env_key(), retested.instance_key()) == (spec.env_key(), spec.instance_key())
    shuffled = spec.model_copy(update={"system_packages": list(reversed(spec.system_packages))})
    assert shuffled.env_key() == spec.env_key()
    moved = spec.model_copy(update={"python_used": "3.11", "suite": "bookworm"})
    assert moved.env_key() != spec.env_key()


def test_keys_do_not_depend_on_the_process(rows):
    code = ("import json,sys; from codeagent.task import Task; from codeagent.harness.specs.swebench import spec_for; "
            "s = spec_for(Task.from_swebench(json.loads(sys.stdin.read()))); print(s.env_key(), s.instance_key())")
    row = json.dumps(rows["django__django-15202"])
    keys = {subprocess.run([sys.executable, "-c", code], input=row, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    spec = spec_for(task(rows, "django__django-15202"))
    assert keys == {f"{spec.env_key()} {spec.instance_key()}\n"}


def test_requirements_make_the_env_depend_on_the_setup_commit(rows):
    spec = spec_for(task(rows, "django__django-11099"))
    assert spec.requirements == ["tests/requirements/py3.txt"]
    assert spec.requirements_commit == rows["django__django-11099"]["environment_setup_commit"]
    moved = spec.model_copy(update={"requirements_commit": "0" * 40})
    assert moved.env_key() != spec.env_key()


# ------------------------------------------------------------------------------ directives

@pytest.mark.parametrize("instance_id, expected", [
    # Django: module labels, the non-test file.txt dropped, models.py kept (as the official harness).
    ("django__django-11099", ("LANG=en_US.UTF-8 LANGUAGE=en_US:en LC_ALL=en_US.UTF-8 ./tests/runtests.py "
                              "--verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators")),
    ("django__django-12915", ("LANG=en_US.UTF-8 LANGUAGE=en_US:en LC_ALL=en_US.UTF-8 ./tests/runtests.py "
                              "--verbosity 2 --settings=test_sqlite --parallel 1 asgi.tests staticfiles_tests.test_handlers")),
    ("django__django-13033", ("LANG=en_US.UTF-8 LANGUAGE=en_US:en LC_ALL=en_US.UTF-8 ./tests/runtests.py "
                              "--verbosity 2 --settings=test_sqlite --parallel 1 ordering.models ordering.tests")),
    ("django__django-15202", ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
                              "forms_tests.field_tests.test_urlfield")),
    # SymPy: file paths.
    ("sympy__sympy-24102", ("PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning bin/test -C --verbose "
                            "sympy/parsing/tests/test_mathematica.py sympy/testing/quality_unicode.py")),
    # pytest repositories: file paths.
    ("pytest-dev__pytest-11148", "pytest -rA testing/acceptance_test.py testing/test_pathlib.py"),
    ("psf__requests-2317", "pytest -rA test_requests.py"),
    ("scikit-learn__scikit-learn-13142", ("pytest -rA sklearn/mixture/tests/test_bayesian_mixture.py "
                                          "sklearn/mixture/tests/test_gaussian_mixture.py")),
    ("astropy__astropy-6938", ("pytest -rA -vv -o console_output_style=classic --tb=no "
                               "astropy/io/fits/tests/test_checksum.py astropy/io/fits/tests/test_table.py")),
    ("mwaskom__seaborn-3407", "pytest --no-header -rA tests/test_axisgrid.py"),
])
def test_test_command_of_real_instances(rows, instance_id, expected):
    t = task(rows, instance_id)
    assert test_command(t, spec_for(t)) == expected


def test_sphinx_directives_keep_non_python_roots_like_the_official_harness(rows):
    t = task(rows, "sphinx-doc__sphinx-10451")
    assert test_directives(t, spec_for(t)) == [
        "tests/roots/test-ext-autodoc/target/typehints.py",
        "tests/roots/test-ext-napoleon/conf.py",
        "tests/roots/test-ext-napoleon/index.rst",
        "tests/roots/test-ext-napoleon/mypackage/__init__.py",
        "tests/roots/test-ext-napoleon/mypackage/typehints.py",
        "tests/roots/test-ext-napoleon/typehints.rst",
        "tests/test_ext_autodoc_configs.py",
        "tests/test_ext_napoleon_docstring.py",
    ]


def test_patched_files_covers_new_deleted_renamed_and_ignores_hunk_lines():
    patch = "\n".join([
        "diff --git a/tests/test_new.py b/tests/test_new.py",
        "new file mode 100644",
        "index 0000000..1111111",
        "--- /dev/null",
        "+++ b/tests/test_new.py",
        "@@ -0,0 +1,2 @@",
        "+def test_x():",
        "+    pass",
        "diff --git a/tests/old.py b/tests/old.py",
        "deleted file mode 100644",
        "--- a/tests/old.py",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "--- a/not/a/header.py",  # a removed line that reads like a header
        "diff --git a/tests/a.py b/tests/b.py",
        "similarity index 100%",
        "rename from tests/a.py",
        "rename to tests/b.py",
        "diff --git a/tests/data/x.json b/tests/data/x.json",
        "--- a/tests/data/x.json",
        "+++ b/tests/data/x.json",
        "@@ -1 +1 @@",
        "-{}",
        "+[]",
        "",
    ])
    assert patched_files(patch) == ["tests/test_new.py", "tests/old.py", "tests/a.py", "tests/b.py", "tests/data/x.json"]
    assert test_files(patch) == ["tests/test_new.py", "tests/old.py", "tests/b.py"]


# ------------------------------------------------------------------------------ data errors

def _library(tmp_path: Path, repo_yaml: str) -> Path:
    (tmp_path / "_common.yaml").write_text((Path(load_library().folder) / "_common.yaml").read_text())
    (tmp_path / "acme.yaml").write_text(repo_yaml)
    return tmp_path


def test_unquoted_version_is_refused(tmp_path):
    folder = _library(tmp_path, "repo: acme/widgets\ndefaults: {python: \"3.9\"}\nversions:\n  3.10: {}\n")
    with pytest.raises(SpecError, match=r"version 3\.1 must be a quoted string"):
        load_library(folder)


def test_unknown_field_is_refused(tmp_path):
    folder = _library(tmp_path, "repo: acme/widgets\ndefaults: {python: \"3.9\", pip_pakages: [x]}\nversions: {}\n")
    with pytest.raises(SpecError, match="pip_pakages"):
        load_library(folder)


def test_a_repo_file_resolves_from_any_folder(tmp_path):
    folder = _library(tmp_path, "repo: acme/widgets\ndefaults:\n  python: \"3.8\"\n  pip_packages: [a==1]\n"
                                "  on_python: {\"3.9\": {pip_packages: [a==2]}}\n"
                                "versions:\n  \"1.0\": {extra_system_packages: [libxml2-dev]}\n")
    t = Task(repo="https://github.com/acme/widgets", problem_statement="p", base_commit="c0ffee", version="1.0")
    spec = spec_for(t, folder=folder)
    assert (spec.python_used, spec.pip_packages) == ("3.9", ["a==2"])
    assert spec.system_packages[-1] == "libxml2-dev" and "git" in spec.system_packages


# ---------------------------------------------------------------------------- requirements

def test_clean_requirements_inlines_and_drops_like_the_official_harness():
    files = {
        "requirements/dev.txt": "-r tests.txt\n-e .\n# tools\ntypes-pkg_resources==0.1\npre-commit\n",
        "requirements/tests.txt": "pytest==7.1.2\n.[test]\n",
    }
    spec = spec_for(Task(repo="https://github.com/pallets/flask.git", problem_statement="p", base_commit="b",
                         version="2.0", environment_setup_commit="e"))
    path, text = requirements_text(spec, files.get)
    assert path == "requirements/dev.txt" and spec.requirements_commit == "e"
    assert text.splitlines() == ["pytest==7.1.2", "types-setuptools", "pre-commit"]
    assert clean_requirements("numpy\n-r missing.txt\n", files.get) == "numpy"


# ------------------------------------------------------------------------ issue 12, defects 1 and 3

def test_sphinx_tox_runs_the_venv_python_and_old_trees_keep_docutils_roman(rows):
    """tox-current-env links .tox/py39/bin/python to the venv's python; reached through that link
    it is not the venv (no docutils): wrappers must be in place first. Trees before 4.0 leave
    docutils unpinned, and docutils 0.22 dropped docutils.utils.roman, which they import; before
    5.0 sphinxcontrib-jsmath is unpinned and its newest release needs Sphinx 5."""
    versions = official_versions()["test"]["sphinx-doc/sphinx"]
    for version in versions:
        spec = spec_for(Task(repo="https://github.com/sphinx-doc/sphinx", problem_statement="", instance_id="s-1",
                             base_commit="0" * 40, version=version))
        wrappers = [step for step in spec.pre_install if ".tox/py39/bin" in step]
        assert wrappers and "exec /opt/env/bin/python" in wrappers[0], version
        docutils = [p for p in spec.pip_packages if p.lower().startswith("docutils")]
        jsmath = [p for p in spec.pip_packages if p.startswith("sphinxcontrib-jsmath")]
        number = tuple(map(int, version.split(".")))
        # 0.17.1: has docutils.utils.roman, and the output the 3.x PASS_TO_PASS lists expect.
        assert docutils == (["docutils==0.17.1"] if number < (4, 0) else []), version  # 4.0+ cap it themselves
        assert jsmath == (["sphinxcontrib-jsmath==1.0.1"] if number < (5, 0) else []), version


def test_pylint_setup_py_trees_install_in_legacy_editable_mode(rows):
    """pylint-6506 / 7080: a setup.py-only tree must be installed by `setup.py develop` (pip does
    that when setuptools and wheel are both present, as in the official conda env), which puts
    /testbed on sys.path; without wheel, pip's PEP 660 install does not and checkers never register."""
    for instance_id in ("pylint-dev__pylint-6506", "pylint-dev__pylint-7080", "pylint-dev__pylint-5859"):
        assert "wheel" in spec_for(task(rows, instance_id)).pip_packages, instance_id
    for version in official_versions()["test"]["pylint-dev/pylint"]:
        spec = spec_for(Task(repo="https://github.com/pylint-dev/pylint", problem_statement="", instance_id="p-1",
                             base_commit="0" * 40, version=version))
        assert "wheel" in spec.pip_packages and spec.install == ["python -m pip install -e ."], version


def test_environments_share_system_layers_per_suite_and_leave_build_caches_out(rows):
    """issue 27: Debian's packages go in layers of their own, keyed by the suite and the packages only,
    most shared first: every repository and version on a suite stands on the same first one (a node
    holds it once), a repository's own packages (matplotlib's TeX) come above it; apt's cache and
    lists, Debian's docs and pip's cache are removed in the layer that makes them; the pip the
    instance installs with is the env layer's, not a copy in every instance layer."""
    from codeagent.harness.layers.python_env import (
        APT_CLEAN,
        PIP_CACHE_CLEAN,
        PIP_FOR_INSTALL,
        _env_layer,
        _instance_layer,
        _system_layers,
    )
    from codeagent.sandbox.workspace import RepoSnapshot

    first: dict[str, set[str]] = {}
    repos_above: dict[str, set[str]] = {}
    for row in rows.values():
        spec = spec_for(Task.from_swebench(row), downloads=False)
        layers = _system_layers(spec, f"codeagent/base:{spec.suite}")
        assert all(APT_CLEAN in layer.script for layer in layers) and "build-essential" in layers[0].script
        # dpkg leaves the sanitizer runtimes out, from the first package on
        assert layers[0].script.index("path-exclude /usr/lib/*/libasan.so.*") < layers[0].script.index("apt-get")
        assert [layer.parent for layer in layers[1:]] == [layer.tag for layer in layers[:-1]]
        first.setdefault(spec.suite, set()).add(layers[0].tag)
        for layer in layers[1:]:
            repos_above.setdefault(spec.repo, set()).add(layer.tag)
    assert {suite: len(tags) for suite, tags in first.items()} == {"bullseye": 1, "bookworm": 1}
    # the locales: one layer per suite, shared by the three repositories whose tests use them
    locales = {layer.tag for repo in ("astropy/astropy", "django/django", "matplotlib/matplotlib")
               for layer in _system_layers(spec_for(Task.from_swebench(next(row for row in rows.values()
                                                                            if row["repo"] == repo)),
                                                    downloads=False), "b")
               if "locales-all" in layer.script}
    assert len(locales) == 1
    assert not [row for row in rows.values() if row["repo"] not in ("astropy/astropy", "django/django",
                                                                    "matplotlib/matplotlib")
                and "locales" in spec_for(Task.from_swebench(row), downloads=False).system_packages]
    # matplotlib: the locales, then its TeX and ffmpeg, one layer each per suite
    assert len(repos_above["matplotlib/matplotlib"]) == 4

    requests = spec_for(task(rows, "psf__requests-2317"), downloads=False)
    flask = spec_for(task(rows, "pallets__flask-4045"), downloads=False)
    assert requests.repo != flask.repo and requests.suite == flask.suite == "bullseye"
    system = _system_layers(requests, "b")
    assert len(system) == 1 and [layer.tag for layer in _system_layers(flask, "b")] == [system[0].tag]
    source = RepoSnapshot(Path("/nonexistent"), "0" * 40, "0" * 40, "")
    env = _env_layer(requests, system[0].tag, source)
    assert env.parent == system[0].tag and "apt-get" not in env.script
    steps = env.script.splitlines()
    assert steps[-2:] == [PIP_FOR_INSTALL, PIP_CACHE_CLEAN] and steps.index(PIP_FOR_INSTALL) > steps.index("pip install pytest")
    instance = _instance_layer(requests, env, source).script.splitlines()
    assert PIP_FOR_INSTALL in instance and instance[-1] == PIP_CACHE_CLEAN


def test_sphinx_installs_a_versions_dependencies_once_in_a_deps_layer(rows):
    """issue 27: `pip install -e .[test]` brought ~73 MB into every sphinx instance layer. A deps layer per
    version installs them from the tree at environment_setup_commit, uninstalls the project and removes
    the tree; each instance is built on the env layer as before and written over it (build_on). The env
    layer stays shared across versions; other repositories are unchanged."""
    from codeagent.harness.layers.python_env import (
        ENV_PREFIX,
        UNINSTALL_PROJECT,
        _deps_layer,
        _env_layer,
        _instance_layer,
    )
    from codeagent.sandbox.workspace import RepoSnapshot

    sphinx = [row for row in rows.values() if row["repo"] == "sphinx-doc/sphinx"]
    envs, instances = set(), {}
    for row in sphinx:
        spec = spec_for(Task.from_swebench(row), downloads=False)
        assert spec.deps_commit == row["environment_setup_commit"]
        envs.add(spec.env_key())
        instances[row["instance_id"]] = spec.instance_key()
    assert len(envs) == 3 and len(set(instances.values())) == len(sphinx)

    t = task(rows, "sphinx-doc__sphinx-8595")
    spec = spec_for(t, downloads=False)
    moved = spec.model_copy(update={"deps_commit": "0" * 40})
    assert moved.env_key() == spec.env_key() and moved.instance_key() != spec.instance_key()
    source = RepoSnapshot(Path("/nonexistent"), t.base_commit, "1" * 40, "")
    deps = RepoSnapshot(Path("/nonexistent"), spec.deps_commit, "2" * 40, "")
    env = _env_layer(spec, "codeagent/system:x", source)
    assert "/testbed" not in env.script and env.tree is None
    layer = _deps_layer(spec, env, deps)
    steps = layer.script.splitlines()
    assert layer.parent == env.tag and layer.tree is deps and layer.tag != _deps_layer(spec, env, source).tag
    assert steps[1:1 + len(spec.pre_install) + 1] == [*spec.pre_install, *spec.install]
    assert layer.script.index(UNINSTALL_PROJECT) < layer.script.index("rm -rf /testbed")  # no file of it stays
    assert layer.carried == [ENV_PREFIX] and layer.build_on is None  # nothing outside the venv may change
    instance = _instance_layer(spec, env, source, layer)
    assert (instance.parent, instance.build_on, instance.carried) == (layer.tag, env.tag, [ENV_PREFIX, "/testbed"])
    plain = _instance_layer(spec, env, source)
    assert instance.script == plain.script and plain.build_on is None  # built as without deps_layer

    no_setup = spec_for(task(rows, "sphinx-doc__sphinx-8595", environment_setup_commit=None), downloads=False)
    assert no_setup.deps_commit is None and "deps_commit" not in no_setup.instance_payload()
    for row in rows.values():
        if row["repo"] != "sphinx-doc/sphinx":
            assert spec_for(Task.from_swebench(row), downloads=False).deps_commit is None, row["instance_id"]


@pytest.mark.parametrize("repo", ["django/django", "matplotlib/matplotlib", "scikit-learn/scikit-learn"])
def test_lite_versions_of_repos_too_large_to_fetch_render_their_build_steps_on_a_stand_in(rows, repo, tmp_path):
    """django, matplotlib and scikit-learn exceed fetch's size limit here: their specs are built on a
    stand-in repository (bench/spec_builds.py builds the images). Here, without building: every Lite
    version resolves, and its env and instance steps render with the requirement file, the pins and
    the install commands the spec names."""
    from codeagent.harness.layers.python_env import REQUIREMENTS_FILE, _env_layer, _instance_layer
    from codeagent.harness.specs.stand_in import stand_in_task
    from codeagent.sandbox.workspace import snapshot

    versions = sorted({row["version"] for row in rows.values() if row["repo"] == repo})
    assert versions, repo
    for version in versions:
        stand_in, spec = stand_in_task(repo, version, tmp_path)
        assert spec.repo == repo and spec.version == version
        source = snapshot(stand_in.repo, stand_in.base_commit)
        env = _env_layer(spec, "codeagent/base:test", source)
        instance = _instance_layer(spec, env, source)
        if spec.requirements:
            assert REQUIREMENTS_FILE in env.files and f"pip install -r {REQUIREMENTS_FILE}" in env.script, version
        for pin in spec.pip_packages:
            assert pin in env.script, (version, pin)
        for step in [*spec.pre_install, *spec.install]:
            assert step in instance.script.splitlines(), (version, step)
        assert spec.install, version
        assert spec.fallback == (spec.python_used != spec.python_requested), version


def test_astropy_trees_without_their_helpers_submodule_get_astropy_helpers_in_the_env(rows):
    """astropy-6938 / 7746 (1.3): astropy_helpers is a git submodule the tree does not carry, so
    setup.py's ah_bootstrap downloads it from pypi.python.org at install time; offline that fails and
    the instance never builds. The env must hold it already, whichever Python is used, and `wheel`
    with it: without wheel pip builds a setup.py-only tree in an isolated PEP 517 environment, where
    neither astropy-helpers nor numpy is (the official conda env has wheel: `setup.py develop`)."""
    for instance_id in ("astropy__astropy-6938", "astropy__astropy-7746"):
        for downloads in (False, True):
            spec = spec_for(task(rows, instance_id), downloads=downloads)
            assert "astropy-helpers==3.0.2" in spec.pip_packages, (instance_id, spec.python_used)
            assert any(p.startswith("wheel") for p in spec.pip_packages), (instance_id, spec.python_used)
            assert "--no-build-isolation" not in " ".join(spec.install)  # the legacy route needs none
