"""Async GRPO's rollouts through a `vllm serve` process (`rollout.served: true`), token in and
token out, with one LoRA adapter per policy version.

- `VLLMServer`: the server of the base model, started here (`vllm serve --enable-lora`, runtime LoRA
  loading allowed), or one already running at `rollout.vllm_server_url` that was started that way and
  reads this machine's files (the adapters are loaded from a path);
- `ServedGenerator`: the batched engine behind the local Model front (models/hf.py renders the chat
  template here, so every prompt extends the last one token for token); its batch goes to the server's
  /v1/completions as prompt token ids, and the sampled ids and their logprobs come back, for the adapter
  of its version (the request's `model` names it);
- `ServedVersions`: versions.py's contract (publish, lease) with the trainer's LoRA adapter saved and
  loaded into the server under `policy-v<version>` at each publish, and unloaded once no rollout samples
  from it and it is no longer current.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...models.engine_front import BatchingFront
from .. import TrainError
from .generation import _fill
from .versions import PolicyVersions, _Snapshot


class VLLMServer:
    def __init__(self, model: str, *, url: str | None = None, lora_rank: int = 16, max_loras: int = 4,
                 max_model_len: int | None = None, args: list[str] | tuple[str, ...] = (), log_dir: str | None = None,
                 start_timeout: float = 600.0):
        self.model, self.process = model, None
        self.log_path: Path | None = None
        if url:
            self.url = url.rstrip("/").removesuffix("/v1")
            return
        from .vllm_cpu import cpu_build

        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        # `vllm serve` (vllm.entrypoints.cli.main) reads the version of the `vllm` distribution, which the CPU
        # build (`vllm-cpu`) is not: it fails before parsing its arguments; the API server module it runs
        # takes the same ones
        serve = ["-m", "vllm.entrypoints.openai.api_server", "--model"] if cpu_build() else \
            ["-m", "vllm.entrypoints.cli.main", "serve"]
        command = [sys.executable, *serve, model, "--port", str(port),
                   "--host", "127.0.0.1", "--served-model-name", "base", "--enable-lora",
                   "--max-lora-rank", str(lora_rank), "--max-loras", str(max_loras),
                   # the sampled tokens' logprobs after temperature / top_p, as the loss takes them
                   "--logprobs-mode", "processed_logprobs", "--disable-log-stats"]
        if max_model_len:
            command += ["--max-model-len", str(max_model_len)]
        if cpu_build():  # the trainer computes in float32 on the CPU; vLLM's auto dtype would take bfloat16
            command += ["--dtype", "float32"]
        command += list(args)
        env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
        folder = Path(log_dir or tempfile.mkdtemp(prefix="vllm-serve-"))
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / "vllm-serve.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        try:
            self._wait(start_timeout)
        except BaseException:  # Ctrl-C too: in a session of its own, the server would outlive this process
            self.close()
            raise

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise TrainError(f"vllm serve exited with {self.process.returncode} while starting: {self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1.0)
        raise TrainError(f"vllm serve did not answer within {timeout:.0f}s: {self._tail()}")

    def _tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return "(no log)"
        return self.log_path.read_text(errors="replace")[-2000:]

    def post(self, path: str, body: dict[str, Any], timeout: float = 600.0) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise TrainError(f"vllm serve {path}: HTTP {error.code}: {error.read().decode(errors='replace')[:500]}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def models(self) -> list[str]:
        with urllib.request.urlopen(f"{self.url}/v1/models", timeout=30) as response:
            return [entry["id"] for entry in json.loads(response.read())["data"]]

    def load_adapter(self, name: str, path: str | Path) -> None:
        self.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})

    def unload_adapter(self, name: str) -> None:
        self.post("/v1/unload_lora_adapter", {"lora_name": name})

    def complete(self, model: str, request) -> None:
        """One engine Request (models/engine_front.py) sampled by the server, token ids in and out."""
        body = {"model": model, "prompt": list(request.prompt_ids), "max_tokens": request.max_new_tokens,
                "temperature": request.temperature, "top_p": request.top_p or 1.0, "logprobs": 0,
                "stop_token_ids": sorted(request.stop_ids), "return_token_ids": True,
                "skip_special_tokens": False}
        if request.seed is not None:
            body["seed"] = request.seed
        choice = self.post("/v1/completions", body)["choices"][0]
        ids = [int(token) for token in choice["token_ids"]]
        values = [float(value) for value in choice["logprobs"]["token_logprobs"]]
        _fill(request, ids, values)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        self.process = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServedGenerator(BatchingFront):
    """The batches of the local Model front, sampled by the server with adapter `model`."""

    def __init__(self, server: VLLMServer, model: str, *, max_batch: int = 64):
        super().__init__(max_batch=max_batch, name=f"vllm-serve:{model}")
        self.server, self.model = server, model

    def run_batch(self, requests) -> None:
        def one(request):
            try:
                self.server.complete(self.model, request)
            except Exception as error:  # noqa: BLE001 - that turn fails, not the batch
                request.error = error

        with ThreadPoolExecutor(max_workers=len(requests)) as pool:  # the server batches them
            list(pool.map(one, requests))


class ServedVersions(PolicyVersions):
    """PolicyVersions whose copies are LoRA adapters loaded into a vLLM server: `make_policy(name, model)`
    wraps the adapter's name (and the trainer's model, for its config) into a Model."""

    def __init__(self, server: VLLMServer, make_policy, folder: str | Path):
        super().__init__(lambda model: None)  # the local copies' maker: unused
        self.make_served, self.server = make_policy, server
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def _snapshot(self, model, version: int) -> _Snapshot:
        name = f"policy-v{version}"
        path = self.folder / name
        if path.exists():
            shutil.rmtree(path)
        if not hasattr(model, "peft_config"):
            raise TrainError("rollout.served loads the trained LoRA adapter into the server at each "
                             "version: train with a lora section")
        model.save_pretrained(str(path))
        self.server.load_adapter(name, path)
        return _Snapshot(version, name, self.make_served(name, model))

    def _release(self, snapshot: _Snapshot) -> None:
        self.server.unload_adapter(snapshot.model)
        shutil.rmtree(self.folder / snapshot.model, ignore_errors=True)

    def close(self) -> None:
        super().close()
        self.server.close()


def served_versions(rollouts) -> ServedVersions:
    """The versions of async GRPO's policy on a vLLM server (started here unless rollout.vllm_server_url)."""
    from ...models.hf import HFModel

    recipe = rollouts.recipe
    settings = recipe.rollout
    out = Path(recipe.output_dir)
    server = VLLMServer(recipe.model.base, url=settings.vllm_server_url, lora_rank=recipe.lora.r,
                        max_model_len=settings.vllm_max_model_len, args=settings.vllm_server_args,
                        log_dir=str(out / "vllm-serve"))

    def make_policy(name: str, model) -> HFModel:
        return HFModel(model, rollouts.tokenizer, name=f"vllm-serve:{name}", generator=ServedGenerator(server, name),
                       context_tokens=settings.vllm_max_model_len, max_new_tokens=settings.max_tokens)

    return ServedVersions(server, make_policy, out / "served-adapters")
