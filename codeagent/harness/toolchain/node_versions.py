"""Node.js at the version a repository states, from the npm registry's `node-linux-<arch>` packages, with
the newest npm whose `engines.node` accepts it.

Run inside a toolchain layer's build container (stdlib only: `python3 -I -S node_versions.py STATED DEFAULT`,
resolve.py ships it in), and imported on the host by the tests. STATED is what the repository says
(`.nvmrc`, `.node-version`, `engines.node`, `volta.node`: `20`, `v20.11.1`, `^20 || >=22`, `lts/*`,
`lts/iron`); when nothing satisfies it, DEFAULT is used and the fallback is said in one line. What was
installed, and why, is written to /etc/codeagent/notes/node for the environment line. npm: the newest of
the majors Node bundles (NPM_MAJOR at most) whose `engines.node` accepts the chosen Node.

The range grammar is npm's (node-semver): `||` alternatives, space-separated comparators, `^`, `~`, x-ranges
(`20`, `20.x`, `*`), hyphen ranges, `<`, `<=`, `>`, `>=`, `=`. Pre-releases are never chosen.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import platform
import re
import shutil
import sys
import tarfile
import urllib.request

REGISTRY = os.environ.get("npm_config_registry", "https://registry.npmjs.org").rstrip("/")
PREFIX = "/usr/local"
NOTE = "/etc/codeagent/notes/node"
CODENAMES = {"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12, "fermium": 14, "gallium": 16,
             "hydrogen": 18, "iron": 20, "jod": 22, "krypton": 24}
_PARTIAL = r"[vV=]?\s*([0-9xX*]+)(?:\.([0-9xX*]+)(?:\.([0-9xX*]+)(?:-[0-9A-Za-z.-]+)?)?)?(?:\+[0-9A-Za-z.-]+)?"
_COMPARATOR = re.compile(rf"^(<=|>=|<|>|=|\^|~>?|)\s*{_PARTIAL}$")
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
# npm's newest major that Node's release lines bundle: a newer one changes defaults a lockfile was made
# under (npm 12 refuses a lockfile's remote tarballs); `packageManager: npm@X` installs X all the same
NPM_MAJOR = 11

Version = tuple[int, int, int]


def parse_version(text: str) -> Version | None:
    """A plain release (`20.11.1`, `v20.11.1`), or None (a pre-release, or not a version)."""
    match = _RELEASE.match(text.strip())
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def _wild(part: str | None) -> bool:
    return part is None or part in ("x", "X", "*")


def _comparators(simple: str) -> list[tuple[str, Version]]:
    """One comparator of the grammar as plain (operator, version) pairs, all of which must hold."""
    match = _COMPARATOR.match(simple)
    if not match:
        raise ValueError(f"not a version range: {simple!r}")
    operator, *parts = match.groups()
    if _wild(parts[0]):
        return [(">=", (0, 0, 0))] if operator not in ("<", ">") else [("<", (0, 0, 0))]
    major = int(parts[0])
    minor = None if _wild(parts[1]) else int(parts[1])
    patch = None if minor is None or _wild(parts[2]) else int(parts[2])
    low = (major, minor or 0, patch or 0)
    if minor is None:
        high = (major + 1, 0, 0)
    elif patch is None:
        high = (major, minor + 1, 0)
    else:
        high = low
    if operator in ("", "="):
        return [("=", low)] if patch is not None else [(">=", low), ("<", high)]
    if operator.startswith("~"):
        return [(">=", low), ("<", (major + 1, 0, 0) if minor is None else (major, minor + 1, 0))]
    if operator == "^":
        if major or minor is None:
            return [(">=", low), ("<", (major + 1, 0, 0))]
        if minor or patch is None:
            return [(">=", low), ("<", (0, minor + 1, 0))]
        return [(">=", low), ("<", (0, 0, patch + 1))]
    if operator == ">":
        return [(">", low)] if patch is not None else [(">=", high)]
    if operator == "<=":
        return [("<=", low)] if patch is not None else [("<", high)]
    return [(operator, low)]  # >= and < of a partial mean its lowest version


def _alternative(text: str) -> list[tuple[str, Version]]:
    text = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", text.strip())  # `>= 18` is `>=18`
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", text)
    if hyphen:
        low = _comparators(hyphen.group(1))[0]
        return [(">=", low[1]), *_comparators("<=" + hyphen.group(2).lstrip("vV="))]
    return [pair for simple in text.split() for pair in _comparators(simple)] or [(">=", (0, 0, 0))]


def parse_range(text: str) -> list[list[tuple[str, Version]]]:
    """An npm range as alternatives of comparators (ValueError: not one)."""
    return [_alternative(part) for part in text.split("||")]


def satisfies(version: Version, ranges: list[list[tuple[str, Version]]]) -> bool:
    tests = {"=": version.__eq__, "<": version.__lt__, "<=": version.__le__, ">": version.__gt__, ">=": version.__ge__}
    return any(all(tests[operator](bound) for operator, bound in alternative) for alternative in ranges)


def choose(stated: str, available: list[str]) -> Version | None:
    """The newest of `available` that `stated` allows, in a long-term-support line (even, and its successor
    released) when it allows one; aliases: `node`/`latest`/`current`/`stable`, `lts/*`, `lts/<codename>`.
    None when none does."""
    versions = sorted(v for v in map(parse_version, available) if v)
    if not versions:
        return None
    wanted = stated.strip().lower()
    if wanted in ("node", "latest", "current", "stable"):
        return versions[-1]
    majors = {version[0] for version in versions}
    lts = max((major for major in majors if major % 2 == 0 and major + 1 in majors), default=None)
    if wanted.startswith("lts/"):
        name = wanted[4:]
        major = lts if name in ("*", "latest", "-1") else CODENAMES.get(name)
        return max((v for v in versions if v[0] == major), default=None)
    try:
        ranges = parse_range(wanted)
    except ValueError:
        return None
    fits = [v for v in versions if satisfies(v, ranges)]
    # an open range (`>=18`) gets the newest long-term-support line it allows, as a developer installs
    supported = [v for v in fits if lts is not None and v[0] <= lts and v[0] % 2 == 0]
    return max(supported or fits, default=None)


def _get(url: str, accept: str = "application/json") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=600) as response:
        return response.read()


def _packument(name: str) -> dict:
    return json.loads(_get(f"{REGISTRY}/{name}", "application/vnd.npm.install-v1+json; q=1.0, application/json"))


def _fetch(meta: dict) -> bytes:
    dist = meta["dist"]
    data = _get(dist["tarball"], "application/octet-stream")
    integrity = str(dist.get("integrity") or "")
    if integrity.startswith("sha512-"):
        if base64.b64encode(hashlib.sha512(data).digest()).decode() != integrity[7:]:
            raise SystemExit(f"{dist['tarball']}: its sha512 is not the registry's")
    elif dist.get("shasum") and hashlib.sha1(data).hexdigest() != dist["shasum"]:  # noqa: S324 - the registry's own
        raise SystemExit(f"{dist['tarball']}: its sha1 is not the registry's")
    return data


def _extract(data: bytes, into: str, keep) -> None:
    """The package's files (`package/...`) under `into`, where `keep(path)` says so."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            path = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not path or ".." in path.split("/") or path.startswith("/") or not keep(path):
                continue
            target = os.path.join(into, path)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                source = archive.extractfile(member)
                assert source is not None
                with open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)


