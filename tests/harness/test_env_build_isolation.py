"""An untrusted repository's code never runs with network while its environment is built, and every build
container has the sandbox's confinement (issue 35, item 3). Real Docker, real registries: the repository's
code records where it ran (network, capabilities, pids limit) in a file the image keeps.

On 0972c8d: Maven's prefetch ran `mvn test` with network (a plugin bound to `validate` resolved DNS),
yarn ran the repository's `yarn-path` with network, a build.rs never ran at build time at all (nothing was
compiled once), and every build container had Docker's default capabilities (NET_RAW) and no limits."""

from __future__ import annotations

import json
import subprocess

import pytest

from codeagent.harness.layers.layer import Layer, build_layer
from codeagent.harness.toolchain.resolve import resolve
from codeagent.sandbox import snapshot
from codeagent.sandbox.images import base_image_tag

NET_RAW = 1 << 13
PROBE = ("{ getent hosts registry.npmjs.org >/dev/null 2>&1 && echo network=online || echo network=offline; "
         "grep CapEff /proc/self/status; "
         "echo pids=$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max 2>/dev/null); "
         "echo memory=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes); "
         "} >> /root/codeagent-probe")

POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId><artifactId>probe</artifactId><version>0.1.0</version>
  <properties><maven.compiler.release>17</maven.compiler.release></properties>
  <build><plugins><plugin>
    <groupId>org.codehaus.mojo</groupId><artifactId>exec-maven-plugin</artifactId><version>3.1.0</version>
    <executions><execution><id>probe</id><phase>validate</phase><goals><goal>exec</goal></goals>
      <configuration><executable>sh</executable><arguments><argument>-c</argument>
        <argument>{PROBE.replace("&", "&amp;")}</argument></arguments></configuration>
    </execution></executions>
  </plugin></plugins></build>
