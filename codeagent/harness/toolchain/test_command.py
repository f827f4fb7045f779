"""A repository's test command, found the way a developer finds it, and its graded form (`test_report`).

- Node: package.json's `test` script, followed through the scripts it runs (`npm run x`, `pnpm x`,
  `yarn x`, `run-s`/`run-p`/`npm-run-all`) to the runner (jest, vitest, mocha, ava, tape, node's own),
  else to the runner a task file starts (a Makefile's recipe, a jakefile's command string), else a runner
  among the dependencies (a wrapper such as `ts-scripts test` runs the project's own
  vitest), else one whose configuration file is at the top; one found that way whose default folder holds
  none of the test files (mocha's test/*.js) is given globs of them. The graded form runs that runner the way the
  script does (the build steps it runs first, its environment assignments, `cross-env`'s too, and its
  own arguments, watch and reporter flags aside) with a reporter its parser reads, through the package
  manager's `exec`, after the `pretest` script when there is one.
- Make: the `test` target, else `check`. Go, Cargo (its whole workspace), Maven (every module), CMake
  (CTest): languages/*.yaml's commands.

Read from git objects (detect.RepoFiles), never from a checkout.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass

from ...sandbox.workspace import RepoSnapshot
from ..specs.toolchains import ReportRecipe, Runner
from .detect import VENDORED, Detected, RepoFiles, detect, test_name_patterns

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
NESTED = re.compile(r"^(?:npm|pnpm|yarn|bun)\s+(?:run(?:-script)?\s+)?(/[^/\s]+/|[\w:.\-/@*]+)|"
                    r"^(?:run-s|run-p|npm-run-all(?:\s+-[sp])?|npm-run-all2)\s+(.+)$")
DROPPED = re.compile(r"^(?:--watch(?:All)?|-w|--run|--ui|--reporters?(?:=.*)?|-R|--json|--ci|--outputFile(?:=.*)?|"
                     r"--silent)$")
VALUED = {"--reporter", "--reporters", "-R", "--outputFile"}  # a dropped flag whose value is the next word
# a step a test script runs before its runner that the tests need (a build), not one that only checks
BUILDING = re.compile(r"\b(build|compile|prepare|generate|codegen|bundle|tsup|rollup|webpack|esbuild|babel)\b")
CHECKING = re.compile(r"\b(lint|eslint|prettier|format|tsc --noEmit|type-?check|size)\b")
TASK_FILES = ("Makefile", "makefile", "jakefile.js", "Jakefile", "Gruntfile.js", "gulpfile.js", "gulpfile.mjs")
# A task file's tool and how it declares a task named NAME: its build task runs before the runner the file starts
# (ejs: `jake test` builds lib/cjs/, then runs mocha on it)
TASK_TOOLS = {"Makefile": ("make", r"^{name}\s*:"), "makefile": ("make", r"^{name}\s*:"),
              "jakefile.js": ("jake", r"\btask\(\s*['\"]{name}['\"]"), "Jakefile": ("jake", r"\btask\(\s*['\"]{name}['\"]"),
              "Gruntfile.js": ("grunt", r"\bregisterTask\(\s*['\"]{name}['\"]"),
              "gulpfile.js": ("gulp", r"\btask\(\s*['\"]{name}['\"]|\bexports\.{name}\b"),
              "gulpfile.mjs": ("gulp", r"\btask\(\s*['\"]{name}['\"]|\bexport\s+(?:const|function)\s+{name}\b")}
BUILD_TASKS = ("build", "compile")
LAUNCHERS = {"npx", "node", "nyc", "c8", "cross-env", "env", "exec", "pnpm", "yarn", "bun", "bunx", "time"}
SUBCOMMANDS = {"vitest": {"run", "watch", "dev", "related"}, "tap": {"run"}}


@dataclass(frozen=True)
class TestReport:
    """How to run a repository's test suite so that it prints what `log_parser` reads: in /testbed,
    in its toolchain's image, offline."""

    __test__ = False  # not a pytest class
    language: str  # the toolchain's name (go, rust, node, java, c/c++)
    command: str
    log_parser: str  # a name of harness/logs/parsers.py's PARSERS


def test_report(snap: RepoSnapshot) -> TestReport | None:
    """The repository's graded test command: None when no toolchain is detected (Python) or none of its
    runners is found."""
    found = detect(snap)
    if found is None:
        return None
    recipe = report_recipe(found, RepoFiles(snap))
    return TestReport(found.toolchain.name, recipe.command, recipe.log_parser) if recipe else None


