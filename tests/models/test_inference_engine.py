"""The batched inference engine (models/batching.py) against the one-at-a-time reference, on the tiny
offline model: the same ids, logprobs that a fresh forward pass recomputes, per-request sampling and
limits, batches formed from whatever waits, failures confined to their batch; and the vLLM front's
refusals and per-turn limits (vLLM itself cannot run here: a stand-in engine records the calls)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from tests.support.engine import gated


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from codeagent.models.hf import HFModel
    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return HFModel.load(str(build_tiny(tmp_path_factory.mktemp("tiny-engine"), vocab_size=512)))


def prompts(tiny) -> list[list[int]]:
    texts = ["def f(a, b):", "Fix the bug in a.py " * 4, "x", "class Cart:\n    pass\n" * 3, "return a + b " * 9]
    return [tiny.tokenizer(text)["input_ids"] for text in texts]


def run_concurrently(engine, calls: list[dict]) -> list:
    """Every call from its own thread; the first is held in its batch until all the others are queued."""
    entered, gate = gated(engine)
    results: list = [None] * len(calls)

    def call(index):
        try:
            results[index] = engine.generate(**calls[index])
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    entered.wait()
    threads += [threading.Thread(target=call, args=(i,)) for i in range(1, len(calls))]
    for thread in threads[1:]:
        thread.start()
    while engine._queue.qsize() < len(calls) - 1:
        threading.Event().wait(0.01)
    gate.set()
    for thread in threads:
        thread.join()
    return results


def greedy(prompt, limit, stop_ids):
    return dict(prompt_ids=prompt, max_new_tokens=limit, temperature=0.0, top_p=None, seed=None, stop_ids=stop_ids)


def test_batched_greedy_ids_equal_one_at_a_time_and_logprobs_recompute(tiny):
    import torch

    from codeagent.models.batching import BatchedTransformersEngine
    from codeagent.models.hf import TransformersGenerator

    items = prompts(tiny)
    assert len({len(p) for p in items}) == len(items)  # all lengths differ: real left padding
    calls = [greedy(p, 6 + 3 * i, tiny.stop_ids) for i, p in enumerate(items)]
    reference = TransformersGenerator(tiny.model)
    alone = [reference.generate(**call) for call in calls]
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id) as engine:
        batched = run_concurrently(engine, calls + calls[:1])
        assert engine.batch_sizes == [1, len(calls)]  # all but the first waited and ran as one batch
    for call, (ids, logprobs, stopped), (ref_ids, _, ref_stopped) in zip(calls + calls[:1], batched, alone + alone[:1]):
        assert ids == ref_ids and stopped == ref_stopped
        assert len(ids) == call["max_new_tokens"] or stopped
        with torch.no_grad():  # the logprobs are those of the returned ids under a fresh full forward pass
            logits = tiny.model(torch.tensor([call["prompt_ids"] + ids])).logits[0].float()
        start = len(call["prompt_ids"]) - 1
        recomputed = torch.log_softmax(logits[start:start + len(ids)], -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        assert torch.allclose(recomputed, torch.tensor(logprobs), atol=1e-4)


def test_each_request_has_its_own_limit_stop_and_seeded_sampling(tiny):
    from codeagent.models.batching import BatchedTransformersEngine

    items = prompts(tiny)
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id) as engine:
        free = engine.generate(**greedy(items[1], 8, set()))[0]
        stop_token = free[3]
        sampled = dict(prompt_ids=items[2], max_new_tokens=10, temperature=1.0, top_p=0.9, seed=11, stop_ids=set())
        alone = engine.generate(**sampled)
        results = run_concurrently(engine, [greedy(items[0], 5, set()), greedy(items[1], 8, {stop_token}), sampled,
                                            greedy(items[3], 2, set())])
    assert len(results[0][0]) == 5 and len(results[3][0]) == 2 and not results[0][2]
    ids, _, stopped = results[1]
    assert stopped and ids == free[: free.index(stop_token) + 1]  # stopped at its own stop token, included
    assert results[2] == alone  # the same seed samples the same tokens whatever shares the batch


def test_a_failing_batch_fails_its_callers_and_the_engine_goes_on(tiny):
    from codeagent.models.batching import BatchedTransformersEngine, EngineClosed

    items = prompts(tiny)
    engine = BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id)
    results = run_concurrently(engine, [greedy(items[0], 2, set()), greedy([10 ** 7], 2, set()),
                                        greedy(items[1], 2, set())])
    assert not isinstance(results[0], Exception)
    assert all(isinstance(result, IndexError) for result in results[1:])  # an id outside the vocabulary
    assert len(engine.generate(**greedy(items[1], 2, set()))[0]) == 2
    engine.close()
    with pytest.raises(EngineClosed):
        engine.generate(**greedy(items[1], 2, set()))


def test_the_transformers_backend_generates_on_the_batched_engine(tiny):
    from codeagent.models.batching import BatchedTransformersEngine

    assert isinstance(tiny.generator, BatchedTransformersEngine)
    assert not hasattr(tiny.generator, "lock")  # no lock held across a sequence


# -- the vLLM front ---------------------------------------------------------------------------------

class StandInClient:
    """Records what the vLLM server would be asked; answers 6 tokens per prompt (token 2 is the stop)."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, **settings):
        self.calls.append((len(prompts), settings))
        return {"completion_ids": [[5, 6, 7, 8, 9, 10] if p[0] else [5, 2, 7, 8, 9, 10] for p in prompts],
                "logprobs": [[[-0.5]] * 6 for _ in prompts]}


