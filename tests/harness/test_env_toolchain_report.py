"""A repository's graded test command (contract 3): `test_report(snap)` reads the `test_report:` data of
languages/*.yaml for the toolchain its files choose; for Node, the runner package.json uses."""

from __future__ import annotations

import json

import pytest

from codeagent.harness.logs.parsers import PARSERS
from codeagent.harness.specs.toolchains import toolchains
from codeagent.harness.toolchain.resolve import TestReport, test_report
from codeagent.sandbox import snapshot

from ..support.toolchains import toolchain_repo


@pytest.mark.parametrize("name, language, starts, parser", [
    ("go", "go", "go test -json ./...", "go_json"),
    ("rust", "rust", "cargo test --workspace --no-fail-fast --offline", "cargo"),
    # never an install before the tests: the image installed the packages once
    ("node", "node", "NODE_OPTIONS=--test-reporter=tap npm run test", "tap"),
    ("maven", "java", "find . -path '*/target/surefire-reports' -type d -prune -exec rm -rf {} +; mvn -o -B -q test",
     "junit_xml"),
    ("c", "c/c++", "make test && echo 'PASS: make test'", "jq"),
])
def test_each_toy_repository_has_its_report(tmp_path, name, language, starts, parser):
    report = test_report(snapshot(toolchain_repo(name, tmp_path)))
    assert isinstance(report, TestReport) and report.language == language and report.log_parser == parser
    assert report.command.startswith(starts)


def package(scripts: dict | None = None, dev: dict | None = None, deps: dict | None = None) -> str:
    return json.dumps({"name": "x", **({"scripts": scripts} if scripts else {}),
                       **({"devDependencies": dev} if dev else {}), **({"dependencies": deps} if deps else {})})


