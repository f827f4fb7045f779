"""The toolchain version a candidate was developed with, recorded in its task's environment
(`toolchain_version`, which the harness installs): the newest release out on the unit's date
(languages/releases/toolchains.yaml), or a newer one the repository states. go.mod's `go` line is a
minimum, not what the developers ran: pflag states `go 1.12` and its 2025 tests use Go 1.21's API.

- Go: the newest of go.mod's `go` and `toolchain` lines and the release of the day, as a patch release
  the Go module proxy's golang.org/toolchain has.
- Node: `.nvmrc` (a version, a major, `lts/NAME`) when the repository pins one; else the LTS line of the
  day, held within `engines.node`'s bounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, datetime
from functools import lru_cache
from typing import Any

Reader = Callable[[str], str | None]  # a path at the base commit -> its text (None: no such file)


@lru_cache(maxsize=1)
def releases() -> dict[str, list[dict[str, Any]]]:
    import yaml

    from ..assets import asset_path

    return yaml.safe_load(asset_path("languages", "releases", "toolchains.yaml").read_text())


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _day(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value))


def _on(when: str) -> date:
    return datetime.fromisoformat(when.replace("Z", "+00:00")).date()


def go_version(read: Reader, when: str) -> str | None:
    """The Go of the unit's day, or the newer one go.mod states; None: no go.mod."""
    text = read("go.mod")
    if text is None:
        return None
    stated = [match.group(1) for match in re.finditer(r"(?m)^\s*(?:go|toolchain go)\s*v?(\d+\.\d+(?:\.\d+)?)\s*$", text)]
    known = releases()["go"]
    out = [entry for entry in known if _day(entry["released"]) <= _on(when)]
    chosen = str(out[-1]["install"]) if out else None
    for version in stated:
        if chosen is None or _key(version) > _key(chosen):
            minor = ".".join(version.split(".")[:2])
            entry = next((entry for entry in known if entry["minor"] == minor), None)
            # a bare minor (go 1.22) is installed as the patch release listed for it
            chosen = version if version.count(".") == 2 or entry is None else str(entry["install"])
    return chosen


def node_version(read: Reader, when: str) -> str | None:
    """The Node of the unit's day (a major), or the one `.nvmrc` pins; None: no package.json."""
    manifest = read("package.json")
    if manifest is None:
        return None
    lines = releases()["node"]
    pinned = (read(".nvmrc") or read(".node-version") or "").strip()
    if match := re.fullmatch(r"v?(\d+(?:\.\d+){0,2})", pinned):
        return match.group(1)
    if match := re.fullmatch(r"lts/(\w+)", pinned.lower()):
        named = next((line["major"] for line in lines if line["codename"] == match.group(1)), None)
        if named:
            return str(named)
    out = [str(line["major"]) for line in lines if _day(line["lts"]) <= _on(when)]
    chosen = int(out[-1]) if out else int(lines[0]["major"])
    try:
        engines = str((json.loads(manifest).get("engines") or {}).get("node") or "")
    except (ValueError, AttributeError):
        engines = ""
    low = re.search(r">=?\s*v?(\d+)", engines) or re.match(r"\s*[\^~]?\s*v?(\d+)", engines)
    high = re.search(r"<\s*v?(\d+)", engines)
    if low and int(low.group(1)) > chosen:
        chosen = int(low.group(1))
    if high and chosen >= int(high.group(1)):
        below = [int(line["major"]) for line in lines if int(line["major"]) < int(high.group(1))]
        chosen = max(below) if below else chosen
    return str(chosen)


VERSIONS: dict[str, Callable[[Reader, str], str | None]] = {"go": go_version, "node": node_version}


def toolchain_version(language: str, read: Reader, when: str) -> str | None:
    """The version to record for a repository of `language` at a unit made `when` (None: the harness's own rule)."""
    rule = VERSIONS.get(language)
    return rule(read, when) if rule else None