def vllm_trainer(mode: str, processes: int = 1, **fields):
    generation = SimpleNamespace(mode=mode, vllm_client=StandInClient(), tensor_parallel_size=1,
                                 enable_sleep_mode=False, **fields)
    return SimpleNamespace(vllm_generation=generation, accelerator=SimpleNamespace(num_processes=processes))


def test_vllm_refuses_modes_that_would_hang_with_several_ranks():
    from codeagent.train import TrainError
    from codeagent.train.grpo.generation import VLLMGenerator

    with pytest.raises(TrainError, match="collective"):
        VLLMGenerator(vllm_trainer("server", processes=2))
    with pytest.raises(TrainError, match="tensor_parallel"):
        VLLMGenerator(SimpleNamespace(
            vllm_generation=SimpleNamespace(mode="colocate", tensor_parallel_size=2, enable_sleep_mode=False),
            accelerator=SimpleNamespace(num_processes=4)))


def test_vllm_server_mode_batches_turns_and_honours_each_turn_limit():
    from codeagent.train.grpo.generation import VLLMGenerator

    trainer = vllm_trainer("server")
    engine = VLLMGenerator(trainer)
    call = dict(temperature=1.0, top_p=None, seed=None, stop_ids={2})
    results = run_concurrently(engine, [dict(prompt_ids=[1, 1], max_new_tokens=4, **call),
                                        dict(prompt_ids=[1], max_new_tokens=3, **call),
                                        dict(prompt_ids=[0], max_new_tokens=5, **call)])
    engine.close()
    assert [size for size, _ in trainer.vllm_generation.vllm_client.calls] == [1, 2]
    assert trainer.vllm_generation.vllm_client.calls[0][1]["max_tokens"] == 4  # the turn's limit, not 32768
    assert results[0] == ([5, 6, 7, 8], [-0.5] * 4, False)
    assert results[1] == ([5, 6, 7], [-0.5] * 3, False)  # cut at its own limit in a shared call
    assert results[2] == ([5, 2], [-0.5] * 2, True)  # ended by its stop token


# -- prompt (KV) reuse across turns and joining a batch that decodes -----------------------------------

def multi_turn(engine, tiny, items, turns: int = 3) -> list[list[tuple]]:
    """Every conversation's turns, all conversations of a turn in one batch: turn N+1's prompt is turn N's
    prompt and completion plus an observation; conversation 2 has its history rewritten at turn 2 (the
    prefix no longer matches: a full prefill)."""
    conversations = [list(p) for p in items]
    results: list[list[tuple]] = [[] for _ in items]
    observation = tiny.tokenizer("observation: exit code 0")["input_ids"]
    for turn in range(turns):
        calls = [greedy(prompt, 4 + 2 * i, set()) for i, prompt in enumerate(conversations)]
        outputs = run_concurrently(engine, calls)
        for index, (call, output) in enumerate(zip(calls, outputs, strict=True)):
            assert not isinstance(output, Exception), output
            results[index].append((call["prompt_ids"], *output))
            conversations[index] = call["prompt_ids"] + output[0] + observation
        if turn == 0:
            conversations[2] = tiny.tokenizer("A rewritten history, elided")["input_ids"] + conversations[2][3:]
    return results


