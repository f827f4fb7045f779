"""A batched inference engine: many concurrent agent turns, one forward pass per token for all of them.

Callers (agent threads: rollouts, `codeagent serve` connections) call
`generate(prompt_ids, max_new_tokens=..., temperature=..., top_p=..., seed=..., stop_ids=...)` and block
until their turn is done; they get the completion ids exactly as sampled, the log-probability of each
under the distribution it was sampled from, and whether a stop token ended it (the `Generator` protocol
of models/hf.py). One worker thread owns the model and runs batches:

- continuous batching: the worker keeps a live batch of rows decoding together. Before every decode
  step it admits whatever requests wait (up to `max_batch` rows in all): their prompts are prefilled
  in one forward pass, their first token sampled, and their rows (KV cache and attention mask, left-
  padded to a common width) joined to the live batch, so a turn that arrives while others decode joins
  them at the next step. A row that hits its stop token or its own `max_new_tokens` leaves the batch
  (and its cache) at once; columns no remaining row uses are cut.
- a row sees exactly what it would see alone: padding and holes are masked, and position ids count
  only the row's own tokens.
- prompt (KV) reuse: when a turn finishes, the KV of everything fed for it (prompt and completion but
  its last token) goes to a prompt cache (`PrefixCache`, least recently used out, bounded by bytes and
  entries). The next turn of that conversation extends those ids; its prompt takes the KV of the
  longest cached prefix and only the new suffix is prefilled. A prompt that shares less than
  `min_reuse` tokens with every entry (a history that was rewritten) is prefilled in full. An entry is
  dropped when the next turn continues it, when its conversation ends (`release`, called by rollouts
  at the end of a run) and when the engine closes; the KV belongs to the weights it was computed
  with, so the cache lives no longer than the engine (rollouts build one per generation batch).
  Greedy ids and logprobs with and without reuse were identical on the CPU tests (difference 0.0).
- reuse and joining need plain per-layer KV tensors (transformers' DynamicCache of DynamicLayer);
  a model whose cache is anything else (sliding-window or hybrid layers) gets neither: its batch is
  gathered from what waits and decodes to the end before the next is admitted.
- sampling is per request: each row has its own temperature, top-p and seeded random generator, so a
  request samples the same way whatever else shares its batch.

Logprobs (`pick_token`, also used by the one-at-a-time `TransformersGenerator` of models/hf.py):
log_softmax(logits / temperature), before top-p; greedy (temperature 0) uses the raw logits. No lock is held
across a sequence: the worker is the only thread that touches the model, and callers only wait on their own
request.

Its parts: the request queue and worker thread (models/engine_front.py), the prompt cache
(models/prefix_cache.py), the live rows and their KV tensors (models/live_batch.py), the sampling rule
(models/token_sampling.py).
"""

from __future__ import annotations

import logging
import queue
from contextlib import nullcontext
from typing import Any

from .engine_front import DEFAULT_MAX_BATCH, BatchingFront, EngineClosed, Request
from .live_batch import LiveBatch, Row, cache_from_entries, layer_tensors, plain_layers
from .prefix_cache import DEFAULT_KV_CACHE_BYTES, DEFAULT_KV_CACHE_ENTRIES, DEFAULT_MIN_REUSE, PrefixCache
from .token_sampling import pick_token, seeded_generator, top_p_filter

log = logging.getLogger(__name__)

# the names callers import from here (engine_front, prefix_cache, token_sampling hold them)
__all__ = ["DEFAULT_KV_CACHE_BYTES", "DEFAULT_KV_CACHE_ENTRIES", "DEFAULT_MAX_BATCH", "DEFAULT_MIN_REUSE",
           "BatchedTransformersEngine", "BatchingFront", "EngineClosed", "PrefixCache", "Request", "pick_token",
           "top_p_filter"]