</project>
"""

BUILD_RS = f"""fn main() {{
    std::process::Command::new("sh").arg("-c").arg({json.dumps(PROBE)}).status().unwrap();
}}
"""

# yarn (classic) runs the file `yarn-path` names instead of itself; the install script of the package
# itself too, unless install scripts are off
YARN_PATH = f"require('child_process').execSync({json.dumps(PROBE)});\n"
PACKAGE = json.dumps({"name": "probe", "version": "1.0.0", "scripts": {"postinstall": PROBE, "test": "true"}})


def probes(image: str) -> list[dict[str, str]]:
    """The probe's records in the image: one per run of the repository's code."""
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "sh", "-c",
                           "cat /root/codeagent-probe 2>/dev/null || true"], capture_output=True, text=True, check=True)
    records, record = [], {}
    for line in proc.stdout.splitlines():
        key, _, value = line.replace(":\t", "=").partition("=")
        if key == "network" and record:
            records.append(record)
            record = {}
        record[key.strip()] = value.strip()
    return records + ([record] if record else [])


def confined(record: dict[str, str]) -> bool:
    return (record["network"] == "offline" and not int(record["CapEff"], 16) & NET_RAW
            and record["pids"] not in ("", "max") and record["memory"] not in ("", "max"))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("files, ran", [
    pytest.param({"pom.xml": POM}, True, id="maven-plugin-bound-to-validate"),
    pytest.param({"Cargo.toml": '[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\nbuild = "build.rs"\n',
                  "build.rs": BUILD_RS, "src/lib.rs": "#[test]\nfn t() {}\n"}, True, id="cargo-build-rs"),
    pytest.param({"package.json": PACKAGE, "yarn.lock": "# yarn lockfile v1\n\n\n", ".yarnrc": 'yarn-path "./evil.js"\n',
                  "evil.js": YARN_PATH, "index.js": ""}, False, id="yarn-path-and-an-install-script"),
])
def test_an_untrusted_repositorys_code_never_runs_with_network_at_build(make_repo, files, ran):
    environment = resolve(snapshot(make_repo(files)))
    assert environment.image and not environment.missing, environment.warnings
    records = probes(environment.image)
    assert all(confined(record) for record in records), records  # never online, never unconfined
    assert bool(records) == ran, records  # the build ran it once (offline), or never (install scripts off)


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks")
def test_every_build_container_has_the_sandboxs_confinement(tmp_path):
    base = base_image_tag()
    layer = Layer(tag=f"codeagent/test-confined:{tmp_path.name[-12:].lower()}", parent=base,
                  script=PROBE.replace("getent hosts registry.npmjs.org", "false"), network=False)
    try:
        build_layer(layer)
        records = probes(layer.tag)
    finally:
        subprocess.run(["docker", "rmi", "-f", layer.tag], capture_output=True)
    assert len(records) == 1 and confined(records[0]), records


def test_the_fetch_runs_no_repository_code_unless_trusted(make_repo):
    from codeagent.harness.toolchain.deps import fetch_step
    from codeagent.harness.toolchain.detect import RepoFiles, detect

    repo = make_repo({"package.json": PACKAGE, "package-lock.json": "{}", ".pnpmfile.cjs": "", ".yarnrc": ""})
    snap = snapshot(repo)
    found = detect(snap)
    assert found is not None and found.variant is not None and found.variant.name == "npm"
    untrusted = fetch_step(found, "p", snap, RepoFiles(snap), trusted=False).layer
    trusted = fetch_step(found, "p", snap, RepoFiles(snap), trusted=True).layer
    assert untrusted is not None and trusted is not None and untrusted.network
    assert "npm ci --ignore-scripts" in untrusted.script and "mv .yarnrc" in untrusted.script
    assert "--ignore-scripts" not in trusted.script and untrusted.tag != trusted.tag


def test_maven_build_extensions_are_taken_out_of_the_poms_maven_resolves(make_repo, tmp_path):
    """Maven loads a plugin marked `<extensions>true</extensions>`, and a `<build><extensions>` entry, while it
    resolves: the fetch's copy of every pom has them removed (the offline build has them back)."""
    from codeagent.harness.toolchain.deps import fetch_step
    from codeagent.harness.toolchain.detect import RepoFiles, detect

    pom = POM.replace("<version>3.1.0</version>", "<version>3.1.0</version><extensions> true </extensions>").replace(
        "<build><plugins>", "<build><extensions><extension><groupId>x</groupId><artifactId>y</artifactId>"
                            "<version>1</version></extension></extensions><plugins>")
    snap = snapshot(make_repo({"pom.xml": pom, "sub/pom.xml": pom}))
    step = fetch_step(detect(snap), "p", snap, RepoFiles(snap), trusted=False)
    assert step.layer is not None and "mv .mvn" in step.layer.script and "go-offline" in step.layer.script
    lines = step.layer.script.splitlines()
    at = next(number for number, line in enumerate(lines) if "perl" in line)
    sanitize = "\n".join(lines[at:at + 2])  # the command and its continued line
    for path in ("pom.xml", "sub/pom.xml"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(pom)
    subprocess.run(["bash", "-euo", "pipefail", "-c", sanitize], cwd=tmp_path, check=True)
    for path in ("pom.xml", "sub/pom.xml"):
        text = (tmp_path / path).read_text()
        assert "<extensions>" not in text and "<extension>" not in text and "exec-maven-plugin" in text


def test_the_toolchain_layer_runs_only_codeagents_recipe(make_repo):
    """The repository is not copied into a toolchain layer: only its stated versions, quoted, reach it."""
    from codeagent.harness.toolchain.deps import toolchain_layer
    from codeagent.harness.toolchain.detect import detect

    snap = snapshot(make_repo({"package.json": json.dumps({"engines": {"node": "$(touch /pwned) 20"}})}))
    layer = toolchain_layer(detect(snap), "codeagent/base:x")
    assert layer.tree is None and "VERSION='$(touch /pwned) 20'" in layer.script