test_report.__test__ = False  # type: ignore[attr-defined]  # a test module that imports it: not a test


def report_recipe(found: Detected, files: RepoFiles) -> ReportRecipe | None:
    tool, variant = found.toolchain, found.variant
    if tool.runners:
        return _node_report(found, files)
    recipe = (variant.test_report if variant else None) or tool.test_report
    if recipe and variant and variant.name == "make":
        recipe = ReportRecipe(recipe.command.replace("make test", f"make {make_target(files)}"), recipe.log_parser)
    return recipe


def human_test_command(found: Detected, files: RepoFiles | None = None) -> str:
    """The test command as a person types it."""
    tool, variant = found.toolchain, found.variant
    command = (variant.test_command if variant and variant.test_command else "") or tool.test_command
    if files is not None and variant is not None and variant.name == "make":
        return f"make {make_target(files)}"
    return command


def make_target(files: RepoFiles) -> str:
    text = files.text("Makefile") or files.text("makefile") or files.text("GNUmakefile")
    has = {target: bool(re.search(rf"(?m)^{target}\s*:", text)) for target in ("test", "check")}
    return "check" if has["check"] and not has["test"] else "test"


@dataclass(frozen=True)
class _Found:
    runner: Runner
    env: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    launcher: tuple[str, ...] = ()  # how the script starts it, when not by its name (`node --expose-gc path/cli.js`)
    before: tuple[str, ...] = ()  # the build steps the scripts run before it (`pnpm run build && vitest run`)
    task_build: tuple[str, str] | None = None  # the task file's tool and build task, run first (`jake build`)


def _node_report(found: Detected, files: RepoFiles) -> ReportRecipe | None:
    tool, variant = found.toolchain, found.variant
    manifest = files.json(tool.runners_from)
    raw = manifest.get("scripts")
    scripts = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    hit = _in_scripts(tool.runners, scripts, "test", set()) or _in_task_files(tool.runners, files)
    if hit is None:
        names: set[str] = set()
        for key in ("devDependencies", "dependencies"):
            dependencies = manifest.get(key)
            names |= set(dependencies) if isinstance(dependencies, dict) else set()
        runner = next((r for r in tool.runners if r.name in names), None)
        runner = runner or next((r for r in tool.runners
                                 if any(_match(name, f) for f in r.config_files for name in files.top)), None)
        hit = _Found(runner, args=_spec_globs(runner, tool.evidence, files, manifest)) if runner else None
    if hit is None:
        return None
    exec_, run = (variant.exec if variant and variant.exec else "npx --no-install",
                  variant.run if variant and variant.run else "npm run")
    template = hit.runner.test_report.command
    whole = "{run} test" in template  # the whole script runs: its own environment and arguments are in it
    hit = _Found(hit.runner) if whole else hit
    named = f"{{exec}} {hit.runner.name}"
    if hit.launcher and named in template:  # started as the script starts it
        template = template.replace(named, " ".join(shlex.quote(word) for word in hit.launcher).replace("{", "{{")
                                    .replace("}", "}}"), 1)
    command = template.format(exec=exec_, run=run)
    prefix = " ".join(shlex.quote(item) if not ASSIGNMENT.match(item) else _quote_assignment(item) for item in hit.env)
    command = f"{prefix} {command}" if prefix else command
    if hit.args:
        command += " " + " ".join(shlex.quote(arg) for arg in hit.args)
    if hit.task_build:
        tool_name, task = hit.task_build
        hit = dataclasses.replace(hit, before=(f"{'make' if tool_name == 'make' else exec_ + ' ' + tool_name} {task}",
                                               *hit.before))
    if hit.before:
        command = "; ".join([*hit.before, command])
    if "pretest" in scripts and not whole:  # `npm test` runs it itself
        command = f"{run} pretest; {command}"
    return ReportRecipe(command, hit.runner.test_report.log_parser)


def _spec_globs(runner: Runner, extensions: tuple[str, ...], files: RepoFiles, manifest: dict) -> tuple[str, ...]:
    """For a runner that nothing tells where the tests are (no script, no configuration at the top or under its
    name in the manifest) and that looks only in a narrow default (mocha: test/*.js): when that default holds
    none of the repository's test files (the language specs' test file names), globs of them by top folder."""
    configured = runner.name in manifest or any(_match(name, f) for f in runner.config_files for name in files.top)
    if not runner.default_spec or configured:
        return ()
    if any(_match(path, spec) and path.count("/") == spec.count("/") for path in files.all for spec in runner.default_spec):
        return ()
    patterns = test_name_patterns(extensions)
    globs = {}
    for path in files.all:
        folder, _, rest = path.rpartition("/")
        if VENDORED.search(path) or not any(_match(rest, pattern) for pattern in patterns):
            continue
        top = folder.split("/", 1)[0]
        for pattern in patterns:
            if _match(rest, pattern):
                globs[f"{top}/**/{pattern}" if top else pattern] = None
    return tuple(globs)


