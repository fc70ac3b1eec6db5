#!/usr/bin/env python3
"""Trains the embedded default models on the GPU machine (torch + transformers).

Writes, under OUT/:
  tokenizer.json                 byte-level BPE, 4096 tokens, NFC, Qwen2 split regex
  nemotron_h_small/              NemotronH-style (Mamba2 + attention + MLP), < 5M parameters
  qwen3_5_small/                 Qwen3.5-style (Gated DeltaNet + gated attention), < 5M parameters
  draft_small/                   NemotronH-style draft, ~1M parameters
  (each: config.json, model.safetensors in bf16, tokenizer.json)
  heldout.txt                    the first 64 KB of the held-out text
  report.json                    sizes, steps, held-out perplexities
  tokenizer_cases.json           HF tokenizer ids for a varied set of strings

Text: tools/extract_corpus.py's corpus (Python docs + Debian READMEs); every
50th document is held out (2%). Perplexity: mean NLL of each token given the
tokens before it in non-overlapping 256-token windows, each window from an
empty state, computed in fp32 from the saved bf16 weights — exactly what
`replayssm perplexity --context 256` computes.

Usage: python3 tools/train_tiny.py CORPUS OUT [SECONDS_PER_MODEL]
"""
import json
import math
import os
import random
import shutil
import sys
import time

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (NemotronHConfig, NemotronHForCausalLM, Qwen3_5ForCausalLM,
                          Qwen3_5TextConfig)

SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 4096
CTX = 256
EOS = "<|endoftext|>"

CASES = ["", " ", "   ", "\n", "\n\n\n", "Hello, world!", "hello   world\n\tindented",
         "The year 2026 had 365 days; 12345678 is a number.", "naïve café résumé", "e\u0301 vs \u00e9",
         "日本語のテキスト", "中文分词测试", "emoji 🙂🚀 and ZWJ 👩‍💻", "def f(x):\n    return x ** 2  # square\n",
         "It's, we're, they'll, I'd, you've", "<|endoftext|>", "a<|endoftext|>b", "tabs\tand\r\nCRLF",
         "Ünïcödé ÅÄÖ ß", "punctuation!!! ??? ... --- ***", "  leading and trailing  ",
         "mixed123abc456", "URL: https://example.org/path?q=1&x=2", "Привет, мир", "مرحبا بالعالم",
         "x" * 300]


def log(*a):
    print(*a, flush=True)


def train_tokenizer(docs, out):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOS], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    return tok


def encode(tok, docs):
    eos = tok.token_to_id(EOS)
    ids = []
    for enc in tok.encode_batch(docs):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def nemotron(hidden, pattern, heads, head_dim, state, inter, attn_heads):
    return NemotronHForCausalLM(NemotronHConfig(
        vocab_size=VOCAB, hidden_size=hidden, hybrid_override_pattern=pattern,
        mamba_num_heads=heads, mamba_head_dim=head_dim, ssm_state_size=state, n_groups=1,
        conv_kernel=4, chunk_size=64, num_attention_heads=attn_heads, num_key_value_heads=2,
        head_dim=hidden // attn_heads, intermediate_size=inter, layer_norm_epsilon=1e-5,
        eos_token_id=0, bos_token_id=0, pad_token_id=0, max_position_embeddings=4096))


def qwen(hidden, layers, inter):
    return Qwen3_5ForCausalLM(Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_conv_kernel_dim=4, full_attention_interval=3, tie_word_embeddings=True,
        rms_norm_eps=1e-6, eos_token_id=0, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}))


def train(model, data, seconds, device, lr=3e-3, batch=32):
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    start, step = time.time(), 0
    while time.time() - start < seconds:
        frac = (time.time() - start) / seconds
        for grp in opt.param_groups:  # warm up, then cosine to 10%
            grp["lr"] = lr * min(1.0, step / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        idx = torch.randint(0, len(data) - CTX - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + CTX] for i in idx]).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            log(f"  step {step} loss {loss.item():.3f} ({time.time() - start:.0f}s)")
        step += 1
    return step


