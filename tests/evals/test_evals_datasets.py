"""Datasets: the registry, the real SWE-bench Lite files, selection, file formats, malformed rows."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from codeagent.assets import asset_path
from codeagent.data import DatasetError, load_tasks, parse_slice, select_tasks
from codeagent.data.swebench import DatasetSpec, load_rows, local_file, read_file, registry
from codeagent.task import Task

LITE_PER_REPO = {"django/django": 114, "sympy/sympy": 77, "scikit-learn/scikit-learn": 23,
                 "matplotlib/matplotlib": 23, "pytest-dev/pytest": 17, "sphinx-doc/sphinx": 16,
                 "astropy/astropy": 6, "psf/requests": 6, "pylint-dev/pylint": 6, "pydata/xarray": 5,
                 "mwaskom/seaborn": 4, "pallets/flask": 3}


@pytest.fixture(scope="module")
def lite_rows():
    return load_rows("lite")


@pytest.fixture(scope="module")
def dev_rows():
    return load_rows("lite-dev")


# ------------------------------------------------------------------------------------ registry

def test_registry_names_and_hub_ids():
    names = registry()
    assert {"lite", "lite-dev", "verified", "full"} <= set(names)
    assert (names["lite"].hf, names["lite"].split) == ("princeton-nlp/SWE-bench_Lite", "test")
    assert (names["lite-dev"].hf, names["lite-dev"].split) == ("princeton-nlp/SWE-bench_Lite", "dev")
    assert names["verified"].hf == "princeton-nlp/SWE-bench_Verified"
    assert names["full"].hf == "princeton-nlp/SWE-bench"
    assert local_file(names["verified"]) is None


def test_lite_and_lite_dev_are_the_copies_that_ship_in_evals():
    names = registry()
    shipped = asset_path("evals", "swebench").resolve()
    assert local_file(names["lite"]) == shipped / "lite.test.jsonl.gz"
    assert local_file(names["lite-dev"]) == shipped / "lite.dev.jsonl.gz"


def test_a_shipped_file_that_is_missing_is_a_clear_error():
    with pytest.raises(DatasetError, match="lite.test.jsonl.gz is missing from this installation; reinstall"):
        local_file(DatasetSpec(name="lite", local="nowhere/lite.test.jsonl.gz"))


# ------------------------------------------------------------------------- the real Lite files

def test_lite_loads_300_instances_with_the_readme_counts(lite_rows):
    assert len(lite_rows) == 300
    assert Counter(row["repo"] for row in lite_rows) == LITE_PER_REPO
    assert all(isinstance(row["FAIL_TO_PASS"], list) and row["FAIL_TO_PASS"] for row in lite_rows)


def test_lite_dev_loads_23_instances(dev_rows):
    assert len(dev_rows) == 23
    assert Counter(row["repo"] for row in dev_rows)["sqlfluff/sqlfluff"] == 5


def test_the_shipped_rows_have_the_12_official_fields(lite_raw):
    fields = ["repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
              "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit"]
    assert [len(lite_raw["test"]), len(lite_raw["dev"])] == [300, 23]
    for row in lite_raw["test"] + lite_raw["dev"]:
        assert list(row) == fields and all(isinstance(row[field], str) for field in fields)
        assert isinstance(json.loads(row["FAIL_TO_PASS"]), list)


def test_rows_become_tasks(lite_raw):
    tasks = load_tasks("lite", instance_ids=["django__django-11099"])
    assert len(tasks) == 1 and isinstance(tasks[0], Task)
    task = tasks[0]
    raw = next(row for row in lite_raw["test"] if row["instance_id"] == "django__django-11099")
    assert task.instance_id == "django__django-11099"
    assert task.repo == "https://github.com/django/django.git"
    assert task.swebench_repo == "django/django"
    assert task.base_commit == raw["base_commit"] and task.gold_patch == raw["patch"]
    assert task.test_patch == raw["test_patch"] and task.problem_statement == raw["problem_statement"]
    assert task.FAIL_TO_PASS == json.loads(raw["FAIL_TO_PASS"])
    assert task.PASS_TO_PASS == json.loads(raw["PASS_TO_PASS"])
    assert task.version == raw["version"] and task.environment_setup_commit == raw["environment_setup_commit"]


# ----------------------------------------------------------------------------------- selection

@pytest.fixture(scope="module")
def lite_tasks(lite_rows):
    return [Task.from_swebench(row) for row in lite_rows]


def ids(tasks):
    return [task.instance_id for task in tasks]


def test_select_by_ids_keeps_dataset_order(lite_tasks):
    wanted = ["sympy__sympy-20590", "django__django-11099"]
    order = ids(lite_tasks)
    assert ids(select_tasks(lite_tasks, instance_ids=wanted)) == sorted(wanted, key=order.index)


def test_select_by_regex_repo_and_slice(lite_tasks, lite_rows):
    assert len(select_tasks(lite_tasks, regex=r"^psf__requests-")) == 6
    assert len(select_tasks(lite_tasks, repo="django/django")) == 114
    assert len(select_tasks(lite_tasks, repo=["pallets/flask", "mwaskom/seaborn"])) == 7
    assert select_tasks(lite_tasks, slice="10:20") == lite_tasks[10:20]
    assert select_tasks(lite_tasks, slice=":5") == lite_tasks[:5]
    # filters first, then the slice
    django = [task for task in lite_tasks if task.swebench_repo == "django/django"]
    assert select_tasks(lite_tasks, repo="django/django", slice="100:") == django[100:]
    assert ids(select_tasks(lite_tasks, regex="sympy-2", repo="sympy/sympy", slice="0:2")) \
        == [r["instance_id"] for r in lite_rows if r["repo"] == "sympy/sympy" and "sympy-2" in r["instance_id"]][:2]
    tasks = load_tasks("lite", repo="psf/requests", slice="1:3")
    assert ids(tasks) == [r["instance_id"] for r in lite_rows if r["repo"] == "psf/requests"][1:3]


@pytest.mark.parametrize("kwargs, message", [
    ({"instance_ids": ["django__django-11099", "nope__nope-1"]}, "not in the dataset: nope__nope-1"),
    ({"repo": "django"}, "no instance of django"),
    ({"regex": "("}, "bad instance regex"),
    ({"regex": "zzz-no-such"}, "matched no instance"),
    ({"slice": "5"}, "bad slice"),
    ({"slice": "a:b"}, "bad slice"),
    ({"slice": "::0"}, "step cannot be 0"),
])
def test_bad_selections_are_clear_errors(lite_tasks, kwargs, message):
    with pytest.raises(DatasetError, match=message):
        select_tasks(lite_tasks, **kwargs)


def test_parse_slice():
    assert parse_slice("10:20") == slice(10, 20)
    assert parse_slice("::2") == slice(None, None, 2)
    assert parse_slice("-5:") == slice(-5, None)


def test_unknown_name_is_a_clear_error():
    with pytest.raises(DatasetError, match="unknown dataset 'litee'.*lite"):
        load_rows("litee")


def test_an_unreachable_hub_says_to_pass_a_local_file(tmp_path):
    # the real `datasets` client, kept from waiting on the network: offline mode
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    code = ("from codeagent.data.swebench import load_rows, DatasetError\n"
            "for name in ('verified', 'hf:someone/else:dev'):\n"
            "    try:\n        load_rows(name)\n    except DatasetError as e:\n        print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("ERR")]
    assert len(lines) == 2, out.stdout + out.stderr
    assert "princeton-nlp/SWE-bench_Verified" in lines[0] and "pass a local file" in lines[0]
    assert "someone/else" in lines[1] and "'dev'" in lines[1]


# -------------------------------------------------------------------------------- file formats

def _write(path: Path, rows: list[dict]) -> Path:
    if path.name.endswith(".json.gz"):
        path.write_bytes(gzip.compress(json.dumps(rows).encode()))
    elif path.name.endswith(".jsonl.gz"):
        path.write_bytes(gzip.compress("".join(json.dumps(row) + "\n" for row in rows).encode()))
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif path.suffix == ".csv":
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture
def raw_dev_rows(lite_raw) -> list[dict]:
    return [dict(row) for row in lite_raw["dev"]]


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".json.gz", ".jsonl.gz", ".csv", ".parquet"])
def test_each_file_format_loads_the_same_rows(tmp_path, suffix, dev_rows, raw_dev_rows):
    path = _write(tmp_path / f"dev{suffix}", raw_dev_rows)
    assert read_file(path) == dev_rows
    tasks = load_tasks(str(path), regex="sqlfluff")
    assert len(tasks) == 5 and all(t.FAIL_TO_PASS for t in tasks)


def _break(rows: list[dict], index: int, **changes) -> list[dict]:
    rows = [dict(row) for row in rows]
    for field, value in changes.items():
        if value is KeyError:
            rows[index].pop(field)
        else:
            rows[index][field] = value
    return rows


BROKEN = [
    ({"FAIL_TO_PASS": "[\"test_a\", "}, "FAIL_TO_PASS.*not a JSON list"),
    ({"PASS_TO_PASS": json.dumps({"test_a": "PASSED"})}, "PASS_TO_PASS.*must be a list"),
    ({"FAIL_TO_PASS": json.dumps([1, 2])}, "FAIL_TO_PASS.*must be a list"),
    ({"base_commit": KeyError}, "missing field 'base_commit'"),
    ({"repo": "not a repo"}, "'repo' must be owner/name"),
    ({"repo": "../x"}, "'repo' must be owner/name"),  # a path that leaves --repos
    ({"repo": "django/.."}, "'repo' must be owner/name"),
    ({"repo": "django/django\n"}, "'repo' must be owner/name"),
]


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize("changes, message", BROKEN)
def test_a_malformed_row_names_its_instance_and_field(tmp_path, suffix, changes, message, raw_dev_rows):
    rows = raw_dev_rows
    if suffix in (".csv", ".parquet") and "base_commit" in changes:
        changes = {"base_commit": None}  # a column cannot be missing from one row only
        if suffix == ".csv":
            changes = {"base_commit": ""}
            message = "'base_commit' is empty"
    broken = _break(rows, 6, **changes)
    path = _write(tmp_path / f"broken{suffix}", broken)
    unit = "line" if suffix == ".jsonl" else "row"
    with pytest.raises(DatasetError, match=message) as info:
        read_file(path)
    assert f"{unit} 7 (instance {rows[6]['instance_id']})" in str(info.value)
    assert str(path) in str(info.value)


def test_wrong_types_in_json(tmp_path, raw_dev_rows):
    rows = raw_dev_rows
    path = _write(tmp_path / "a.json", _break(rows, 0, base_commit=12345))
    with pytest.raises(DatasetError, match=r"row 1 \(instance .*\): field 'base_commit' must be a string, got int"):
        read_file(path)
    path = _write(tmp_path / "b.json", _break(rows, 2, version=3.1))
    with pytest.raises(DatasetError, match="row 3 .*field 'version' must be a string, got float"):
        read_file(path)
    path = _write(tmp_path / "c.json", _break(rows, 1, instance_id=None))
    with pytest.raises(DatasetError, match=r"row 2: missing field 'instance_id'"):
        read_file(path)


def test_file_level_errors(tmp_path, raw_dev_rows):
    rows = raw_dev_rows
    (tmp_path / "obj.json").write_text(json.dumps(rows[0]))
    with pytest.raises(DatasetError, match="must be an array"):
        read_file(tmp_path / "obj.json")
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[0]) + "\n\n{oops\n")
    with pytest.raises(DatasetError, match="line 3 is not valid JSON"):
        read_file(tmp_path / "bad.jsonl")
    _write(tmp_path / "dup.jsonl", [rows[0], rows[1], rows[0]])
    with pytest.raises(DatasetError, match=f"line 3: instance {rows[0]['instance_id']} appears twice"):
        read_file(tmp_path / "dup.jsonl")
    _write(tmp_path / "cols.csv", [{k: v for k, v in row.items() if k != "PASS_TO_PASS"} for row in rows])
    with pytest.raises(DatasetError, match="missing column.*PASS_TO_PASS"):
        read_file(tmp_path / "cols.csv")
    with pytest.raises(DatasetError, match="does not exist"):
        read_file(tmp_path / "none.jsonl")
    shutil.copy(tmp_path / "obj.json", tmp_path / "x.yaml")
    with pytest.raises(DatasetError, match="unknown dataset format .yaml"):
        read_file(tmp_path / "x.yaml")
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b"{}")[:-6])
    with pytest.raises(DatasetError, match="cut.jsonl.gz: not a readable gzip file"):
        read_file(tmp_path / "cut.jsonl.gz")
    (tmp_path / "latin1.jsonl").write_bytes(json.dumps(rows[0]).encode() + b"\n\xe9\n")
    with pytest.raises(DatasetError, match="latin1.jsonl: not UTF-8 text"):
        read_file(tmp_path / "latin1.jsonl")


def test_ids_that_would_share_an_output_folder_are_refused_naming_both(tmp_path, raw_dev_rows):
    """On main, `a/b` and `a:b` both wrote instances/a_b: one's empty patch was graded with the other's report."""
    rows = raw_dev_rows[:3]
    rows[1]["instance_id"], rows[2]["instance_id"] = "django__django/1", "django__django:1"
    path = _write(tmp_path / "clash.jsonl", rows)
    with pytest.raises(DatasetError, match=r"instances 'django__django/1' and 'django__django:1' would share one "
                                           r"output folder \(instances/django__django_1\)"):
        read_file(path)
    rows[2]["instance_id"] = "DJANGO__DJANGO/1"  # one folder on a case-insensitive disk
    with pytest.raises(DatasetError, match="'django__django/1' and 'DJANGO__DJANGO/1' would share"):
        read_file(_write(tmp_path / "case.jsonl", rows))


def test_the_batch_refuses_clashing_ids_and_keeps_dots_inside_its_folder(tmp_path):
    from codeagent.evals.batch import grade_batch
    from codeagent.evals.runner import BatchDir

    tasks = [Task(repo="r", instance_id=name, problem_statement="x") for name in ("a b", "a/b")]
    with pytest.raises(ValueError, match="'a b' and 'a/b' would share one output folder"):
        grade_batch(tasks, {}, tmp_path / "out", model_name="m")
    batch = BatchDir(tmp_path / "out")
    for name in ("..", ".", ""):
        assert batch.instance(name).root.parent == tmp_path / "out" / "instances", name


def test_repo_under_refuses_what_is_not_owner_name(tmp_path):
    from codeagent.data.swebench import repo_under

    assert repo_under(tmp_path, "django/django", "i1") == tmp_path / "django" / "django"
    for name in ("../x", "x/..", "./x", "a/b/c", "", None, "/etc/passwd"):
        with pytest.raises(DatasetError, match=r"i1: its repository .* is not owner/name"):
            repo_under(tmp_path, name, "i1")


def test_escape_sequences_in_an_instance_id_are_shown_in_the_progress_line(capfd):
    from codeagent.evals.batch import _say

    _say("django\x1b]0;pwned\x07\x1b[2J\nfake", "tests running 30s: ok")
    err = capfd.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1
    assert err == "[django^[]0;pwned^G^[[2J fake] tests running 30s: ok\n"


def test_eval_grade_refuses_clashing_ids_before_any_work(tmp_path, raw_dev_rows):
    rows = raw_dev_rows[:2]
    rows[0]["instance_id"], rows[1]["instance_id"] = "calc/1", "calc:1"
    dataset = _write(tmp_path / "clash.jsonl", rows)
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": row["instance_id"], "model_name_or_path": "m",
                                               "model_patch": ""}) + "\n" for row in rows))
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
                           "--predictions", str(predictions), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert "instances 'calc/1' and 'calc:1' would share one output folder (instances/calc_1)" in proc.stderr
    assert not (tmp_path / "out" / "instances" / "calc_1").exists()


def test_escape_sequences_and_markup_in_an_instance_id_are_shown_in_eval_progress(tmp_path, raw_dev_rows):
    """The progress line names the last instance: on main its escape sequence reached the terminal
    (and a `[/]` in an id would have been read as Rich markup)."""
    rows = raw_dev_rows[:1]
    rows[0]["instance_id"] = "calc-1\x1b]0;pwned\x07[/][red]"
    dataset = _write(tmp_path / "evil.jsonl", rows)
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"instance_id": rows[0]["instance_id"], "model_name_or_path": "m",
                                       "model_patch": ""}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
                           "--predictions", str(predictions), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "last calc-1^[]0;pwned^G[/][red]" in proc.stderr.replace("\n", "")