@pytest.mark.parametrize("files, command, parser", [
    ({"package.json": package({"test": "jest --coverage"})}, "npx --no-install jest --ci --json --coverage", "jest_json"),
    ({"package.json": package({"test": "vitest"}, {"vitest": "^1"})}, "npx --no-install vitest run --reporter=json",
     "vitest_json"),
    # the test script names the runner: it wins over another runner among the dependencies
    ({"package.json": package({"test": "eslint . && mocha 'test/**/*.js'"}, {"jest": "^29"})},
     "npx --no-install mocha --reporter json 'test/**/*.js'", "mocha_json"),
    # no runner in the script (a wrapper): the first runner among the dependencies
    ({"package.json": package({"test": "node scripts/test.js"}, deps={"vitest": "1", "mocha": "10"})},
     "npx --no-install vitest run --reporter=json", "vitest_json"),
    ({"package.json": package({"test": "ts-scripts test && npm run size"}, {"@borderless/ts-scripts": "1",
                                                                         "vitest": "4"})},
     "npx --no-install vitest run --reporter=json", "vitest_json"),
    ({"package.json": package({"test": "node --test test/"})}, "NODE_OPTIONS=--test-reporter=tap npm run test", "tap"),
    # a lockfile: the package manager runs the binary; nothing is installed before the tests
    ({"package.json": package({"test": "jest"}), "yarn.lock": "# yarn lockfile v1\n"}, "yarn --silent jest --ci --json",
     "jest_json"),
    ({"package.json": package({"test": "vitest run"}), "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
     "pnpm exec vitest run --reporter=json", "vitest_json"),
    # followed through the scripts it runs, with their environment and arguments (watch/coverage aside)
    ({"package.json": package({"test": "npm run lint && npm run test:unit", "test:unit":
                               "cross-env NODE_OPTIONS=--experimental-vm-modules jest --coverage --runInBand"})},
     "NODE_OPTIONS=--experimental-vm-modules npx --no-install jest --ci --json --coverage --runInBand", "jest_json"),
    ({"package.json": package({"test": "run-s test:*", "test:types": "tsc", "test:unit": "vitest --watch --config v.ts"})},
     "npx --no-install vitest run --reporter=json --config v.ts", "vitest_json"),
    ({"package.json": package({"pretest": "npm run build", "test": "mocha -R spec test/"})},
     "npm run pretest; npx --no-install mocha --reporter json test/", "mocha_json"),
    # no script, no dependency: the runner's configuration at the top
    ({"package.json": package({"test": "make test"}), "vitest.config.ts": ""},
     "npx --no-install vitest run --reporter=json", "vitest_json"),
    ({"package.json": package({"test": "tape test/*.js"}, {"tape": "5"})}, "npm run test", "tap"),
    # started the way the script starts it
    ({"package.json": package({"test": "node --expose-gc ./node_modules/vitest/dist/cli-wrapper.js --run && vitest "
                                       "--run --typecheck.only"}), "yarn.lock": "__metadata:\n  version: 8\n"},
     "node --expose-gc ./node_modules/vitest/dist/cli-wrapper.js run --reporter=json", "vitest_json"),
    # the build the script runs before the tests (not its lint)
    ({"package.json": package({"test": "npm run lint && pnpm run build && pnpm run test-only", "lint": "eslint .",
                               "build": "tsup src", "test-only": "vitest run"}), "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
     "pnpm run build; pnpm exec vitest run --reporter=json", "vitest_json"),
    # a task runner's file: the command it runs, as the developer who wrote it runs it
    ({"package.json": package({"test": "npx jake test"}, {"mocha": "10", "jake": "10"}),
      "jakefile.js": "task('testOnly', function () {\n  exec(path.join('./node_modules/.bin/mocha --u tdd'));\n});\n"},
     "./node_modules/.bin/mocha --reporter json --u tdd", "mocha_json"),
    # ... after its build task, which the test task depends on (ejs: its tests require lib/cjs/, which `build` makes)
    ({"package.json": package({"test": "npx jake test"}, {"mocha": "10", "jake": "10"}),
      "jakefile.js": "task('build', ['lint', 'compile']);\ntask('test', ['build', 'testOnly']);\n"
                     "task('testOnly', function () {\n  exec(path.join('./node_modules/.bin/mocha --u tdd'));\n});\n"},
     "npx --no-install jake build; ./node_modules/.bin/mocha --reporter json --u tdd", "mocha_json"),
    # a task file's prose is no command (axios' Gruntfile: 'Run the jasmine and mocha tests' ran `mocha tests`)
    ({"package.json": package({"test": "grunt test"}, {"mocha": "10", "grunt": "1"}), "test/a.js": "",
      "Gruntfile.js": "grunt.registerTask('test', 'Run the jasmine and mocha tests', ['eslint', 'mochaTest']);\n"},
     "npx --no-install mocha --reporter json", "mocha_json"),
    ({"package.json": package({"test": "make test"}, {"mocha": "10"}),
      "Makefile": "compile:\n\ttsc\n\ntest: compile\n\tmocha -R spec test/\n"},
     "make compile; npx --no-install mocha --reporter json test/", "mocha_json"),
    ({"package.json": package({"test": "make test"}, {"mocha": "10"}), "Makefile": "test:\n\tmocha -R spec test/\n"},
     "npx --no-install mocha --reporter json test/", "mocha_json"),
    # pnpm's `run /regex/`, and a wrapper of node's own runner
    ({"package.json": package({"test": "pnpm run /^test:/", "test:lint": "oxlint", "test:unit": "bnt --coverage 100"}),
      "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
     "NODE_OPTIONS=--test-reporter=tap pnpm exec bnt --coverage 100", "tap"),
    ({"package.json": package({"test": "tap run --allow-empty-coverage --timeout=60000"})},
     "npx --no-install tap --reporter=tap --allow-empty-coverage --timeout=60000", "tap"),
    # mocha among the dependencies, started by the project's own script (node-fs-extra's `nyc node test.js`), its
    # tests outside mocha's default test/*.js: given globs of them, by top folder
    ({"package.json": package({"test": "npm run unit", "unit": "nyc node test.js"}, {"mocha": "10", "nyc": "15"}),
      "test.js": "const Mocha = require('mocha')\n", "test/readme.md": "",
      "lib/copy/__tests__/copy.test.js": "", "lib/fs/__tests__/fs.test.js": "", "lib/esm.test.mjs": "",
      "node_modules/x/a.test.js": ""},
     "npx --no-install mocha --reporter json 'lib/**/*.test.js' 'lib/**/*.test.mjs'", "mocha_json"),
    # ... but not where its default holds tests, nor where its configuration says where they are
    ({"package.json": package({"test": "node run.js"}, {"mocha": "10"}), "test/a.js": "", "lib/x.test.js": ""},
     "npx --no-install mocha --reporter json", "mocha_json"),
    ({"package.json": package({"test": "node run.js"}, {"mocha": "10"}), ".mocharc.yml": "spec: lib\n",
      "lib/x.test.js": ""},
     "npx --no-install mocha --reporter json", "mocha_json"),
    ({"package.json": json.dumps({"name": "x", "scripts": {"test": "node run.js"}, "devDependencies": {"mocha": "10"},
                                  "mocha": {"spec": "lib/**/*.test.js"}}), "lib/x.test.js": ""},
     "npx --no-install mocha --reporter json", "mocha_json"),
])
def test_node_reports_by_the_runner_package_json_uses(make_repo, files, command, parser):
    report = test_report(snapshot(make_repo(files)))
    assert report == TestReport("node", command, parser)


@pytest.mark.parametrize("files", [
    {"package.json": package({"test": "jester"}, {"jestish": "1"})},  # a runner's name inside another word
    {"package.json": package({"test": "jasmine"}, {"jasmine": "5"})},  # a runner no parser reads
    {"package.json": "{not json"},
    {"package.json": "[1, 2]"},
    {"main.py": "", "test_main.py": ""},  # Python: the miner and the verifiers use pytest
])
def test_no_report_where_no_known_runner_or_toolchain(make_repo, files):
    assert test_report(snapshot(make_repo(files))) is None


@pytest.mark.parametrize("files, starts, parser", [
    ({"CMakeLists.txt": "project(x C)\n", "x.c": ""}, "rm -f build/codeagent-ctest.xml; cmake -S . -B build", "junit_xml"),
    ({"Makefile": "check:\n\t./t\n", "t.c": ""}, "make check && echo 'PASS: make check'", "jq"),
    ({"build.gradle": "", "settings.gradle": ""}, "find . -path '*/build/test-results'", "junit_xml"),
    ({"build.gradle.kts": ""}, "find . -path '*/build/test-results'", "junit_xml"),
])
def test_variants_have_their_own_report(make_repo, files, starts, parser):
    report = test_report(snapshot(make_repo(files)))
    assert report is not None and report.command.startswith(starts) and report.log_parser == parser


def test_every_report_names_a_registered_log_parser():
    named = set()
    for tool in toolchains():
        recipes = [tool.test_report, *(v.test_report for v in tool.variants), *(r.test_report for r in tool.runners)]
        named |= {recipe.log_parser for recipe in recipes if recipe}
    assert named and not named - set(PARSERS), f"not in PARSERS: {sorted(named - set(PARSERS))}"
