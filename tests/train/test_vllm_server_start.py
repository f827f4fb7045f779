"""The `vllm serve` process async GRPO starts (train/grpo/vllm_server.py) never outlives a start that fails or is
interrupted: it runs in a session of its own, out of reach of the terminal's Ctrl-C."""

from __future__ import annotations

import os
import signal

import pytest

from codeagent.train import TrainError
from codeagent.train.grpo import vllm_server


@pytest.fixture
def slow_server(tmp_path, monkeypatch):
    """A stand-in interpreter that takes any arguments and never answers /health."""
    program = tmp_path / "python"
    program.write_text("#!/bin/sh\nexec sleep 600\n")
    program.chmod(0o755)
    monkeypatch.setattr(vllm_server.sys, "executable", str(program))
    started = []
    popen = vllm_server.subprocess.Popen

    def recording(*args, **kwargs):
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(vllm_server.subprocess, "Popen", recording)
    return started


def _alive(process) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return process.poll() is None


@pytest.mark.parametrize("stop", [KeyboardInterrupt, "timeout"])
def test_a_start_interrupted_or_timed_out_leaves_no_server_behind(slow_server, tmp_path, monkeypatch, stop):
    if stop is KeyboardInterrupt:
        def interrupted(self, timeout):
            raise KeyboardInterrupt

        monkeypatch.setattr(vllm_server.VLLMServer, "_wait", interrupted)
        with pytest.raises(KeyboardInterrupt):
            vllm_server.VLLMServer("tiny", log_dir=str(tmp_path))
    else:
        with pytest.raises(TrainError, match="did not answer within 2s"):
            vllm_server.VLLMServer("tiny", log_dir=str(tmp_path), start_timeout=2)
    (process,) = slow_server
    assert not _alive(process)
    assert process.returncode == -signal.SIGTERM
