"""A tiny deterministic reasoning model, built locally (no downloads), for real-engine tests.

The tokenizer is a byte-level BPE trained with ``tokenizers`` on generated ChatML dialogs, with
special tokens ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ``<think>``, ``</think>`` and
the plain added words ``hello`` and ``world``. The model is a one-layer ``Qwen3ForCausalLM``
(``model_type qwen3`` turns on the Qwen response parsing of ``transformers serve``) rigged so
that greedy decoding is a fixed chain:

    any other token → <think> → hello → </think> → world → <|im_end|>

How: ``o_proj`` and ``down_proj`` are zero, so the residual stream at the last position is the
last token's embedding. Each chain token's embedding is ``s·e_i`` (one-hot in dimension ``i``)
and every other token's is ``s·e_0``. The final RMSNorm turns ``s·e_i`` into ``√H·e_i``
(``rms = s/√H``), and ``lm_head[next(i), i] = 10`` gives the next chain token a logit of
``10·√64 = 80`` against 0 for every other token.

Served, every answer is ``content "world"``, ``reasoning_content "hello"``, 5 completion tokens
(``<think> hello </think> world <|im_end|>``); with ``max_tokens: 2`` it stops with ``finish_reason
"length"`` inside the thinking (``<think> hello``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHAIN = ["<think>", "hello", "</think>", "world", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HIDDEN = 64


def _corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = (
        "the a model answers question about cats dogs rivers numbers code plan tokens fast slow "
        "why how what is are was one two three four five please tell me more".split()
    )
    lines = []
    for _ in range(n):
        user = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        reply = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        lines.append(f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{reply}<|im_end|>\n")
    return lines


def build_tokenizer(directory: Path):  # noqa: ANN201 - transformers is imported lazily
    """Train the BPE tokenizer and save it (with its chat template) to ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_corpus(2000), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.add_tokens(["hello", "world"])
    fast.chat_template = CHATML
    fast.save_pretrained(directory)
    return fast


def build_reasoning_model(directory: Path) -> Path:
    """Write the tokenizer, config, weights and generation config of the chain model; return ``directory``."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(directory)
    vocab = len(tokenizer)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in CHAIN]
    with torch.no_grad():
        layer = model.model.layers[0]
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
        embed = torch.zeros(vocab, HIDDEN)
        embed[:, 0] = 1.0  # every token not in the chain points at <think>
        for dim, token_id in enumerate(ids, start=1):
            embed[token_id] = 0.0
            embed[token_id, dim] = 1.0
        model.model.embed_tokens.weight.copy_(embed)
        model.model.norm.weight.fill_(1.0)
        head = torch.zeros(vocab, HIDDEN)
        head[ids[0], 0] = 10.0
        for dim, next_id in enumerate(ids[1:], start=1):
            head[next_id, dim] = 10.0
        model.lm_head.weight.copy_(head)
    model.save_pretrained(directory, safe_serialization=True)
    GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id, do_sample=False
    ).save_pretrained(directory)
    (directory / "CHAIN.json").write_text(json.dumps(CHAIN))
    return directory


if __name__ == "__main__":
    import sys

    print(build_reasoning_model(Path(sys.argv[1])))
