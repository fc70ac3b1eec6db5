#!/usr/bin/env python3
"""Oracle fixtures: tiny random NemotronH / Qwen3.5 models and transformers' outputs.

Runs on the GPU machine (torch + transformers 5.x); the product never imports
it. For each model it writes, under OUT/<name>/, the checkpoint exactly as
`save_pretrained` writes it (some variants then rewritten to the legacy
config forms published checkpoints use) and `expected.json`:

    prompts         list of token-id lists
    prefill_logits  per prompt, (T, V): one full forward, no cache
    decode_logits   per prompt, (T, V): token by token through the HF cache
    greedy          per prompt: {"tokens": 12 greedy ids after the prompt,
                     "gaps": top-1 minus top-2 logit at each step}

Models are fp32 (one bf16 and one f16 variant, whose references are computed
in fp32 from the stored, rounded weights). Weights are re-drawn at a scale
that keeps activations O(1) and logits spread, and the parameters that
transformers initialises to constants (A_log, D, dt_bias, every norm weight,
conv bias) are randomised, so a convention error cannot hide.

    prefill_logits_bf16  per prompt, (T, V): the same forward with the model
                     loaded in bf16 — how far bf16 rounding alone moves each
                     position (a test's measure of the fixture's
                     conditioning, not a reference)

Usage: python3 tools/make_fixtures.py OUT_DIR
       python3 tools/make_fixtures.py --bf16-logits FIXTURE_DIR...
         (adds prefill_logits_bf16 to existing fixtures' expected.json)
"""
import json
import math
import os
import shutil
import sys

import torch
import transformers
from transformers import (NemotronHConfig, NemotronHForCausalLM, Qwen3_5Config,
                          Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig)

N_GREEDY = 12
PROMPT_LENS = [1, 5, 19, 70]  # 70 crosses the GDN chunk (64) and the SSD chunk (8)


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)

    def draw(shape, lo=None, hi=None, std=None):
        if std is not None:
            return torch.randn(shape, generator=g) * std
        return lo + (hi - lo) * torch.rand(shape, generator=g)

    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if p.numel() == 0:
                continue  # a zero-width layer (an MoE fixture's absent shared expert) has no fan-in to scale by
            if name.endswith("norm.weight") or "layernorm" in name or name.endswith("norm_f.weight"):
                # Zero-centred (Qwen3.5) and plain weights alike get spread values.
                zc = isinstance(model, (Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration)) \
                    and "linear_attn.norm" not in name
                p.copy_(draw(p.shape, -0.5, 0.5) if zc else draw(p.shape, 0.5, 1.5))
            elif leaf == "A_log":
                p.copy_(draw(p.shape, -1.0, 1.5))
            elif leaf == "D":
                p.copy_(draw(p.shape, -1.0, 1.0))
            elif leaf == "dt_bias":
                # softplus(dt) stays far above time_step_min: HF clamps there in
                # prefill only, which would make its own paths disagree.
                p.copy_(draw(p.shape, -2.5, 1.0))
            elif "conv1d" in name:
                p.copy_(draw(p.shape, std=0.5))
            elif "embed" in name:
                # A tied head reuses these rows: keep its logits O(10) like
                # the untied models', so fp32 rounding stays far below 1e-4.
                tied = getattr(model.config, "tie_word_embeddings", False)
                p.copy_(draw(p.shape, std=0.3 if tied else 1.0))
            elif leaf == "bias":
                p.copy_(draw(p.shape, std=0.1))
            elif leaf == "weight" and p.dim() == 2:
                fan_in = p.shape[1]
                scale = 3.0 if "lm_head" in name else 1.0
                p.copy_(draw(p.shape, std=scale / math.sqrt(fan_in)))
            else:
                p.copy_(draw(p.shape, std=0.2))


def fmt(x):
    return float("%.9g" % x)


