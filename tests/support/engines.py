"""Start ``transformers serve`` on the CPU with a locally built model (no downloads)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
from tests.support.child import ChildProcess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TransformersServe(ChildProcess):
    """``transformers serve MODEL_DIR`` in a child process; ``url`` is its base URL."""

    grace_s = 15.0

    def __init__(self, model_dir: Path, workdir: Path, *, ready_timeout_s: float = 120.0):
        if shutil.which("transformers") is None:
            raise RuntimeError("`transformers` CLI not found: pip install 'transformers[serving]'")
        hf_home = workdir / "hf"
        (hf_home / "hub").mkdir(parents=True, exist_ok=True)  # without it /v1/models answers 500
        self.port = free_port()
        self.model = str(model_dir)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)}
        self.log = open(workdir / "transformers-serve.log", "wb")
        self.proc = subprocess.Popen(
            ["transformers", "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu"],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited {self.proc.returncode}; see {self.log.name}")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"transformers serve not ready in {ready_timeout_s} s; see {self.log.name}")

    def after_stop(self) -> None:
        self.log.close()