def _match(name: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern)


def _quote_assignment(item: str) -> str:
    name, _, value = item.partition("=")
    return f"{name}={shlex.quote(value)}"


def _in_scripts(runners: tuple[Runner, ...], scripts: dict[str, str], name: str, seen: set[str]) -> _Found | None:
    """The runner the script `name` runs, following the scripts it runs; None when none is named."""
    if name in seen or name not in scripts:
        return None
    seen.add(name)
    segments = SEPARATORS.split(scripts[name].strip())
    for number, segment in enumerate(segments):
        built = tuple(step for step in segments[:number] if BUILDING.search(step) and not CHECKING.search(step))
        found = _in_segment(runners, segment)
        if found is not None:
            return dataclasses.replace(found, before=built)
        nested = NESTED.match(segment.strip())
        if nested:
            for inner in (nested.group(1) or nested.group(2) or "").split():
                for key in _scripts_named(inner, scripts):
                    found = _in_scripts(runners, scripts, key.strip("'\""), seen)
                    if found is not None:
                        return dataclasses.replace(found, before=built + found.before)
    return None


def _in_task_files(runners: tuple[Runner, ...], files: RepoFiles) -> _Found | None:
    """The runner a task file at the top starts (a Makefile's recipe line, a jakefile's or Gruntfile's
    command string: `exec('./node_modules/.bin/mocha --u tdd')`), with its arguments."""
    for name in TASK_FILES:
        text = files.text(name) if name in files.top else ""
        for command in re.findall(r"""^\t+(.+)$|'([^'\n]+)'|"([^"\n]+)"|`([^`\n]+)`""", text, re.M):
            for segment in SEPARATORS.split(next(part for part in command if part)):
                found = _in_segment(runners, segment.strip(), strict=True)
                if found is not None:
                    tool, declares = TASK_TOOLS[name]
                    build = next((task for task in BUILD_TASKS
                                  if re.search(declares.format(name=task), text, re.M)), None)
                    return dataclasses.replace(found, task_build=(tool, build)) if build else found
    return None


def _scripts_named(name: str, scripts: dict[str, str]) -> list[str]:
    """The scripts a name given to `run` means: a glob (`test:*`), pnpm's `/regex/`, or itself."""
    if len(name) > 2 and name.startswith("/") and name.endswith("/"):
        try:
            pattern = re.compile(name[1:-1])
        except re.error:
            return []
        return [key for key in scripts if pattern.search(key)]
    return [key for key in scripts if _match(key, name)] if "*" in name else [name]


def _in_segment(runners: tuple[Runner, ...], segment: str, strict: bool = False) -> _Found | None:
    """The runner a command segment starts; `strict` (a task file's string, which may be prose: Gruntfile's
    'Run the jasmine and mocha tests'): only after assignments, flags and launchers (npx, node, nyc...)."""
    try:
        words = shlex.split(segment)
    except ValueError:
        words = segment.split()
    for runner in runners:
        parts = runner.name.split()
        for at in range(len(words) - len(parts) + 1):
            by_path = len(parts) == 1 and (words[at].endswith(f"/.bin/{parts[0]}")
                                           or f"node_modules/{parts[0]}/" in words[at])
            if words[at:at + len(parts)] != parts and not by_path:
                continue
            if strict and not all(ASSIGNMENT.match(word) or word.startswith("-") or word in LAUNCHERS
                                  for word in words[:at]):
                continue
            env = tuple(word for word in words[:at] if ASSIGNMENT.match(word))
            args = _kept(runner.name, words[at + len(parts):]) if len(parts) == 1 else ()
            start = next((n for n, word in enumerate(words[:at]) if not ASSIGNMENT.match(word) and word != "cross-env"), at)
            return _Found(runner, env, args, tuple(words[start:at + 1]) if by_path else ())
    return None


def _kept(runner: str, args: list[str]) -> tuple[str, ...]:
    kept, skip = [], False
    for number, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if number == 0 and arg in SUBCOMMANDS.get(runner, set()):
            continue
        if DROPPED.match(arg):
            skip = arg in VALUED
            continue
        kept.append(arg)
    return tuple(kept)