def _link(target: str, name: str) -> None:
    path = os.path.join(PREFIX, "bin", name)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(target, path)


def install(stated: str, default: str) -> str:
    """Install Node and npm; the line that says what and why."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    package = f"node-linux-{arch}"
    releases = _packument(package)["versions"]
    chosen = choose(stated, list(releases)) if stated else None
    if chosen is None:
        fallback = choose(default, list(releases))
        if fallback is None:
            raise SystemExit(f"{package}: no release satisfies {default!r} either")
        said = (f"node {'.'.join(map(str, fallback))} (the repository states {stated!r}, which no release of {package} "
                f"satisfies: the default {default} instead)" if stated else
                f"node {'.'.join(map(str, fallback))} (no version stated: the default {default})")
        chosen = fallback
    else:
        said = f"node {'.'.join(map(str, chosen))} (the repository states {stated!r})"
    name = next(key for key in releases if parse_version(key) == chosen)
    _extract(_fetch(releases[name]), PREFIX, lambda path: path.startswith(("bin/", "include/", "share/")))
    npm = _packument("npm")["versions"]
    fits = [key for key, meta in npm.items() if (version := parse_version(key)) and version[0] <= NPM_MAJOR
            and _engine_allows(meta, chosen)]
    if fits:
        newest = max(fits, key=lambda key: parse_version(key) or (0, 0, 0))
        folder = os.path.join(PREFIX, "lib", "node_modules", "npm")
        shutil.rmtree(folder, ignore_errors=True)
        _extract(_fetch(npm[newest]), folder, lambda path: True)
        _link("../lib/node_modules/npm/bin/npm-cli.js", "npm")
        _link("../lib/node_modules/npm/bin/npx-cli.js", "npx")
        said += f", npm {newest}"
    os.makedirs(os.path.dirname(NOTE), exist_ok=True)
    with open(NOTE, "w") as out:
        out.write(said + "\n")
    return said


def _engine_allows(meta: dict, version: Version) -> bool:
    engines = meta.get("engines")
    wanted = str((engines if isinstance(engines, dict) else {}).get("node") or "*")
    try:
        return satisfies(version, parse_range(wanted))
    except ValueError:
        return False


if __name__ == "__main__":
    print(install(sys.argv[1] if len(sys.argv) > 1 else "", sys.argv[2] if len(sys.argv) > 2 else "lts/*"))
