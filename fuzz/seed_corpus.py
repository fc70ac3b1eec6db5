#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs, from the repository's own files, to
OUT/<target>/; a merge keeps those that add coverage in fuzz/corpus/<target>:

    python3 fuzz/seed_corpus.py /tmp/seeds
    for t in request jinja safetensors config tokenizer; do
      cp /tmp/seeds/$t/* fuzz/corpus/$t/ && bash scripts/fuzz.sh merge $t
    done

request: request bodies for every field of both endpoints, and the test
conversations (tests/data/chat_templates) as chat bodies. jinja: every chat
template in the repository and the sources of tests/jinja_test.cpp's cases.
safetensors: small files written here (each dtype, metadata, zero-size
tensors, and the real header of a fixture model without its data).
config: every config.json. tokenizer: the embedded model's tokenizer.json cut
to its byte alphabet and first merges, with the post-processors,
normalizers and pre-tokenizers the loader knows.
"""
import glob
import json
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(rel, mode="r"):
    with open(os.path.join(ROOT, rel), mode) as f:
        return f.read()


def request_seeds(out):
    completions = [
        {"model": "replayssm", "prompt": "Once upon a time", "max_tokens": 8},
        {"prompt": ["a", "b c"], "max_tokens": 3, "temperature": 0, "seed": -3},
        {"prompt": [5, 9, 11], "n": 2, "best_of": 4, "top_p": 0.5},
        {"prompt": [[5, 9], [7]], "echo": True, "logprobs": 2, "max_tokens": 0},
        {"prompt": "x", "use_beam_search": True, "n": 2, "length_penalty": 0.5, "ignore_eos": True},
        {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}, "stop": ["\n", "."]},
        {"prompt": "x", "stop": "end", "presence_penalty": 0, "frequency_penalty": 0.0, "repetition_penalty": 1,
         "logit_bias": {}, "top_k": -1, "min_tokens": 0, "user": "u", "suffix": ""},
        {"prompt": "<|endoftext|>caf\u00e9 \u6f22\u5b57 \U0001F600", "max_tokens": 4.0},
        {"prompt": [5, 9], "cache_salt": "tenant", "prompt_cache_key": "k", "safety_identifier": "s",
         "stream": True, "stream_options": {"include_obfuscation": False}},
    ]
    chats = [
        {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
        {"model": "replayssm", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
         "max_completion_tokens": 5, "logprobs": True, "top_logprobs": 3, "add_generation_prompt": False},
        {"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}],
         "tool_choice": "auto", "parallel_tool_calls": False, "response_format": {"type": "text"},
         "chat_template_kwargs": {"enable_thinking": False}, "n": 2, "seed": 7, "stream": True},
        {"messages": [{"role": "user", "content": "u"}], "store": False, "metadata": {"k": "v"},
         "service_tier": "auto", "reasoning_effort": None, "cache_salt": "s"},
    ]
    for i, b in enumerate(completions):
        write(out, "request", f"completion_{i}.json", json.dumps(b))
    for i, b in enumerate(chats):
        write(out, "request", f"chat_{i}.json", json.dumps(b))
    conversations = json.loads(read("tests/data/chat_templates/conversations.json"))
    tools = json.loads(read("tests/data/chat_templates/tools.json"))
    for name, messages in conversations.items():
        body = {"messages": messages, "max_tokens": 8}
        if "tool" in name:
            body["tools"] = tools
        write(out, "request", f"conversation_{name}.json", json.dumps(body))


C_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'", "0": b"\0", "a": b"\a",
             "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}


def c_unescape(s):
    """The bytes of a C++ string literal's body (UTF-8 source)."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = s[i + 1]
        if e == "x":
            m = re.match(r"[0-9a-fA-F]+", s[i + 2:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += 2 + len(m.group(0))
        elif e == "u" or e == "U":
            n = 4 if e == "u" else 8
            out += chr(int(s[i + 2:i + 2 + n], 16)).encode()
            i += 2 + n
        else:
            out += C_ESCAPES[e]
            i += 2
    return bytes(out)


def jinja_seeds(out):
    files = (glob.glob(os.path.join(ROOT, "models/*/chat_template.jinja")) +
             glob.glob(os.path.join(ROOT, "tests/data/chat_templates/*.jinja")) +
             glob.glob(os.path.join(ROOT, "tests/data/chat/*.jinja")))
    for f in sorted(files):
        rel = os.path.relpath(f, ROOT).replace("/", "_")
        with open(f, "rb") as fh:
            write(out, "jinja", rel, fh.read())
    # The first string of each {source, context, want} case: a case opens
    # with `{"` at the start of a line, its source runs to the first `",`.
    src = read("tests/jinja_test.cpp")
    literal = r'"((?:[^"\\]|\\.)*)"'
    n = 0
    for m in re.finditer(r'^\s*\{(' + literal + r'(?:\s*' + literal + r')*),\s*$', src, re.M):
        body = b"".join(c_unescape(x) for x in re.findall(literal, m.group(1)))
        write(out, "jinja", f"case_{n:03d}.jinja", body)
        n += 1
    hostile = [
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{% for i in range(100) %}{% for j in range(100) %}{{ i * j }}{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}",
        "{{ messages | tojson(indent=2) }}{% for m in messages | selectattr('role', 'equalto', 'user') %}"
        "{{ m.content | trim | upper }}{% endfor %}{{ tools[0].function.parameters | dictsort }}",
    ]
    for i, h in enumerate(hostile):
        write(out, "jinja", f"hostile_{i}.jinja", h)