class BatchedTransformersEngine(BatchingFront):
    """The batched engine over a transformers causal LM (CPU or GPU): see the module docstring.

    `kv_cache_bytes` / `kv_cache_entries` bound the prompt cache (0 turns prompt reuse off)."""

    def __init__(self, model, *, pad_id: int | None = None, max_batch: int = DEFAULT_MAX_BATCH,
                 name: str = "transformers", kv_cache_bytes: int = DEFAULT_KV_CACHE_BYTES,
                 kv_cache_entries: int = DEFAULT_KV_CACHE_ENTRIES, min_reuse: int = DEFAULT_MIN_REUSE):
        super().__init__(max_batch=max_batch, name=name)
        self.model = model
        config = getattr(model, "config", None)
        self.pad_id = pad_id if pad_id is not None else (getattr(config, "pad_token_id", None) or 0)
        self.prefix_cache = PrefixCache(kv_cache_bytes, kv_cache_entries, min_reuse)
        self.prefill_tokens = 0  # prompt tokens run through the model (for tests and benchmarks)
        self.reused_tokens = 0  # prompt tokens taken from the prompt cache instead
        self.joined = 0  # requests admitted while other rows were decoding
        self._live = LiveBatch()
        self._last_logits_only = _takes_logits_to_keep(model)  # a prefill never computes every position's logits
        self._flexible = True  # plain per-layer KV tensors: rows can be cached, joined and dropped freely

    def close(self) -> None:
        super().close()
        self.prefix_cache.clear()

    def release(self, ids) -> None:
        """A conversation ended (its last prompt + completion ids): its cached KV is dropped."""
        self.prefix_cache.release(list(ids))

    # -- the worker ------------------------------------------------------------------------------------

    def _loop(self) -> None:
        closing = False
        while True:
            room = self.max_batch - len(self._live.rows)
            new: list[Request] = []
            if not closing and room > 0 and (self._flexible or not self._live.rows):
                new, closing = self._take(block=not self._live.rows, room=room)
            if new:
                self.batch_sizes.append(len(new))
                if self._live.rows:
                    self.joined += len(new)
                self._guarded(new, self.admit)
            if self._live.rows:
                self._guarded([row.request for row in self._live.rows], self._step)
            elif closing:
                self._fail_waiting()
                return

    def _take(self, *, block: bool, room: int) -> tuple[list[Request], bool]:
        """Up to `room` waiting requests (waiting for the first when `block`), and whether close was asked."""
        taken: list[Request] = []
        while len(taken) < room:
            try:
                item = self._queue.get() if block and not taken else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return taken, True
            taken.append(item)
        return taken, False

    def _guarded(self, requests: list[Request], work) -> None:
        """Run `work` with the model in eval mode, no grad; if it fails, its requests fail, the engine lives on."""
        import torch

        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        try:
            # this worker thread's current CUDA device is the model's (it is per thread, cuda:0 by default)
            with torch.no_grad(), (torch.cuda.device(device) if device.type == "cuda" else nullcontext()):
                work(requests)
        except BaseException as error:
            log.exception("%s: a batch of %d failed", self.name, len(requests))
            failed = {id(request) for request in requests}
            self._live.keep([i for i, row in enumerate(self._live.rows) if id(row.request) not in failed])
            for request in requests:
                if not request.done.is_set():
                    request.error = error
                    request.done.set()
        finally:
            if was_training:
                model.train()

    def admit(self, requests: list[Request]) -> None:
        """Prefill new requests (only what the prompt cache lacks), sample their first token, and add them
        to the rows decoding."""
        import torch

        device = next(self.model.parameters()).device
        hits = [self.prefix_cache.lookup(r.prompt_ids) if self._flexible else (None, 0) for r in requests]
        reuse = [n for _, n in hits]
        suffixes = [r.prompt_ids[n:] for r, n in zip(requests, reuse, strict=True)]
        past_width, width = max(reuse), max(len(s) for s in suffixes)
        past = None
        mask_rows = []
        for n, suffix in zip(reuse, suffixes, strict=True):
            mask_rows.append([0] * (past_width - n) + [1] * n + [0] * (width - len(suffix)) + [1] * len(suffix))
        mask = torch.tensor(mask_rows, device=device)
        if past_width:
            past = cache_from_entries([entry for entry, _ in hits], reuse, past_width, device)
            for entry, _ in hits:
                if entry is not None and entry.consumed_by(requests):
                    self.prefix_cache.discard(entry)
        input_ids = torch.tensor([[self.pad_id] * (width - len(s)) + s for s in suffixes], device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, past_width:]
        output = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            past_key_values=past, use_cache=True, **self._extra())
        for request, n in zip(requests, reuse, strict=True):
            request.reused = n
        self.prefill_tokens += sum(len(s) for s in suffixes)
        self.reused_tokens += sum(reuse)
        cache = output.past_key_values
        if self._flexible and not plain_layers(cache):
            self._flexible = False  # e.g. sliding-window layers: no reuse, no joining (see the module docstring)
            self.prefix_cache.clear()
        rows = [Row(r, seeded_generator(r.seed, device), int(positions[i, -1]) + 1) for i, r in enumerate(requests)]
        self._live.join(rows, cache, mask)
        self._sample(output.logits[:, -1].float(), first=len(self._live.rows) - len(rows))

    def _step(self, requests: list[Request]) -> None:
        """One decode step for every live row: feed its last sampled token, sample the next."""
        import torch

        live = self._live
        device = live.mask.device
        input_ids = torch.tensor([[row.request.ids[-1]] for row in live.rows], device=device)
        live.mask = torch.cat([live.mask, live.mask.new_ones((len(live.rows), 1))], dim=-1)
        positions = torch.tensor([[row.position] for row in live.rows], device=device)
        output = self.model(input_ids=input_ids, attention_mask=live.mask, position_ids=positions,
                            past_key_values=live.cache, use_cache=True, **self._extra())
        live.cache = output.past_key_values
        for row in live.rows:
            row.position += 1
        self._sample(output.logits[:, -1].float(), first=0)

    def _extra(self) -> dict[str, Any]:
        return {"logits_to_keep": 1} if self._last_logits_only else {}

    def _sample(self, logits, *, first: int) -> None:
        """Sample a token for rows first.. of the live batch from `logits` (one row each); finish the rows
        that are done: their KV (prompt + completion) goes to the prompt cache, their callers are answered."""
        live = self._live
        keep = list(range(first))
        for offset in range(logits.shape[0]):
            index = first + offset
            row = live.rows[index]
            request = row.request
            token, logprob = pick_token(logits[offset], request.temperature, request.top_p, row.generator)
            request.ids.append(token)
            request.logprobs.append(logprob)
            request.stopped = token in request.stop_ids
            if request.stopped or len(request.ids) >= request.max_new_tokens:
                if self._flexible:
                    self._remember(index)
                request.done.set()
            else:
                keep.append(index)
        keep += range(first + logits.shape[0], len(live.rows))
        if len(keep) < len(live.rows):
            live.keep(keep)

    def _remember(self, index: int) -> None:
        """The finished row's KV: every token fed for it (its prompt and all but the last sampled token)."""
        live, request = self._live, self._live.rows[index].request
        ids = request.prompt_ids + request.ids[:-1]
        if not self.prefix_cache.wants(ids):
            return
        valid = live.mask[index].bool()
        if int(valid.sum()) != len(ids):
            return
        layers = [(keys[index:index + 1, :, valid].clone(), values[index:index + 1, :, valid].clone())
                  for keys, values in layer_tensors(live.cache)]
        self.prefix_cache.add(ids, layers)


def _takes_logits_to_keep(model) -> bool:
    """Whether the model's forward takes `logits_to_keep` (transformers' causal LMs do; a PEFT wrapper
    passes it through to its base model)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return "logits_to_keep" in inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return False
