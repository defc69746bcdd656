"""config_value: the first spelling that is set, and the record of which keys a plan read."""

from __future__ import annotations

from types import SimpleNamespace

from benchmark_model_kernels.vllm_rules.config import config_value, recorded_reads


def test_first_spelling_that_is_set():
    cfg = SimpleNamespace(hidden_size=None, n_embd=768)
    assert config_value(cfg, "hidden_size", "n_embd", "d_model") == 768
    assert config_value(cfg, "d_model", default=5) == 5


def test_reads_are_recorded_only_inside_the_block_and_once_each():
    cfg = SimpleNamespace(hidden_size=None, n_embd=768, vocab_size=100)
    config_value(cfg, "vocab_size")  # outside any block: not recorded anywhere
    with recorded_reads() as reads:
        config_value(cfg, "hidden_size", "n_embd")
        config_value(cfg, "n_embd")
        config_value(cfg, "vocab_size")
        config_value(cfg, "num_experts", default=0)  # nothing read: the caller's default
    assert reads == ["n_embd", "vocab_size"]


def test_nested_blocks_record_separately():
    cfg = SimpleNamespace(a=1, b=2)
    with recorded_reads() as outer:
        config_value(cfg, "a")
        with recorded_reads() as inner:
            config_value(cfg, "b")
        config_value(cfg, "a")
    assert outer == ["a"] and inner == ["b"]