def safetensors_file(tensors, data, metadata=None):
    header = dict(tensors)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds(out):
    f32 = struct.pack("<6f", 1, -2, 0.5, 3, 1e-3, -0.0)
    write(out, "safetensors", "f32.safetensors",
          safetensors_file({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                            "b": {"dtype": "F32", "shape": [], "data_offsets": [24, 28]}},
                           f32 + struct.pack("<f", 7), {"format": "pt"}))
    write(out, "safetensors", "half.safetensors",
          safetensors_file({"h": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]},
                            "b": {"dtype": "BF16", "shape": [2, 1], "data_offsets": [0, 4]}},
                           bytes([0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3C, 0x00, 0x7C])))
    write(out, "safetensors", "zero_and_others.safetensors",
          safetensors_file({"z": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]},
                            "i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]},
                            "u": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]},
                            "f8": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [11, 12]}},
                           bytes(12)))
    write(out, "safetensors", "empty.safetensors", safetensors_file({}, b"", {}))
    # A fixture model's header, its data cut to the first kilobyte.
    raw = read("tests/data/nemotron_h_tiny/model.safetensors", "rb")
    (n,) = struct.unpack("<Q", raw[:8])
    write(out, "safetensors", "nemotron_h_tiny_header.safetensors", raw[:8 + n + 1024])


def config_seeds(out):
    for f in sorted(glob.glob(os.path.join(ROOT, "models/*/config.json")) +
                    glob.glob(os.path.join(ROOT, "tests/data/*/config.json"))):
        rel = os.path.relpath(os.path.dirname(f), ROOT).replace("/", "_")
        with open(f, "rb") as fh:
            write(out, "config", rel + ".json", fh.read())


def tokenizer_seeds(out):
    t = json.loads(read("models/nemotron_h_small/tokenizer.json"))
    model = t["model"]
    merges = model["merges"][:48]
    keep = set()
    for tok, i in model["vocab"].items():
        if i < 256 + 1:  # the byte alphabet (and the token before it)
            keep.add(tok)
    for m in merges:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        keep.update([a, b, a + b])
    for a in t["added_tokens"]:
        keep.add(a["content"])
    model["vocab"] = {k: v for k, v in model["vocab"].items() if k in keep}
    model["merges"] = merges
    write(out, "tokenizer", "nemotron_h_small_cut.json", json.dumps(t, ensure_ascii=False))

    def variant(name, **fields):
        v = json.loads(json.dumps(t))
        v.update(fields)
        write(out, "tokenizer", name + ".json", json.dumps(v, ensure_ascii=False))

    special = lambda s: {"SpecialToken": {"id": s, "type_id": 0}}
    eot = t["added_tokens"][0]
    tmpl = {"type": "TemplateProcessing",
            "single": [special(eot["content"]), {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {eot["content"]: {"id": eot["content"], "ids": [eot["id"]],
                                                "tokens": [eot["content"]]}}}
    bert = {"type": "BertProcessing", "cls": [eot["content"], eot["id"]], "sep": [eot["content"], eot["id"]]}
    variant("template_processing", post_processor=tmpl)
    variant("sequence_processing", post_processor={"type": "Sequence", "processors": [
        {"type": "ByteLevel", "trim_offsets": False}, tmpl, dict(bert, type="RobertaProcessing")]})
    variant("nfkd_sequence", normalizer={"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "NFC"}]})
    variant("gpt2_bytelevel", normalizer=None,
            pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True})
    variant("split_behaviors", pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Removed", "invert": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]})
    variant("added_tokens", added_tokens=t["added_tokens"] + [
        {"id": 5000, "content": "<tool>", "single_word": True, "lstrip": True, "rstrip": True,
         "normalized": True, "special": False},
        {"id": 5001, "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: seed_corpus.py OUT")
    out = sys.argv[1]
    request_seeds(out)
    jinja_seeds(out)
    safetensors_seeds(out)
    config_seeds(out)
    tokenizer_seeds(out)


if __name__ == "__main__":
    main()
