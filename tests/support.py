"""What tests in every folder share: the repository paths, ../shared/configs, and the GPU guard.
(A module of its own, not conftest.py: each test folder may have a conftest of its own.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
#: Hand-made and captured inputs shared by the test folders.
FIXTURES = os.path.join(TESTS, "fixtures")

#: Real published config.json files, beside the checkout (never copied into it).
SHARED_CONFIGS = os.path.join(os.path.dirname(ROOT), "shared", "configs")


def shared_config_dir(name: str) -> str:
    """Path of ../shared/configs/<name>, or skip the test when it is absent."""
    path = os.path.join(SHARED_CONFIGS, name)
    if not os.path.isfile(os.path.join(path, "config.json")):
        pytest.skip(f"../shared/configs/{name} not present")
    return path


#: A tiny Llama config.json for plumbing tests: every GEMM kind, planned in milliseconds.
TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 100}


def write_tiny_llama(folder: Path, **overrides: object) -> Path:
    """`folder`/config.json holding TINY_LLAMA with `overrides`; returns `folder` (a MODEL path)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**TINY_LLAMA, **overrides}))
    return folder


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


requires_gpu = pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