def test_prompt_reuse_is_token_exact_and_prefills_only_the_new_suffix(tiny):
    import torch

    from codeagent.models.batching import BatchedTransformersEngine

    items = prompts(tiny)
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id, kv_cache_bytes=0) as engine:
        without = multi_turn(engine, tiny, items)
        full_prefill = engine.prefill_tokens
        assert engine.reused_tokens == 0
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id) as engine:
        reused_per_turn = []
        original = engine.admit

        def admit(requests):
            original(requests)
            reused_per_turn.append({tuple(r.prompt_ids): r.reused for r in requests})

        engine.admit = admit
        with_reuse = multi_turn(engine, tiny, items)
        assert engine.prefill_tokens + engine.reused_tokens == full_prefill
        assert engine.prefill_tokens < full_prefill / 2  # the later turns prefill only what was added
    worst = 0.0
    for conversation, (a, b) in enumerate(zip(without, with_reuse, strict=True)):
        for turn, ((prompt, ids, logprobs, stopped), (prompt2, ids2, logprobs2, stopped2)) in enumerate(zip(a, b)):
            assert prompt == prompt2 and ids == ids2 and stopped == stopped2
            worst = max([worst] + [abs(x - y) for x, y in zip(logprobs, logprobs2, strict=True)])
            reused = next(r[tuple(prompt)] for r in reused_per_turn if tuple(prompt) in r)
            if turn == 0 or (conversation == 2 and turn == 1):
                assert reused == 0  # a first turn, or a history that no longer matches: a full prefill
            else:
                previous_prompt, previous_ids = a[turn - 1][0], a[turn - 1][1]
                assert reused == len(previous_prompt) + len(previous_ids) - 1  # all that was fed before
    print(f"largest logprob difference with and without reuse: {worst}")
    assert worst <= 1e-5
    with torch.no_grad():  # and the reused turns' logprobs are those of a fresh full forward pass
        prompt, ids, logprobs, _ = with_reuse[4][2]
        logits = tiny.model(torch.tensor([prompt + ids])).logits[0].float()
        start = len(prompt) - 1
        recomputed = torch.log_softmax(logits[start:start + len(ids)], -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
    assert torch.allclose(recomputed, torch.tensor(logprobs), atol=1e-4)


def test_a_turn_that_arrives_while_a_batch_decodes_joins_it_at_the_next_step(tiny):
    from codeagent.models.batching import BatchedTransformersEngine

    items = prompts(tiny)
    long, short = greedy(items[1], 40, set()), greedy(items[3], 3, set())
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id, kv_cache_bytes=0) as engine:
        alone = [engine.generate(**long), engine.generate(**short)]
    with BatchedTransformersEngine(tiny.model, pad_id=tiny.tokenizer.pad_token_id, kv_cache_bytes=0) as engine:
        decoding, queued = threading.Event(), threading.Event()
        step, steps = engine._step, []

        def held_step(requests):
            steps.append(len(requests))
            if len(steps) == 3:  # the long turn is decoding: the short one arrives now
                decoding.set()
                queued.wait()
            step(requests)

        engine._step = held_step
        results = {}
        first = threading.Thread(target=lambda: results.setdefault("long", engine.generate(**long)))
        first.start()
        decoding.wait()
        second = threading.Thread(target=lambda: results.setdefault("short", engine.generate(**short)))
        second.start()
        while engine._queue.qsize() < 1:
            threading.Event().wait(0.01)
        queued.set()
        first.join()
        second.join()
    assert engine.batch_sizes == [1, 1] and engine.joined == 1  # admitted while the long turn decoded
    assert 2 in steps  # decode steps ran both rows together
    assert results["long"] == alone[0] and results["short"] == alone[1]


