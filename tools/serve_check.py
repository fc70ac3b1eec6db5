#!/usr/bin/env python3
"""The client checks of `replayssm serve`, from Python's standard library.

The twin of tests/node/*.test.mjs for machines without node (the GPU
machine): it starts `replayssm serve --port 0` on a device, then checks,
as any OpenAI client would see them: /health and /v1/models; greedy
completions against `replayssm generate` on the same device (on the GPU,
a differing token must sit where the top-2 log-probability gap is within
bf16 rounding, --margin); a stream equal to the whole response with usage
last; chat through the model's template with the role first; n > 1;
logprobs; stop strings cut from the text; error bodies (400 naming the
field, 404 model_not_found); the prefix cache's cached_tokens; 256
concurrent streams, each its prompt's greedy text, none lost or
cross-wired, with /metrics showing >= 64 requests in one batch; and 32
streams cut off mid-way whose state goes back to idle.

Usage: python3 tools/serve_check.py --cli build/replayssm [--device cuda]
Prints "serve_check: passed (...)" last, or exits 1 naming what failed.
"""
import argparse
import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

MODEL = "models/nemotron_h_small"
TEMPLATE = "tests/data/chat/role_prefixed.jinja"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"serve_check: FAILED: {what}", flush=True)
    return ok


class Server:
    def __init__(self, cli, args):
        self.proc = subprocess.Popen([cli, "serve", "--port", "0", "--no-request-log", *args],
                                     stderr=subprocess.PIPE, text=True)
        self.port = None
        self.log = []
        deadline = time.time() + 300
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("serve exited: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on [^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("serve did not listen")
        threading.Thread(target=self._drain, daemon=True).start()
        while True:
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("serve did not become ready: " + "".join(self.log))
            time.sleep(0.2)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url(path), timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path, body, timeout=600):
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode())

    def stream(self, path, body, stop_after=None):
        """The SSE events of a streamed request (parsed), [DONE] as the string."""
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        events = []
        with urllib.request.urlopen(req, timeout=600) as r:
            buf = b""
            while True:
                chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    ev = ev.decode()
                    if ev.startswith("data: "):
                        data = ev[6:]
                        events.append(data if data == "[DONE]" else json.loads(data))
                if stop_after is not None and len(events) >= stop_after:
                    return events  # hang up: the connection closes with the response
        return events

    def metric(self, name):
        text = self.get("/metrics")[1]
        for line in text.splitlines():
            if line.startswith(name + " ") or (line.startswith(name + "{") and "{" not in name):
                return float(line.rsplit(" ", 1)[1])
        return -1.0

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=120)


