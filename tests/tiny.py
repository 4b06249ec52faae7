"""Tiny random models and random pairs for the engine's tests (tests/test_scoring.py, tests/test_device_path.py)."""

from __future__ import annotations

import torch

from gece.scoring import models, planning


def side(ids, *words):
    return planning.SideTokens(tuple(ids), tuple(tuple(w) for w in words))


def tiny_model(kind: str):
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
    )

    torch.manual_seed(0)
    if kind == "llama":
        cfg = LlamaConfig(
            vocab_size=97,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
        model = LlamaForCausalLM(cfg)
    elif kind == "mistral":  # a sliding window in every layer
        cfg = MistralConfig(
            vocab_size=97,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            sliding_window=4,
            max_position_embeddings=128,
        )
        model = MistralForCausalLM(cfg)
    else:  # sliding-window layers and final logit soft-capping
        cfg = Gemma3TextConfig(
            vocab_size=97,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            sliding_window=4,
            final_logit_softcapping=5.0,
            max_position_embeddings=128,
        )
        model = Gemma3ForCausalLM(cfg)
    model.set_attn_implementation(models.attn_implementation("exact"))
    return model.eval()


def random_pairs(rng, n):
    """Pairs of random sentences differing in one or two target words of 1-3 tokens."""
    out = []
    stems = [list(rng.integers(1, 97, k)) for k in (2, 3, 5)]  # beginnings shared by several pairs
    for _ in range(n):
        pre = list(rng.integers(1, 97, rng.integers(0, 6)))
        if rng.random() < 0.5:
            pre = stems[rng.integers(3)] + pre[:2]
        if not pre and rng.random() < 0.5:
            pre = [int(rng.integers(1, 97))]
        mid = list(rng.integers(1, 97, rng.integers(0, 4)))
        post = list(rng.integers(1, 97, rng.integers(0, 4)))
        sides = []
        for _s in range(2):
            w1 = list(rng.integers(1, 97, rng.integers(1, 4)))
            two = rng.random() < 0.3
            w2 = list(rng.integers(1, 97, rng.integers(1, 3))) if two else []
            start = pre or [int(rng.integers(1, 97))]
            ids = start + w1 + (mid + w2 if two else []) + post
            words = [list(range(len(start), len(start) + len(w1)))]
            if two:
                s2 = len(start) + len(w1) + len(mid)
                words.append(list(range(s2, s2 + len(w2))))
            sides.append(side([int(i) for i in ids], *words))
        out.append((sides[0], sides[1]))
    return out