def test_the_prompt_cache_is_bounded_and_forgets_ended_conversations():
    import torch

    from codeagent.models.prefix_cache import PrefixCache

    def kv(length):  # one layer, 1 x 2 heads x length x 4, float32: 64 bytes a token for keys and values
        return [(torch.zeros(1, 2, length, 4), torch.zeros(1, 2, length, 4))]

    cache = PrefixCache(max_bytes=64 * 30, max_entries=3, min_reuse=2)
    cache.add(list(range(10)), kv(10))
    cache.add([7] * 10, kv(10))
    assert cache.bytes == 64 * 20
    entry, n = cache.lookup(list(range(12)))
    assert entry.ids == list(range(10)) and n == 10
    assert cache.lookup(list(range(10)))[1] == 9  # one prompt token is always left to prefill
    assert cache.lookup([0, 5, 5])[0] is None  # a shared prefix shorter than min_reuse: not worth it
    cache.add([8] * 15, kv(15))  # over the byte bound: the least recently used entry ([7] * 10) goes
    assert sorted(e.ids[0] for e in cache._entries.values()) == [0, 8] and cache.bytes == 64 * 25
    cache.add([9] * 40, kv(40))  # larger than the whole bound: not kept
    assert len(cache) == 2
    cache.release(list(range(10)) + [3, 4])  # the conversation ended with these ids
    assert [e.ids[0] for e in cache._entries.values()] == [8] and cache.bytes == 64 * 15
    for token in (1, 2, 3):
        cache.add([token] * 2, kv(2))
    assert len(cache) == 3 and cache.evicted == 2  # the entry bound


def test_a_sliding_window_model_gets_no_reuse_or_joining_and_stays_exact(tmp_path):
    """Sliding-window layers keep a cache the engine cannot splice: no prompt cache, no joining; batches
    are gathered from what waits, and the ids are still those of one-at-a-time generation."""
    import torch

    from codeagent.models.batching import BatchedTransformersEngine
    from codeagent.models.hf import TransformersGenerator, load_model_and_tokenizer
    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    model, tokenizer = load_model_and_tokenizer(str(build_tiny(
        tmp_path, vocab_size=512, use_sliding_window=True, sliding_window=8, max_window_layers=0)), device="cpu")
    texts = ["def f(a, b):", "Fix the bug in a.py " * 4, "class Cart:\n    pass\n" * 3]
    calls = [greedy(tokenizer(text)["input_ids"], 5 + 3 * i, set()) for i, text in enumerate(texts)]
    alone = [TransformersGenerator(model).generate(**call) for call in calls]
    with BatchedTransformersEngine(model, pad_id=tokenizer.pad_token_id) as engine:
        batched = run_concurrently(engine, calls)
        again = engine.generate(**greedy(calls[1]["prompt_ids"] + batched[1][0] + [5, 6], 3, set()))
        assert not engine._flexible and engine.reused_tokens == 0 and len(engine.prefix_cache) == 0
        assert engine.batch_sizes == [1, 2, 1] and engine.joined == 0  # the two waited for the first to end
    assert [ids for ids, _, _ in batched] == [ids for ids, _, _ in alone]
    assert len(again[0]) == 3


def test_a_conversation_keeps_one_cache_entry_and_its_end_releases_it(tiny):
    """Through the backend: each turn's KV replaces the previous turn's entry, and the end of the run
    (what rollouts call with the last recorded step) drops it."""
    from codeagent.models.hf import HFModel
    from codeagent.models.types import Sampling
    from codeagent.train.grpo.generation import release_conversation

    policy = HFModel(tiny.model, tiny.tokenizer, name="release")
    engine = policy.generator
    messages = [{"role": "system", "content": "You fix bugs. " * 4}, {"role": "user", "content": "Fix a.py"}]
    steps = []
    try:
        for turn in range(3):
            response = policy.complete(messages, [], Sampling(temperature=0, max_tokens=4))
            steps.append(SimpleNamespace(prompt_token_ids=response.prompt_token_ids, token_ids=response.token_ids))
            messages = messages + [response.to_message(), {"role": "user", "content": f"observation {turn}"}]
            assert len(engine.prefix_cache) == 1  # this conversation's latest turn only
        assert engine.reused_tokens > 0
        release_conversation(policy, steps)
        assert len(engine.prefix_cache) == 0 and engine.prefix_cache.bytes == 0
    finally:
        policy.close()
