"""bench/image_footprint.py's build-only mode: every task's images built as grading builds them, no
test run, and the figures of such a side say it was not graded."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support.bench_scripts import load_bench_script


def load_script():
    return load_bench_script("image_footprint")


def test_build_only_builds_through_grading_and_keeps_going_past_a_failure(monkeypatch, tmp_path):
    from codeagent.harness import env_images

    asked = []

    class Source:
        def __init__(self, task):
            self.task = task

        def grading(self, log_dir=None, phase=None):
            asked.append((self.task.instance_id, log_dir))
            if self.task.instance_id == "broken-1":
                raise RuntimeError("apt-get failed")
            images = {"base": "b", "system": "s", "env": "e", "instance": f"i-{self.task.instance_id}"}
            return SimpleNamespace(facts={"images": images, "layers_built": ["e", images["instance"]],
                                          "image_seconds": 1.5})

    monkeypatch.setattr(env_images, "image_source", Source)
    tasks = [SimpleNamespace(instance_id="ok-1"), SimpleNamespace(instance_id="broken-1")]
    rows = load_script().build_images(tasks, tmp_path, workers=2)

    assert [row["instance_id"] for row in rows] == ["ok-1", "broken-1"]
    assert rows[0]["outcome"] == "built" and rows[0]["images"]["instance"] == "i-ok-1"
    assert rows[0]["layers_built"] == ["e", "i-ok-1"] and rows[0]["resolved"] is False
    assert rows[1]["outcome"].startswith("build failed: apt-get failed") and rows[1]["images"] == {}
    assert sorted(asked) == [("broken-1", tmp_path / "build" / "broken-1"), ("ok-1", tmp_path / "build" / "ok-1")]


def test_a_build_only_side_reports_its_bytes_and_no_verdict(monkeypatch):
    script = load_script()
    layers = {"b": ["L1"], "s": ["L1", "L2"], "e": ["L1", "L2", "L3"], "i-1": ["L1", "L2", "L3", "L4"],
              "i-2": ["L1", "L2", "L3", "L5"]}
    sizes = {"b": 100, "s": 300, "e": 350, "i-1": 390, "i-2": 370}
    monkeypatch.setattr(script, "inspect", lambda tags: {tag: {"size": sizes[tag], "layers": layers[tag], "id": tag}
                                                          for tag in tags})
    monkeypatch.setattr(script, "leftovers", lambda image: {})
    parts = {"i-1": {"working tree": 30, "git objects": 9, "git, the rest": 1},
             "i-2": {"working tree": 14, "git objects": 5, "git, the rest": 1}}
    monkeypatch.setattr(script, "instance_parts", parts.__getitem__)
    rows = [{"instance_id": f"x-{n}", "resolved": False, "outcome": "built", "statuses": {},
             "images": {"base": "b", "system": "s", "env": "e", "instance": f"i-{n}"}} for n in (1, 2)]
    rows.append({"instance_id": "x-3", "resolved": False, "outcome": "build failed: boom", "images": {}})
    figures = script.measure({"prefix": "fp-after", "instances": rows, "graded": False})

    assert figures["total"] == 100 + 200 + 50 + 40 + 20 and figures["graded"] is False
    assert figures["instance_layer_median"] == 40
    assert figures["instance_parts_median"] == {"working tree": 30, "git objects": 9, "git, the rest": 1}
    text = "\n".join(script.report("after", figures))
    assert "built only, not graded" in text and "gold resolves" not in text
    assert "NOT built: x-3 (build failed: boom)" in text and "x-1" not in text
