"""SWE-bench datasets: rows by name or from a file, each row checked (loaders.py makes them Tasks).

    load_rows("lite")
    load_rows("my-instances.jsonl.gz")

A name comes from the registry, evals/datasets.yaml: a Hugging Face id + split, and optionally a
copy that ships in evals/ (SWE-bench Lite's test and dev splits do), read offline. Only a name
without one goes to the hub (`datasets.load_dataset`, imported here lazily). `hf:<id>[:<split>]`
names any hub dataset directly. A file may be a .json array, .jsonl, .parquet or .csv of SWE-bench
rows; .json and .jsonl may be gzipped (.json.gz, .jsonl.gz).

Every row is checked before it becomes a Task: a missing field, a wrong type or a FAIL_TO_PASS that
is not a JSON list raises a DatasetError naming the row, its instance id and the field.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ..assets import asset_path
from .errors import DatasetError
from .ids import check_distinct_folders

FILE_SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".parquet", ".csv")

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch",
            "FAIL_TO_PASS", "PASS_TO_PASS")
OPTIONAL_TEXT = ("patch", "hints_text", "created_at", "version", "environment_setup_commit")
_REPO = re.compile(r"[\w.-]+/[\w.-]+")


def is_repo_name(name: Any) -> bool:
    """owner/name, neither part a `.` or `..` (a dataset's value becomes a path under --repos)."""
    return isinstance(name, str) and bool(_REPO.fullmatch(name)) and all(part.strip(".") for part in name.split("/"))


def repo_under(repos: str | Path, name: Any, instance_id: str) -> Path:
    """The mirror of the dataset's repository `name` (owner/name) under the --repos folder."""
    if not is_repo_name(name):
        raise DatasetError(f"{instance_id}: its repository {str(name)[:100]!r} is not owner/name (like django/django)")
    return Path(repos) / name


class DatasetSpec(BaseModel):
    name: str
    description: str = ""
    hf: str | None = None
    split: str = "test"
    local: str | None = None


# ------------------------------------------------------------------------------------- registry

def registry(path: Path | None = None) -> dict[str, DatasetSpec]:
    """The named datasets of evals/datasets.yaml (or of `path`)."""
    path = path or asset_path("evals", "datasets.yaml")
    data = yaml.safe_load(Path(path).read_text()) or {}
    entries = data.get("datasets") or {}
    if not isinstance(entries, dict):
        raise DatasetError(f"{path}: `datasets` must be a mapping of names to entries")
    return {name: DatasetSpec(name=name, **(entry or {})) for name, entry in entries.items()}


def local_file(spec: DatasetSpec) -> Path | None:
    """The shipped copy of a registry dataset (`local`, relative to evals/); None if it has none."""
    if not spec.local:
        return None
    local = Path(spec.local).expanduser()
    path = local if local.is_absolute() else asset_path("evals", spec.local)
    if not path.is_file():
        raise DatasetError(f"dataset {spec.name!r}: its file {path} is missing from this installation; "
                           f"reinstall codeagent")
    return path.resolve()


# ---------------------------------------------------------------------------------------- rows

def _where(number: int, row: Any, unit: str = "row") -> str:
    instance = row.get("instance_id") if isinstance(row, dict) else None
    if isinstance(instance, str) and instance:
        return f"{unit} {number} (instance {instance})"
    return f"{unit} {number}"


def _test_list(value: Any, field: str, where: str) -> list[str]:
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: field {field!r} is not a JSON list ({exc.msg}): {value[:80]!r}") from None
    if hasattr(value, "tolist"):  # a numpy array, from pandas
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DatasetError(f"{where}: field {field!r} must be a list of test ids (or a JSON string of "
                           f"one), got {type(value).__name__}: {str(value)[:80]!r}")
    return value


def validate_row(row: Any, where: str) -> dict[str, Any]:
    """A checked copy of one SWE-bench row, FAIL_TO_PASS/PASS_TO_PASS decoded to lists."""
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object with SWE-bench fields, got {type(row).__name__}")
    for field in REQUIRED:
        if row.get(field) is None:
            raise DatasetError(f"{where}: missing field {field!r}")
    out = dict(row)
    for field in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch"):
        if not isinstance(row[field], str):
            raise DatasetError(f"{where}: field {field!r} must be a string, got {type(row[field]).__name__}")
    for field in ("instance_id", "repo", "base_commit"):
        if not row[field].strip():
            raise DatasetError(f"{where}: field {field!r} is empty")
    if not is_repo_name(row["repo"]):
        raise DatasetError(f"{where}: field 'repo' must be owner/name (like django/django), got {row['repo']!r}")
    for field in OPTIONAL_TEXT:
        value = row.get(field)
        if field == "created_at" and value is not None and hasattr(value, "isoformat"):
            out[field] = value.isoformat()  # a timestamp column, from parquet
        elif value is not None and not isinstance(value, str):
            raise DatasetError(f"{where}: field {field!r} must be a string, got {type(value).__name__} {value!r}")
    for field in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        out[field] = _test_list(row[field], field, where)
    return out


def _validate_all(rows: list[Any], source: str, unit: str = "row",
                  numbers: list[int] | None = None) -> list[dict[str, Any]]:
    out, seen = [], dict[str, int]()
    for number, row in zip(numbers or range(1, len(rows) + 1), rows):
        checked = validate_row(row, f"{source}: {_where(number, row, unit)}")
        instance = checked["instance_id"]
        if instance in seen:
            raise DatasetError(f"{source}: {unit} {number}: instance {instance} appears twice "
                               f"(also {unit} {seen[instance]})")
        seen[instance] = number
        out.append(checked)
    try:
        check_distinct_folders(seen)
    except ValueError as error:
        raise DatasetError(f"{source}: {error}") from None
    return out


def _file_format(path: Path) -> str:
    name = path.name.lower()
    return next((suffix for suffix in sorted(FILE_SUFFIXES, key=len, reverse=True) if name.endswith(suffix)),
                path.suffix.lower())


def _text(path: Path, gzipped: bool) -> str:
    try:
        return (gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()).decode("utf-8")
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path}: not a readable gzip file ({exc})") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_file(path: str | Path) -> list[dict[str, Any]]:
    """Validated rows of a .json (array), .jsonl (either maybe .gz), .parquet or .csv SWE-bench file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist")
    suffix = _file_format(path)
    gzipped = suffix in (".json.gz", ".jsonl.gz")
    suffix = suffix.removesuffix(".gz") if gzipped else suffix
    source = str(path)
    if suffix == ".json":
        try:
            data = json.loads(_text(path, gzipped))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{source}: not valid JSON ({exc})") from None
        if not isinstance(data, list):
            raise DatasetError(f"{source}: a .json dataset must be an array of instances "
                               f"(got {type(data).__name__}); for one object per line use .jsonl")
        return _validate_all(data, source)
    if suffix == ".jsonl":
        rows, numbers = [], []
        for number, line in enumerate(_text(path, gzipped).splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{source}: line {number} is not valid JSON ({exc})") from None
            numbers.append(number)
        return _validate_all(rows, source, unit="line", numbers=numbers)
    if suffix == ".csv":
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [field for field in REQUIRED if field not in (reader.fieldnames or [])]
            if missing:
                raise DatasetError(f"{source}: missing column(s) {', '.join(missing)}")
            return _validate_all(list(reader), source)
    if suffix == ".parquet":
        try:
            import pyarrow
            import pyarrow.parquet as pq
        except ImportError:
            raise DatasetError("reading .parquet needs pyarrow (pip install pyarrow), or convert the "
                               "file to .jsonl") from None
        try:
            rows = pq.read_table(path).to_pylist()
        except (OSError, pyarrow.ArrowException) as exc:
            raise DatasetError(f"{source}: cannot read parquet ({exc})") from None
        return _validate_all(rows, source)
    raise DatasetError(f"{source}: unknown dataset format {suffix or '(no suffix)'}; "
                       f"use one of {', '.join(FILE_SUFFIXES)}")


def _load_hub(hf_id: str, split: str) -> list[dict[str, Any]]:
    hint = "pass a local file (.json, .jsonl, .parquet or .csv in the SWE-bench format) instead"
    try:
        import datasets
    except ImportError:
        raise DatasetError(f"loading {hf_id!r} from the Hugging Face hub needs the `datasets` package "
                           f"(pip install 'codeagent[data]'); or {hint}") from None
    try:
        rows = [dict(row) for row in datasets.load_dataset(hf_id, split=split)]
    except Exception as exc:
        raise DatasetError(f"could not load {hf_id!r} (split {split!r}) from the Hugging Face hub: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. "
                           f"If the hub is unreachable from here, {hint}") from exc
    return _validate_all(rows, f"{hf_id}[{split}]")


def load_rows(source: str | Path) -> list[dict[str, Any]]:
    """Validated rows of a registry name, `hf:<id>[:<split>]`, or a file path."""
    text = str(source)
    if isinstance(source, str):
        if text.startswith("hf:"):
            hf_id, _, split = text[3:].partition(":")
            return _load_hub(hf_id, split or "test")
        names = registry()
        if text in names:
            spec = names[text]
            local = local_file(spec)
            if local is not None:
                return read_file(local)
            if not spec.hf:
                raise DatasetError(f"dataset {text!r} has no local file here and no Hugging Face id")
            return _load_hub(spec.hf, spec.split)
        if not Path(text).expanduser().exists() and not text.lower().endswith(FILE_SUFFIXES):
            raise DatasetError(f"unknown dataset {text!r}: use one of {', '.join(names)}, "
                               f"hf:<id>[:<split>], or a path to a {'/'.join(FILE_SUFFIXES)} file")
    return read_file(text)