def run_oracle(model, vocab, seed, device):
    model = model.to(device).eval()
    g = torch.Generator().manual_seed(seed + 1000)
    out = {"prompts": [], "prefill_logits": [], "decode_logits": [], "greedy": []}
    with torch.no_grad():
        for n in PROMPT_LENS:
            ids = torch.randint(0, vocab, (1, n), generator=g)
            x = ids.to(device)
            full = model(input_ids=x, use_cache=False).logits[0].float()
            dec = []
            pkv = None
            for t in range(n):
                o = model(input_ids=x[:, t:t + 1], past_key_values=pkv, use_cache=True)
                pkv = o.past_key_values
                dec.append(o.logits[0, -1].float())
            dec = torch.stack(dec)
            # Greedy continuation through the cache, from the prompt's prefill.
            o = model(input_ids=x, use_cache=True)
            pkv, last = o.past_key_values, o.logits[0, -1].float()
            toks, gaps = [], []
            for _ in range(N_GREEDY):
                top = torch.topk(last, 2)
                toks.append(int(top.indices[0]))
                gaps.append(fmt(float(top.values[0] - top.values[1])))
                o = model(input_ids=torch.tensor([[toks[-1]]], device=device), past_key_values=pkv,
                          use_cache=True)
                pkv, last = o.past_key_values, o.logits[0, -1].float()
            out["prompts"].append(ids[0].tolist())
            out["prefill_logits"].append([[fmt(v) for v in row] for row in full.cpu().tolist()])
            out["decode_logits"].append([[fmt(v) for v in row] for row in dec.cpu().tolist()])
            out["greedy"].append({"tokens": toks, "gaps": gaps})
            print(f"  prompt {n}: |logits| max {full.abs().max().item():.2f}, prefill-vs-decode "
                  f"{(full - dec).abs().max().item():.2e}, min greedy gap {min(gaps):.3g}", flush=True)
    return out


