#!/usr/bin/env python3
"""Writes a random NemotronH model whose state-to-log proportions are those of
real checkpoints, for memory measurements (not for parity: no oracle).

The oracle fixtures are tiny, so one log entry there is a fifth of a state;
at Nemotron-H-8B shapes an entry (pre-conv xBC, x, B, dt) is ~1/53 of a
layer's state. This model keeps head dim 32 and state size 128 with one
group, so an entry is 1/36 of the state, while staying small enough for the
CPU tests (~0.9 MB). Pure Python (no numpy), deterministic.

Usage: python3 tools/make_ratio_model.py OUT_DIR
"""
import json
import os
import random
import struct
import sys

HIDDEN, VOCAB = 64, 64
H, P, N, G, K = 8, 32, 128, 1, 4
HEADS, KV, HD, INTER = 4, 2, 16, 96
PATTERN = "M*M-M"


def tensors():
    rng = random.Random(7)
    conv = H * P + 2 * G * N

    def mat(rows, cols, scale):
        return [rows, cols], [rng.gauss(0.0, scale) for _ in range(rows * cols)]

    def vec(n, lo, hi):
        return [n], [rng.uniform(lo, hi) for _ in range(n)]

    out = {"backbone.embeddings.weight": mat(VOCAB, HIDDEN, 1.0)}
    for i, kind in enumerate(PATTERN):
        pre = f"backbone.layers.{i}."
        out[pre + "norm.weight"] = vec(HIDDEN, 0.5, 1.5)
        mx = pre + "mixer."
        if kind == "M":
            out[mx + "in_proj.weight"] = mat(H * P + conv + H, HIDDEN, HIDDEN ** -0.5)
            shape, data = mat(conv, K, 0.5)
            out[mx + "conv1d.weight"] = ([conv, 1, K], data)
            out[mx + "conv1d.bias"] = vec(conv, -0.1, 0.1)
            out[mx + "A_log"] = vec(H, -1.0, 1.5)
            out[mx + "D"] = vec(H, -1.0, 1.0)
            out[mx + "dt_bias"] = vec(H, -2.5, 1.0)
            out[mx + "norm.weight"] = vec(H * P, 0.5, 1.5)
            out[mx + "out_proj.weight"] = mat(HIDDEN, H * P, (H * P) ** -0.5)
        elif kind == "*":
            out[mx + "q_proj.weight"] = mat(HEADS * HD, HIDDEN, HIDDEN ** -0.5)
            out[mx + "k_proj.weight"] = mat(KV * HD, HIDDEN, HIDDEN ** -0.5)
            out[mx + "v_proj.weight"] = mat(KV * HD, HIDDEN, HIDDEN ** -0.5)
            out[mx + "o_proj.weight"] = mat(HIDDEN, HEADS * HD, (HEADS * HD) ** -0.5)
        else:
            out[mx + "up_proj.weight"] = mat(INTER, HIDDEN, HIDDEN ** -0.5)
            out[mx + "down_proj.weight"] = mat(HIDDEN, INTER, INTER ** -0.5)
    out["backbone.norm_f.weight"] = vec(HIDDEN, 0.5, 1.5)
    out["lm_head.weight"] = mat(VOCAB, HIDDEN, 3 * HIDDEN ** -0.5)
    return out


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    header, blobs, offset = {}, [], 0
    for name, (shape, data) in tensors().items():
        blob = struct.pack(f"<{len(data)}f", *data)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    config = {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "hybrid_override_pattern": PATTERN, "hidden_size": HIDDEN, "vocab_size": VOCAB,
        "mamba_num_heads": H, "mamba_head_dim": P, "ssm_state_size": N, "n_groups": G,
        "conv_kernel": K, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HD,
        "intermediate_size": INTER, "mlp_hidden_act": "relu2", "layer_norm_epsilon": 1e-5,
        "time_step_limit": [0.0, {"__float__": "Infinity"}], "dtype": "float32",
        "tie_word_embeddings": False,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
