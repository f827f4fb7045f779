"""Which toolchains a repository needs, by evidence (harness/toolchain/detect.py), and the versions it states
(harness/toolchain/node_versions.py picks Node's). On 0972c8d the first toolchain whose file was at the top won: a
Python package with a package.json was a Node repository, and pnpm/yarn were the newest, whatever
`packageManager` said."""

from __future__ import annotations

import json

import pytest

from codeagent.harness.toolchain.resolve import detect
from codeagent.sandbox import snapshot

RELEASES = ["16.20.2", "18.19.0", "18.20.8", "20.11.1", "20.19.5", "21.7.3", "22.12.0", "22.21.1", "23.11.1",
            "24.11.0", "25.2.1", "26.0.0-rc.1"]


@pytest.mark.parametrize("stated, chosen", [
    ("20", (20, 19, 5)), ("v20.11.1", (20, 11, 1)), ("20.11", (20, 11, 1)), ("^20 || ^22", (22, 21, 1)),
    (">=18", (24, 11, 0)),  # an open range: the newest long-term-support line it allows, not the newest odd one
    (">=25", (25, 2, 1)), ("lts/*", (24, 11, 0)), ("lts/iron", (20, 19, 5)), ("node", (25, 2, 1)),
    ("16 - 18", (18, 20, 8)), ("~18.19", (18, 19, 0)), (">= 18.12 < 21", (20, 19, 5)), ("18.x", (18, 20, 8)),
    ("99", None), ("not a version", None),
])
def test_the_node_version_a_repository_states(stated, chosen):
    from codeagent.harness.toolchain.node_versions import choose

    assert choose(stated, RELEASES) == chosen


def test_ranges_read_as_npm_reads_them():
    from codeagent.harness.toolchain.node_versions import parse_range, satisfies

    assert satisfies((0, 2, 5), parse_range("^0.2.3")) and not satisfies((0, 3, 0), parse_range("^0.2.3"))
    assert satisfies((1, 2, 9), parse_range("~1.2")) and not satisfies((1, 3, 0), parse_range("~1.2"))
    assert satisfies((3, 0, 0), parse_range("1 - 2 || >=3")) and not satisfies((2, 5, 0), parse_range(">2 <2.5"))


def package(**fields) -> str:
    return json.dumps({"name": "x", **fields})


def test_a_python_package_with_a_package_json_is_python_first_with_node_beside_it(make_repo):
    snap = snapshot(make_repo({"pyproject.toml": "[project]\nname='p'\n", "p/__init__.py": "", "p/core.py": "",
                               "tests/test_core.py": "", "package.json": package(scripts={"lint": "eslint ."}),
                               "static/app.js": "", "static/ui.js": "", "static/more.js": ""}))
    assert detect(snap) is None  # Python: its tests are pytest's
    from codeagent.harness.toolchain.detect import detect_all

    found = detect_all(snap)
    assert found.primary is None and found.python
    assert [item.toolchain.name for item in found.installed] == ["node"]  # installed beside it


def test_a_typescript_library_with_a_pyproject_for_its_tooling_is_node(make_repo):
    from codeagent.harness.toolchain.detect import detect_all

    snap = snapshot(make_repo({"pyproject.toml": "[tool.black]\n", "package.json": package(scripts={"test": "vitest"}),
                               "src/a.ts": "", "src/b.ts": "", "src/a.test.ts": ""}))
    found = detect_all(snap)
    assert found.primary is not None and found.primary.toolchain.name == "node" and not found.python


def test_a_go_service_with_a_web_ui_is_go_with_node_beside_it(make_repo):
    from codeagent.harness.toolchain.detect import detect_all

    files = {"go.mod": "module x\n\ngo 1.21\n", "main.go": "", "server_test.go": "",
             "web/package.json": "{}", "package.json": package(scripts={"build": "vite build"})}
    files.update({f"web/src/c{number}.ts": "" for number in range(5)})
    found = detect_all(snapshot(make_repo(files)))
    assert [item.toolchain.name for item in found.installed] == ["go", "node"]  # Go has the tests


@pytest.mark.parametrize("files, variant, pm_version", [
    ({"package.json": package(packageManager="pnpm@9.15.0+sha512.abc"), "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
     "pnpm", "9.15.0"),
    ({"package.json": package(), "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, "pnpm", "8"),
    ({"package.json": package(packageManager="pnpm@10.33.0")}, "pnpm", "10.33.0"),  # no lockfile: packageManager
    ({"package.json": package(), "yarn.lock": "__metadata:\n  version: 8\n  cacheKey: 10\n"}, "yarn-berry", "4"),
    ({"package.json": package(packageManager="yarn@3.6.4"), "yarn.lock": "__metadata:\n  version: 6\n"},
     "yarn-berry", "3.6.4"),
    ({"package.json": package(), "yarn.lock": "# yarn lockfile v1\n"}, "yarn", "1"),
    ({"package.json": package(), "package-lock.json": "{}"}, "npm", ""),
    ({"package.json": package()}, None, ""),  # no lockfile: npm resolves at build time
])
def test_the_package_manager_and_its_version(make_repo, files, variant, pm_version):
    found = detect(snapshot(make_repo(files)))
    assert found is not None and (found.variant.name if found.variant else None) == variant
    assert found.pm_version == pm_version


@pytest.mark.parametrize("files, version", [
    ({".nvmrc": "v20.11.1\n", "package.json": package(engines={"node": ">=18"})}, "v20.11.1"),
    ({".node-version": "22\n", "package.json": package(volta={"node": "20.1.0"})}, "22"),
    ({"package.json": package(volta={"node": "20.1.0"}, engines={"node": ">=18"})}, "20.1.0"),
    ({"package.json": package(engines={"node": "^20 || >=22"}, dependencies={"node": "1.0.0"})}, "^20 || >=22"),
    ({"package.json": package()}, ""),
])
def test_the_node_version_is_read_where_developers_state_it(make_repo, files, version):
    found = detect(snapshot(make_repo(files)))
    assert found is not None and found.version == version