def rewrite_config(path, edit):
    with open(path) as f:
        cfg = json.load(f)
    edit(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def nemotron_legacy(cfg):
    """The form of published NemotronH checkpoints: a pattern string and the
    mamba_* key names, time_step_limit with a bare JSON Infinity."""
    kinds = {"linear_attention": "M", "full_attention": "*", "mlp": "-", "moe": "E"}
    cfg["hybrid_override_pattern"] = "".join(kinds[k] for k in cfg.pop("layers_block_type"))
    cfg["num_hidden_layers"] = len(cfg["hybrid_override_pattern"])
    cfg["mamba_n_groups"] = cfg.pop("n_groups")
    cfg["mamba_d_conv"] = cfg.pop("conv_kernel")
    cfg["mamba_conv_bias"] = cfg.pop("use_conv_bias")
    cfg["time_step_limit"] = [0.0, "__INF__"]


def save(model, out, name, dtype=torch.float32, shard=None, edit=None):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    kw = {"max_shard_size": shard} if shard else {}
    model.to(dtype).save_pretrained(d, **kw)
    if edit:
        rewrite_config(os.path.join(d, "config.json"), edit)
        text = open(os.path.join(d, "config.json")).read().replace('"__INF__"', "Infinity")
        open(os.path.join(d, "config.json"), "w").write(text)
    return d


def oracle_device():
    """The device the oracle runs on, fp32 matmuls there (no TF32), announced."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch", torch.__version__, "transformers", transformers.__version__, "device", device)
    return device


def bf16_logits(dirs):
    """prefill_logits_bf16 into each fixture's expected.json, its weights as stored."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for d in dirs:
        try:
            add_bf16_logits(d, device)
        except Exception as e:  # one fixture transformers cannot load leaves the others' done
            print(d, "failed:", e, flush=True)


def add_bf16_logits(d, device):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
    path = os.path.join(d, "expected.json")
    with open(path) as f:
        exp = json.load(f)
    vl = "ForConditionalGeneration" in AutoConfig.from_pretrained(d).architectures[0]
    cls = AutoModelForImageTextToText if vl else AutoModelForCausalLM
    model = cls.from_pretrained(d, dtype=torch.bfloat16).to(device).eval()
    rows = []
    with torch.no_grad():
        for p in exp["prompts"]:
            full = model(input_ids=torch.tensor([p], device=device), use_cache=False).logits[0].float()
            rows.append([[fmt(v) for v in row] for row in full.cpu().tolist()])
    exp["prefill_logits_bf16"] = rows
    with open(path, "w") as f:
        json.dump(exp, f, separators=(",", ":"))
    print(d, "bf16 logits of", len(rows), "prompts", flush=True)


def main():
    if sys.argv[1] == "--bf16-logits":
        bf16_logits(sys.argv[2:])
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    device = oracle_device()

    models = []
    # NemotronH: odd sizes, N=12 (not a power of two), 3 groups, GQA 6/2.
    nh = dict(vocab_size=97, hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
              head_dim=8, intermediate_size=72, mamba_num_heads=6, mamba_head_dim=10, n_groups=3,
              ssm_state_size=12, conv_kernel=4, chunk_size=8, layer_norm_epsilon=1e-5,
              time_step_min=1e-9, eos_token_id=96, bos_token_id=1, pad_token_id=0)
    models.append(("nemotron_h_tiny", NemotronHForCausalLM(NemotronHConfig(
        layers_block_type=["linear_attention", "full_attention", "mlp", "linear_attention",
                           "linear_attention", "mlp", "full_attention", "linear_attention", "mlp"],
        **nh)), 11, {}))
    # Legacy config form, biases on, K=3, one group; stored as f16.
    nh2 = dict(nh, n_groups=1, conv_kernel=3, use_bias=True, mlp_bias=True, mamba_num_heads=4,
               mamba_head_dim=6, ssm_state_size=10, num_attention_heads=4, num_key_value_heads=4)
    models.append(("nemotron_h_legacy_f16", NemotronHForCausalLM(NemotronHConfig(
        layers_block_type=["linear_attention", "mlp", "full_attention", "linear_attention", "mlp"],
        **nh2)), 12, {"dtype": torch.float16, "edit": nemotron_legacy}))
    # Same shape family stored as bf16 and sharded.
    models.append(("nemotron_h_bf16_sharded", NemotronHForCausalLM(NemotronHConfig(
        layers_block_type=["linear_attention", "full_attention", "mlp", "linear_attention"], **nh)),
        13, {"dtype": torch.bfloat16, "shard": "20KB"}))
    # Qwen3.5: Hk=2 ≠ Hv=6, dk=8, dv=10, GQA 4/2, partial rotary 0.25 of 16.
    qt = dict(vocab_size=89, hidden_size=40, intermediate_size=56, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=6, linear_key_head_dim=8, linear_value_head_dim=10,
              linear_conv_kernel_dim=4, rms_norm_eps=1e-6, eos_token_id=88,
              layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                               "partial_rotary_factor": 0.25})
    models.append(("qwen3_5_tiny", Qwen3_5ForCausalLM(Qwen3_5TextConfig(**qt)), 21,
                   {"shard": "40KB"}))
    # The text model of the vision-language class: tied head, theta 1e6,
    # rotary half of the head, mRoPE sections, interval-derived layer types.
    qt2 = dict(qt, num_hidden_layers=3, layer_types=None, full_attention_interval=3,
               linear_num_key_heads=1, linear_num_value_heads=3,
               rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1],
                                "mrope_interleaved": True})
    qt2.pop("layer_types")
    vc = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=40,
              num_position_embeddings=64)
    models.append(("qwen3_5_vl_tied", Qwen3_5ForConditionalGeneration(Qwen3_5Config(
        text_config=qt2, vision_config=vc, tie_word_embeddings=True)), 22, {}))

    for name, model, seed, opts in models:
        print(name, flush=True)
        randomise(model, seed)
        d = save(model, out, name, opts.get("dtype", torch.float32), opts.get("shard"),
                 opts.get("edit"))
        cls = type(model)
        ref = cls.from_pretrained(d, dtype=torch.float32)  # the stored (rounded) weights, in fp32
        vocab = ref.config.get_text_config().vocab_size
        with open(os.path.join(d, "expected.json"), "w") as f:
            json.dump(run_oracle(ref, vocab, seed, device), f, separators=(",", ":"))

    # Config-only directory at Nemotron-H-8B shape, as transformers 5 writes it.
    try:
        big = NemotronHConfig(vocab_size=131072, hidden_size=4096, num_attention_heads=32,
                          num_key_value_heads=8, head_dim=128, intermediate_size=21504,
                          mamba_num_heads=128, mamba_head_dim=64, n_groups=8, ssm_state_size=128,
                          conv_kernel=4, hybrid_override_pattern=(
                              "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"),
                          dtype="bfloat16")
        big.save_pretrained(os.path.join(out, "nemotron_h_8b_config_v5"))
    except Exception as e:  # the fixtures above matter more than this config
        print("could not write the 8B config:", type(e).__name__, e)


if __name__ == "__main__":
    main()