@torch.no_grad()
def perplexity(model, ids, device):
    model.to(device).eval()
    nll, n = 0.0, 0
    for s in range(0, len(ids) - 1, CTX):
        x = ids[s:s + CTX].unsqueeze(0).to(device)
        if x.shape[1] < 2:
            break
        logits = model(input_ids=x).logits.float()
        lp = torch.log_softmax(logits[0, :-1], -1)
        nll -= lp.gather(1, x[0, 1:, None]).sum().item()
        n += x.shape[1] - 1
    return math.exp(nll / n), nll / n, n


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 150
    os.makedirs(out, exist_ok=True)
    device = "cuda"
    torch.manual_seed(0)
    docs = [d for d in open(corpus, encoding="utf-8").read().split("\n\n") if d.strip()]
    held = [d for i, d in enumerate(docs) if i % 50 == 0]
    train_docs = [d for i, d in enumerate(docs) if i % 50 != 0]
    log(f"{len(train_docs)} train docs, {len(held)} held out")
    t0 = time.time()
    tok = train_tokenizer(train_docs, out)
    log(f"tokenizer: {tok.get_vocab_size()} tokens in {time.time() - t0:.0f}s")
    cases = [{"text": c, "ids": tok.encode(c).ids} for c in CASES]
    json.dump({"cases": cases}, open(os.path.join(out, "tokenizer_cases.json"), "w"), ensure_ascii=False)
    train_ids = encode(tok, train_docs)
    heldout_text = "\n\n".join(held)[:65536]
    open(os.path.join(out, "heldout.txt"), "w", encoding="utf-8").write(heldout_text)
    held_ids = encode(tok, held)
    sample_ids = torch.tensor(tok.encode(heldout_text).ids)
    log(f"{len(train_ids)} train tokens, {len(held_ids)} held-out tokens")

    report = {"corpus_bytes": os.path.getsize(corpus), "train_tokens": len(train_ids),
              "heldout_tokens": len(held_ids), "models": {}}
    plans = [
        ("nemotron_h_small", lambda: nemotron(256, "M-M*M-M-M", 8, 32, 64, 640, 4), seconds, 3e-3),
        ("qwen3_5_small", lambda: qwen(256, 5, 640), seconds, 3e-3),
        ("draft_small", lambda: nemotron(96, "M*M-", 4, 24, 32, 256, 4), seconds / 2, 5e-3),
    ]
    for name, build, secs, lr in plans:
        try:
            log(name)
            model = build()
            n_params = sum(p.numel() for p in model.parameters())
            log(f"  {n_params} parameters")
            steps = train(model, train_ids, secs, device, lr=lr)
            d = os.path.join(out, name)
            model.to(torch.bfloat16).save_pretrained(d)
            shutil.copy(os.path.join(out, "tokenizer.json"), d)
            ref = type(model).from_pretrained(d, dtype=torch.float32)
            ppl, nll, n = perplexity(ref, held_ids, device)
            sppl, snll, sn = perplexity(ref, sample_ids, device)
            report["models"][name] = {"parameters": n_params, "steps": steps, "seconds": secs,
                                      "heldout_ppl": ppl, "heldout_nll": nll, "heldout_tokens": n,
                                      "heldout_txt_ppl": sppl, "heldout_txt_nll": snll,
                                      "heldout_txt_tokens": sn}
            log(f"  held-out ppl {ppl:.2f} (heldout.txt {sppl:.2f}) after {steps} steps")
            # A greedy sample, to see it is text.
            prompt = tok.encode("The Python standard library").ids
            g = ref.to(device).generate(torch.tensor([prompt], device=device), max_new_tokens=40,
                                        do_sample=False)
            report["models"][name]["sample"] = tok.decode(g[0].tolist())
            log("  sample:", report["models"][name]["sample"][:300].replace("\n", " "))
        except Exception as e:  # one failure must not cost the others
            import traceback
            traceback.print_exc()
            report["models"][name] = {"error": f"{type(e).__name__}: {e}"}
        json.dump(report, open(os.path.join(out, "report.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
