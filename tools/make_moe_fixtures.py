#!/usr/bin/env python3
"""Oracle fixtures for the mixture-of-experts families: tiny random NemotronH
models with `E` layers and Qwen3.5-MoE models, and transformers' outputs.

Runs on the GPU machine (torch + transformers 5.17, no network); the product
never imports it. Each fixture is written under OUT/<name>/ as
tools/make_fixtures.py writes its own (whose helpers this reuses): the
checkpoint, config.json, and expected.json with

    prompts         list of token-id lists
    prefill_logits  per prompt, (T, V): one full forward, no cache
    decode_logits   per prompt, (T, V): token by token through the HF cache
    greedy          per prompt: {"tokens": 12 greedy ids, "gaps": top-1 minus top-2}

and two fields of its own:

    expert_form     "fused" (E, rows, cols) stacks, or "per_expert" tensors
    router_margin   the smallest gap, over every routing decision those runs
                    made, at a cutoff that decides which experts a token runs:
                    the K-th against the (K+1)-th score of the experts it may
                    choose, and (sigmoid routers with groups) the topk_group-th
                    against the next group score

The models cover odd expert counts, top-k > 1, NemotronH with several groups
and with one, shared experts on and off, both Qwen3.5-MoE classes, fp32 and
bf16, and both expert forms. Weights are drawn as make_fixtures.py draws
them, with expert stacks at 1/sqrt(fan-in) and the NemotronH routers'
correction bias made non-zero (a non-negative bias keeps every corrected
score positive, so transformers' masking of dropped groups cannot matter).

A fixture is kept only when it is tie-free at the top-k cutoff: every margin
above TIE_MARGIN, far past fp32 rounding, so the CPU reference must choose
the same experts as transformers at every position. Otherwise the model is
drawn again from the next seed.

References come from the eager experts implementation (transformers' loop
over the hit experts), in fp32, from the checkpoint as stored (bf16
fixtures: the rounded weights); the checkpoint is then rewritten into the
fixture's expert form, whichever form save_pretrained chose.

Usage: python3 tools/make_moe_fixtures.py OUT_DIR
"""
import glob
import json
import math
import os
import re
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (NemotronHConfig, NemotronHForCausalLM, Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM,
                          Qwen3_5MoeForConditionalGeneration, Qwen3_5MoeTextConfig)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (the dense fixtures' helpers: randomise, run_oracle, save, legacy form)

TIE_MARGIN = 1e-5
MAX_DRAWS = 20

FUSED = re.compile(r"^(.*\.experts)\.(gate_up_proj|up_proj|down_proj)$")
SPLIT = re.compile(r"^(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def randomise(model, seed):
    """make_fixtures' draw, then what it does not know about experts."""
    make_fixtures.randomise(model, seed)
    g = torch.Generator().manual_seed(seed + 500)
    qwen = isinstance(model, (Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".experts." in name + "." and p.dim() == 3:
                # (E, out, in): each expert a projection of fan-in `in`.
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
            elif qwen and (name.endswith("norm.weight") or "layernorm" in name) and "linear_attn.norm" not in name:
                # Zero-centred norms, applied as (1 + w), as in the dense Qwen3.5 fixtures.
                p.copy_(torch.rand(p.shape, generator=g) - 0.5)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.rand(b.shape, generator=g))


def routers(model):
    return [m for m in model.modules() if type(m).__name__ in ("NemotronHTopkRouter", "Qwen3_5MoeTopKRouter")]


class MarginProbe:
    """Forward hooks on every router: the smallest margin at a cutoff."""

    def __init__(self, model):
        self.cfg = model.config.get_text_config()
        self.margin = math.inf
        self.decisions = 0
        self.handles = [r.register_forward_hook(self.hook) for r in routers(model)]
        if not self.handles:
            raise RuntimeError("no router modules found: the model has no MoE layers")

    def hook(self, module, inputs, output):
        t = output[0] if isinstance(output, tuple) else output  # Qwen's router returns (logits, weights, indices)
        logits = t.detach().float().reshape(-1, t.shape[-1])
        c = self.cfg
        k = c.num_experts_per_tok
        if type(module).__name__ == "NemotronHTopkRouter":
            choice = logits.sigmoid() + module.e_score_correction_bias.float()
            n, e = choice.shape
            groups, keep = c.n_group, c.topk_group
            group_scores = choice.view(n, groups, e // groups).topk(2, dim=-1)[0].sum(-1)
            if keep < groups:
                top = group_scores.sort(dim=-1, descending=True)[0]
                self.margin = min(self.margin, float((top[:, keep - 1] - top[:, keep]).min()))
            kept = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(keep, dim=-1)[1], 1.0)
            mask = kept.unsqueeze(-1).expand(n, groups, e // groups).reshape(n, e).bool()
            choice = choice.masked_fill(~mask, float("-inf"))
            available = keep * (e // groups)
        else:
            choice = torch.softmax(logits, dim=-1)
            available = choice.shape[-1]
        if k < available:
            top = choice.sort(dim=-1, descending=True)[0]
            self.margin = min(self.margin, float((top[:, k - 1] - top[:, k]).min()))
        self.decisions += logits.shape[0]

    def close(self):
        for h in self.handles:
            h.remove()


def state_dict_files(d):
    return sorted(glob.glob(os.path.join(d, "*.safetensors")))


def to_per_expert(sd):
    out = {}
    for k, v in sd.items():
        m = FUSED.match(k)
        if not m:
            out[k] = v
            continue
        base, what = m.groups()
        for e in range(v.shape[0]):
            if what == "gate_up_proj":  # each expert's gate rows, then its up rows
                gate, up = v[e].chunk(2, dim=0)
                out[f"{base}.{e}.gate_proj.weight"] = gate.contiguous()
                out[f"{base}.{e}.up_proj.weight"] = up.contiguous()
            else:
                out[f"{base}.{e}.{what}.weight"] = v[e].contiguous()
    return out


def to_fused(sd):
    out, parts = {}, {}
    for k, v in sd.items():
        m = SPLIT.match(k)
        if not m:
            out[k] = v
            continue
        base, e, what = m.groups()
        parts.setdefault((base, what), {})[int(e)] = v
    bases = {base for base, _ in parts}
    for base in bases:
        def stack(what):
            d = parts.pop((base, what))
            return [d[e] for e in range(len(d))]
        if (base, "gate_proj") in parts:
            gates, ups = stack("gate_proj"), stack("up_proj")
            out[f"{base}.gate_up_proj"] = torch.stack([torch.cat([g, u], dim=0) for g, u in zip(gates, ups)])
        else:
            out[f"{base}.up_proj"] = torch.stack(stack("up_proj"))
        out[f"{base}.down_proj"] = torch.stack(stack("down_proj"))
    assert not parts, f"unpaired expert tensors: {sorted(parts)}"
    return out


def rewrite_experts(d, form):
    """The checkpoint in `d` as one model.safetensors with its experts in `form`."""
    files = state_dict_files(d)
    sd = {}
    for f in files:
        sd.update(load_file(f))
    before = sum(v.numel() for v in sd.values())
    sd = to_per_expert(sd) if form == "per_expert" else to_fused(sd)
    # The two rewrites undo each other exactly: neither reorders a row.
    back = to_fused(sd) if form == "per_expert" else to_per_expert(sd)
    again = to_per_expert(back) if form == "per_expert" else to_fused(back)
    assert again.keys() == sd.keys() and all(torch.equal(again[k], sd[k]) for k in sd), "expert rewrite not exact"
    assert sum(v.numel() for v in sd.values()) == before, "the rewrite lost or invented parameters"
    n_fused = sum(1 for k in sd if FUSED.match(k))
    n_split = sum(1 for k in sd if SPLIT.match(k))
    assert (n_fused > 0 and n_split == 0) if form == "fused" else (n_split > 0 and n_fused == 0), (form, n_fused, n_split)
    for f in files:
        os.remove(f)
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        os.remove(index)
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})


def load_reference(cls, d):
    """The stored checkpoint in fp32, experts run by transformers' eager loop
    (the loop over hit experts whose order of sums the CPU reference keeps;
    grouped_mm would add the same terms in another order)."""
    ref = cls.from_pretrained(d, dtype=torch.float32)
    if hasattr(ref, "set_experts_implementation"):
        ref.set_experts_implementation("eager")
    impl = getattr(ref.config.get_text_config(), "_experts_implementation", None)
    if impl not in (None, "eager"):
        raise SystemExit(f"{d}: experts implementation is {impl!r}, not the eager loop")
    return ref


def build(name, make, seed, opts, out, device):
    for draw in range(MAX_DRAWS):
        s = seed + 100 * draw
        model = make()
        randomise(model, s)
        d = make_fixtures.save(model, out, name, opts.get("dtype", torch.float32), None, opts.get("edit"))
        ref = load_reference(type(model), d)
        probe = MarginProbe(ref)
        vocab = ref.config.get_text_config().vocab_size
        expected = make_fixtures.run_oracle(ref, vocab, s, device)
        probe.close()
        print(f"  draw {draw} (seed {s}): {probe.decisions} routing decisions, smallest margin "
              f"{probe.margin:.3g}", flush=True)
        if probe.margin > TIE_MARGIN:
            rewrite_experts(d, opts["form"])
            expected["expert_form"] = opts["form"]
            expected["router_margin"] = make_fixtures.fmt(probe.margin)
            with open(os.path.join(d, "expected.json"), "w") as f:
                json.dump(expected, f, separators=(",", ":"))
            return
    raise SystemExit(f"{name}: no draw in {MAX_DRAWS} was tie-free at the top-k cutoff")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    device = make_fixtures.oracle_device()

    nh = dict(vocab_size=97, hidden_size=48, num_attention_heads=6, num_key_value_heads=2, head_dim=8,
              intermediate_size=72, mamba_num_heads=6, mamba_head_dim=10, n_groups=3, ssm_state_size=12,
              conv_kernel=4, chunk_size=8, layer_norm_epsilon=1e-5, time_step_min=1e-9, eos_token_id=96,
              bos_token_id=1, pad_token_id=0, mlp_hidden_act="relu2")
    qt = dict(vocab_size=89, hidden_size=40, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
              linear_value_head_dim=10, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, eos_token_id=88,
              layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
    fixtures = [
        # 9 experts in 3 groups of 3, 2 groups kept, 3 per token, scaled by 2.5;
        # every layer kind; fused experts, fp32.
        ("nemotron_h_moe", lambda: NemotronHForCausalLM(NemotronHConfig(
            layers_block_type=["linear_attention", "moe", "full_attention", "moe", "mlp", "linear_attention",
                               "moe"],
            n_routed_experts=9, num_experts_per_tok=3, moe_intermediate_size=20,
            moe_shared_expert_intermediate_size=28, n_group=3, topk_group=2, norm_topk_prob=True,
            routed_scaling_factor=2.5, **nh)), 31, {"form": "fused"}),
        # The published config form (hybrid_override_pattern), one group of 7,
        # 2 per token, unnormalised weights, biased shared expert; per expert, bf16.
        ("nemotron_h_moe_legacy_bf16", lambda: NemotronHForCausalLM(NemotronHConfig(
            layers_block_type=["linear_attention", "moe", "full_attention", "linear_attention", "moe"],
            n_routed_experts=7, num_experts_per_tok=2, moe_intermediate_size=16,
            moe_shared_expert_intermediate_size=24, n_group=1, topk_group=1, norm_topk_prob=False,
            routed_scaling_factor=1.0, mlp_bias=True, **nh)), 32,
         {"form": "per_expert", "dtype": torch.bfloat16, "edit": make_fixtures.nemotron_legacy}),
        # Qwen3.5-MoE as a causal LM: 7 experts, 3 per token, a gated shared
        # expert; fused experts (gate_up_proj), fp32.
        ("qwen3_5_moe", lambda: Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(
            num_experts=7, num_experts_per_tok=3, moe_intermediate_size=24,
            shared_expert_intermediate_size=32, **qt)), 41, {"form": "fused"}),
        # The vision-language class the checkpoints ship as: 5 experts, 2 per
        # token, no shared expert (width 0); per expert, bf16.
        ("qwen3_5_moe_vl_no_shared", lambda: Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(
            text_config=dict(qt, num_experts=5, num_experts_per_tok=2, moe_intermediate_size=20,
                             shared_expert_intermediate_size=0),
            vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=40,
                               num_position_embeddings=64))), 42,
         {"form": "per_expert", "dtype": torch.bfloat16}),
    ]
    for name, make, seed, opts in fixtures:
        print(name, flush=True)
        build(name, make, seed, opts, out, device)


if __name__ == "__main__":
    main()
