"""The predictions `eval grade --predictions` reads (SWE-bench's format), checked line by line."""

from __future__ import annotations

import json
from pathlib import Path

import click


def read_predictions(path: Path) -> dict[str, dict]:
    """SWE-bench predictions (.jsonl: one per line; else a JSON list or {id: prediction}). Every
    problem is a one-line error naming the line: bad UTF-8, bad JSON, missing fields, duplicate ids.
    A patch's non-UTF-8 bytes are \\udcXX escapes (codeagent.patches), never raw bytes."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise click.ClickException(f"{path}:{line}: not UTF-8 (byte {error.start}); predictions must be "
                                   "UTF-8 JSON, with patch bytes that are not UTF-8 written as \\udcXX escapes") from None
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                rows.append((number, _json(line, path, number)))
    else:
        loaded = _json(text, path, None)
        listed = list(loaded.values()) if isinstance(loaded, dict) else loaded
        if not isinstance(listed, list):
            raise click.ClickException(f"{path}: expected a JSON list of predictions or an object of them")
        rows = list(enumerate(listed, start=1))
    found: dict[str, dict] = {}
    duplicates: list[str] = []
    where = "line" if path.suffix == ".jsonl" else "prediction"
    for number, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str) or "model_patch" not in row:
            raise click.ClickException(f"{path}: {where} {number} needs instance_id (a string) and model_patch")
        if not isinstance(row["model_patch"], (str, type(None))):
            raise click.ClickException(f"{path}: {where} {number}: model_patch must be a string or null")
        if row["instance_id"] in found and row["instance_id"] not in duplicates:
            duplicates.append(row["instance_id"])
        found[row["instance_id"]] = row
    if duplicates:
        raise click.ClickException(f"{path}: more than one prediction for {ids_text(duplicates)}; keep one each")
    return found


class _RepeatedKeys(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    if repeated:  # json.loads would silently keep the last one
        raise _RepeatedKeys(", ".join(repeated))
    return dict(pairs)


def _json(text: str, path: Path, line: int | None):
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKeys as error:
        where = f"{path}:{line}" if line is not None else str(path)
        raise click.ClickException(f"{where}: a JSON object gives more than one value for {error}") from None
    except ValueError as error:
        at = line if line is not None else getattr(error, "lineno", "?")
        raise click.ClickException(f"{path}:{at}: not valid JSON ({getattr(error, 'msg', error)})") from None


def check_known(found: dict[str, dict], dataset: str) -> None:
    """Every prediction names an instance of the data set (a ClickException lists the others)."""
    from ..data import load_tasks

    known = {task.instance_id for task in load_tasks(dataset)}
    unknown = [instance_id for instance_id in found if instance_id not in known]
    if unknown:
        raise click.ClickException(f"{len(unknown)} prediction(s) for instances that are not in {dataset}: "
                                   f"{ids_text(unknown)}")


def ids_text(ids: list[str], shown: int = 10) -> str:
    return ", ".join(ids[:shown]) + (f" ... ({len(ids) - shown} more)" if len(ids) > shown else "")


def model_name(found: dict[str, dict]) -> str:
    names = {row.get("model_name_or_path") or "model" for row in found.values()}
    return sorted(names)[0] if len(names) == 1 else "mixed"