def generate(cli, device, prompt, n):
    out = subprocess.run([cli, "generate", "--model", MODEL, "--device", device, "--prompt", prompt,
                          "--max-new-tokens", str(n), "--ignore-eos", "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["text"]


def first_difference(got, want, logprobs):
    """The token where got leaves want, with its top-2 log-probabilities."""
    at = 0
    for k, (tok, top) in enumerate(zip(logprobs["tokens"], logprobs["top_logprobs"])):
        if not want.startswith(got[: at + len(tok)]):
            before = f", the token before {logprobs['tokens'][k - 1]!r} top {logprobs['top_logprobs'][k - 1]}" if k else ""
            return f"token {k} {tok!r}, top {top}{before}"
        at += len(tok)
    return "none within the returned tokens"


def near_tie(top, margin):
    vals = sorted(top.values(), reverse=True) if top else []
    return len(vals) >= 2 and vals[0] - vals[1] <= margin


def same_or_near_tie(got, want, logprobs, margin, prefix=False):
    """Equal texts (got a prefix of want, with prefix), or a first difference
    at a token whose top-2 log-probability gap is under margin. The token
    before counts too: where the two paths part at a token that is a prefix
    of the other's ('.' against '.x'), the text first differs one token on."""
    if got == want or (prefix and want.startswith(got)):
        return True
    if logprobs is None:
        return False
    at = 0
    tops = logprobs["top_logprobs"]
    for k, tok in enumerate(logprobs["tokens"]):
        if not want.startswith(got[: at + len(tok)]):
            return near_tie(tops[k], margin) or (k > 0 and near_tie(tops[k - 1], margin))
        at += len(tok)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--margin", type=float, default=0.15,
                    help="top-2 log-probability gap under which a token may differ (bf16 rounding)")
    a = ap.parse_args()
    exact = a.device == "cpu"
    margin = 0.0 if exact else a.margin
    t_start = time.time()
    srv = Server(a.cli, ["--model", MODEL, "--device", a.device, "--served-model-name", "m", "--chat-template",
                         TEMPLATE, "--max-queue", "512", "--max-tokens", "4096", "--no-prefix-cache"])
    try:
        check(srv.get("/health")[0] == 200, "/health")
        models = json.loads(srv.get("/v1/models")[1])
        check(models["data"][0]["id"] == "m", "/v1/models lists the served name")

        prompt = "The Python standard library"
        want = generate(a.cli, a.device, prompt, 24)
        st, r = srv.post("/v1/completions", {"model": "m", "prompt": prompt, "max_tokens": 24, "temperature": 0,
                                             "ignore_eos": True, "logprobs": 2})
        check(st == 200 and r["usage"]["completion_tokens"] == 24, "a greedy completion")
        check(same_or_near_tie(r["choices"][0]["text"], want, r["choices"][0]["logprobs"], margin),
              f"greedy text equals generate's: {r['choices'][0]['text']!r} vs {want!r}")
        ev = srv.stream("/v1/completions", {"model": "m", "prompt": prompt, "max_tokens": 24, "temperature": 0,
                                            "ignore_eos": True, "stream": True,
                                            "stream_options": {"include_usage": True}})
        text = "".join(e["choices"][0]["text"] for e in ev[:-2] if e != "[DONE]" and e["choices"])
        check(ev[-1] == "[DONE]" and ev[-2]["usage"]["completion_tokens"] == 24, "stream ends with usage, [DONE]")
        check(text == r["choices"][0]["text"], "the stream equals the whole response")

        st, c = srv.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "Debian"}],
                                                  "max_tokens": 12, "temperature": 0, "ignore_eos": True})
        check(st == 200 and c["choices"][0]["message"]["role"] == "assistant", "chat completion")
        ev = srv.stream("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "Debian"}],
                                                 "max_tokens": 12, "temperature": 0, "ignore_eos": True,
                                                 "stream": True})
        check(ev[0]["choices"][0]["delta"].get("role") == "assistant", "chat stream: the role first")

        st, r = srv.post("/v1/completions", {"model": "m", "prompt": ["Debian", "The kernel"], "n": 3,
                                             "max_tokens": 6, "seed": 5})
        check(st == 200 and [x["index"] for x in r["choices"]] == list(range(6)), "n = 3 over two prompts")
        st, r = srv.post("/v1/completions", {"model": "m", "prompt": prompt, "max_tokens": 24, "temperature": 0,
                                             "ignore_eos": True, "stop": [" the"]})
        check(st == 200 and " the" not in r["choices"][0]["text"], "a stop string is cut from the text")
        st, e = srv.post("/v1/completions", {"model": "m", "prompt": "x", "presence_penalty": 1})
        check(st == 400 and e["error"]["param"] == "presence_penalty", "400 names the field")
        st, e = srv.post("/v1/completions", {"model": "other", "prompt": "x"})
        check(st == 404 and e["error"]["code"] == "model_not_found", "404 model_not_found")

        # 256 concurrent streams: 32 prompts, each 8 times with its own max_tokens.
        topics = [f"Debian package number {i} provides" for i in range(32)]
        longest = 23
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            wants = list(ex.map(lambda p: generate(a.cli, a.device, p, longest), topics))

        def one(k):
            i, n = k % 32, 16 + k // 32
            evs = srv.stream("/v1/completions", {"model": "m", "prompt": topics[i], "max_tokens": n,
                                                 "temperature": 0, "ignore_eos": True, "stream": True,
                                                 "logprobs": 2, "stream_options": {"include_usage": True}})
            ids = {e["id"] for e in evs if e != "[DONE]"}
            chunks = [e["choices"][0] for e in evs if e != "[DONE]" and e["choices"]]
            text = "".join(c["text"] for c in chunks)
            lp = {"tokens": [], "top_logprobs": []}
            for c in chunks:
                if c.get("logprobs"):
                    lp["tokens"] += c["logprobs"]["tokens"]
                    lp["top_logprobs"] += c["logprobs"]["top_logprobs"]
            usage = [e["usage"] for e in evs if e != "[DONE]" and e.get("usage")]
            return i, n, text, ids, usage, lp

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(256) as ex:
            results = list(ex.map(one, range(256)))
        seconds = time.time() - t0
        wrong = 0
        for i, n, text, ids, usage, lp in results:
            ok = len(ids) == 1 and bool(usage) and usage[0]["completion_tokens"] == n
            ok = ok and same_or_near_tie(text, wants[i], lp, margin, prefix=n < longest)
            if not ok and wrong < 4:  # what went wrong, for the log
                print(f"serve_check: stream of prompt {i}, max_tokens {n}: {len(ids)} ids, usage {usage}, "
                      f"text {text!r}, generate's {wants[i]!r}, first difference {first_difference(text, wants[i], lp)}")
            wrong += not ok
        check(wrong == 0, f"{wrong} of 256 concurrent streams wrong, lost or cross-wired")
        most = srv.metric("replayssm_engine_max_running")
        check(most >= 64, f"/metrics: at most {most} requests in one batch")

        # 32 streams cut off after two events: the state goes back to idle.
        idle = [srv.metric(f'replayssm_state_bytes{{kind="{k}"}}') for k in ("checkpoints", "logs", "kv")]
        with concurrent.futures.ThreadPoolExecutor(32) as ex:
            list(ex.map(lambda k: srv.stream("/v1/completions", {"model": "m", "prompt": topics[k], "max_tokens": 4000,
                                                                 "ignore_eos": True, "stream": True}, stop_after=2),
                        range(32)))
        deadline = time.time() + 10
        back = False
        while time.time() < deadline and not back:
            now = [srv.metric(f'replayssm_state_bytes{{kind="{k}"}}') for k in ("checkpoints", "logs", "kv")]
            back = now == idle and srv.metric("replayssm_requests_running") == 0
            time.sleep(0.05)
        check(back, "state back to idle after 32 clients hung up")
    finally:
        code = srv.stop()
        check(code == 0, f"SIGTERM: exit {code}")

    # The prefix cache: a repeat reports its cached tokens.
    srv = Server(a.cli, ["--model", MODEL, "--device", a.device])
    try:
        body = {"prompt": "The Debian package manager installs software", "max_tokens": 8}
        srv.post("/v1/completions", body)
        st, r = srv.post("/v1/completions", body)
        cached = r.get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", 0)
        check(st == 200 and cached == r["usage"]["prompt_tokens"] - 1, f"prefix cache: {cached} cached tokens")
    finally:
        srv.stop()

    if failures:
        print(f"serve_check: {len(failures)} checks failed", flush=True)
        sys.exit(1)
    print(f"serve_check: passed ({a.device}; 256 streams in {seconds:.1f} s; {time.time() - t_start:.0f} s in all)")


if __name__ == "__main__":
    main()
