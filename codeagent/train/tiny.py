"""Tiny models built offline: a byte-level BPE tokenizer trained with `tokenizers` on a small corpus,
a Qwen-style chat template with tool calls and generation markers, and a 2-layer Qwen3-style model
with random weights. Tests and benchmarks use them where no hub download is possible.

    python -m codeagent.train.tiny OUTPUT_DIR [--corpus FILE ...] [--vocab 1024]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Tags of the tool-call protocol: single tokens (as in Qwen), kept when decoding.
PROTOCOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
EOS_TOKEN, PAD_TOKEN = "<|im_end|>", "<|endoftext|>"

TINY_CONFIG: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=8192, tie_word_embeddings=True,
    rms_norm_eps=1e-6, attention_dropout=0.0,
)


def chat_template() -> str:
    return (Path(__file__).with_name("chat_template.jinja")).read_text()


def default_corpus() -> list[str]:
    """Text that looks like what the agent reads and writes: prompts, tool specs, code."""
    from ..assets import asset_dir

    texts = [chat_template()]
    for folder, pattern in (("prompts", "*.j2"), ("tools", "*.yaml")):
        texts += [path.read_text() for path in sorted(asset_dir(folder).glob(pattern))]
    try:
        from ..tools.registry import ToolRegistry

        texts += [json.dumps(spec) for spec in ToolRegistry().specs()]
    except Exception:  # the registry is a nicety for the corpus, never a requirement
        pass
    texts.append('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>')
    texts.append("def f(a, b):\n    return a + b\n\nclass Cart:\n    pass\n")
    return texts


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 1024, *, word_boundaries: bool = True):
    """A fast tokenizer (transformers) over a byte-level BPE trained on `corpus`. Without
    `word_boundaries`, merges may cross spaces and punctuation, so text the corpus repeats (prompts,
    tool-call boilerplate) becomes a few tokens: short sequences for small CPU experiments."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = list(corpus) if corpus is not None else default_corpus()
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=word_boundaries)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, unk_token=None,
        additional_special_tokens=["<|im_start|>"], clean_up_tokenization_spaces=False,
        model_max_length=TINY_CONFIG["max_position_embeddings"],
    )
    tokenizer.add_tokens(PROTOCOL_TOKENS)  # plain added tokens: kept by skip_special_tokens decoding
    tokenizer.chat_template = chat_template()
    return tokenizer


# Standard deviation of the (tied) embedding at initialization. A random model that is trained only
# through LoRA keeps its embedding frozen, and the logits are that embedding times normalized hidden
# states: with the usual 0.02 they stay within about +-1 and every next-token distribution stays near
# uniform whatever the adapter learns. A wider embedding lets the adapter express confident choices.
EMBEDDING_STD = 0.2


def build_model(tokenizer, seed: int = 0, embedding_std: float = EMBEDDING_STD, **overrides: Any):
    """A randomly initialized Qwen3-style causal LM sized for `tokenizer`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, **{**TINY_CONFIG, **overrides},
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0.0, embedding_std)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny(output_dir: str | Path, corpus: Iterable[str] | None = None, *, vocab_size: int = 1024,
               seed: int = 0, word_boundaries: bool = True, **overrides: Any) -> Path:
    """Tokenizer + random model saved to `output_dir`, loadable with from_pretrained."""
    output_dir = Path(output_dir)
    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size, word_boundaries=word_boundaries)
    model = build_model(tokenizer, seed=seed, **overrides)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Build a tiny random model and tokenizer offline.")
    parser.add_argument("output_dir")
    parser.add_argument("--corpus", nargs="*", default=[], help="extra text files for the tokenizer")
    parser.add_argument("--vocab", type=int, default=1024)
    args = parser.parse_args(argv)
    corpus = default_corpus() + [Path(path).read_text() for path in args.corpus]
    print(build_tiny(args.output_dir, corpus, vocab_size=args.vocab))


if __name__ == "__main__":
    main()
