// replayssm serve under load, from plain `fetch` clients: 256 streaming
// requests at once (the default --max-running), every one checked against
// `replayssm generate` run alone, then 32 streams cut off by their clients,
// whose state must go back to the pool.
//
// The expected texts come from 32 prompts generated once each (spawning 256
// CLI processes would take most of the time budget). Each prompt is sent
// 8 times with max_tokens 16..23, so no two requests ask for the same
// thing: a stream delivered to the wrong request shows as a text of the
// wrong prompt, or of the wrong length for its slot. The 23-token request
// must equal generate's text exactly; each shorter one must be a prefix of
// it, no longer than the next, and report its own token count.
//
// Run: REPLAYSSM_CLI=build/replayssm node --test tests/node/load.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { CHAT_TEMPLATE, generate_texts, read_metrics, read_sse, sample, start_server } from "./serve_util.mjs";

const TOPICS = [
  "The Linux kernel", "Debian packages", "The Python standard library", "A shell script", "The GNU C library",
  "Network sockets", "The file system", "A compiler", "Version control", "The package manager", "Unicode text",
  "A regular expression", "The init system", "Memory allocation", "The build system", "An HTTP server",
  "Command line options", "The terminal", "A database", "Signal handlers", "The manual page", "Thread pools",
  "The configuration file", "A mailing list", "Kernel modules", "The boot loader", "Locale settings",
  "A text editor", "Cron jobs", "The firewall", "Log rotation", "Disk partitions",
];
const COPIES = 8;       // requests per prompt, max_tokens MIN_TOKENS + copy
const MIN_TOKENS = 16;
const MAX_TOKENS = MIN_TOKENS + COPIES - 1;
const CHAT_PROMPTS = 4; // the last prompts go through /v1/chat/completions

// What the server is sent for prompt i, and the text generate continues.
function request_of(i) {
  if (i < TOPICS.length - CHAT_PROMPTS) return { chat: false, prompt: TOPICS[i], rendered: TOPICS[i] };
  // role_prefixed.jinja's rendering; the tokenizer adds no special tokens.
  return { chat: true, prompt: TOPICS[i], rendered: `user: ${TOPICS[i]}\nassistant:` };
}

let server;
let expected;  // prompt i's generate text at MAX_TOKENS
before(async () => {
  [server, expected] = await Promise.all([
    start_server(["--chat-template", CHAT_TEMPLATE, "--max-queue", "512", "--max-tokens", "4096",
                  "--no-request-log"], "load"),
    generate_texts(TOPICS.map((_, i) => [request_of(i).rendered, MAX_TOKENS])),
  ]);
});
after(async () => {
  if (server) assert.deepEqual(await server.stop(), { code: 0, signal: null }, server.log());
});

// One streaming request: the text it streamed, its finish_reason and usage;
// every chunk checked to belong to it (one id, one choice at index 0).
async function stream_one(i, max_tokens, signal, on_chunk) {
  const q = request_of(i);
  const body = { model: "load", max_tokens, temperature: 0, ignore_eos: true, stream: true,
                 stream_options: { include_usage: true } };
  if (q.chat) body.messages = [{ role: "user", content: q.prompt }];
  else body.prompt = q.prompt;
  const r = await fetch(`${server.base}/v1/${q.chat ? "chat/completions" : "completions"}`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
  });
  if (r.status !== 200) assert.fail(`prompt ${i} max_tokens ${max_tokens}: ${r.status} ${await r.text()}`);
  let text = "", finish = null, usage = null, id = null, done = false, chunks = 0;
  await read_sse(r, (e) => {
    assert.ok(!done, "an event after [DONE]");
    if (e === "[DONE]") return void (done = true);
    assert.ok(!e.error, `an error event: ${JSON.stringify(e)}`);
    id ??= e.id;
    assert.equal(e.id, id, "a chunk of another request's stream");
    assert.equal(e.object, q.chat ? "chat.completion.chunk" : "text_completion");
    if (e.usage) return void (usage = e.usage);
    assert.equal(e.choices.length, 1);
    const c = e.choices[0];
    assert.equal(c.index, 0);
    text += q.chat ? (c.delta.content ?? "") : c.text;
    if (c.finish_reason !== null) finish = c.finish_reason;
    chunks++;
    on_chunk?.(chunks);
  });
  return { text, finish, usage, id, done };
}

test("256 concurrent streams: each its own greedy text, none lost", async (t) => {
  const jobs = [];
  for (let copy = 0; copy < COPIES; copy++)
    for (let i = 0; i < TOPICS.length; i++) jobs.push({ i, max_tokens: MIN_TOKENS + copy });
  assert.equal(jobs.length, 256);

  // The running gauge, polled while the streams run (the engine's own
  // max_running gauge is the exact count; this shows it from outside).
  let polling = true, polled_max = 0;
  const poller = (async () => {
    while (polling) {
      polled_max = Math.max(polled_max, sample(await read_metrics(server), 'replayssm_requests_running{model_name="load"}'));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const t0 = Date.now();
  const results = await Promise.all(jobs.map((j) => stream_one(j.i, j.max_tokens)));
  const seconds = (Date.now() - t0) / 1000;
  polling = false;
  await poller;

  const ids = new Set(results.map((r) => r.id));
  assert.equal(ids.size, 256, "every request has its own id");
  const by_prompt = TOPICS.map(() => []);
  results.forEach((r, k) => {
    const { i, max_tokens } = jobs[k];
    const where = `prompt ${i} (${TOPICS[i]}) max_tokens ${max_tokens}`;
    assert.ok(r.done, `${where}: no [DONE]`);
    assert.equal(r.finish, "length", where);
    assert.equal(r.usage?.completion_tokens, max_tokens, where);
    if (max_tokens === MAX_TOKENS) assert.equal(r.text, expected[i], where);
    else assert.ok(expected[i].startsWith(r.text), `${where}: ${JSON.stringify(r.text)} is not a prefix of ${JSON.stringify(expected[i])}`);
    by_prompt[i][max_tokens - MIN_TOKENS] = r.text;
  });
  // Prefixes of one text, so ordered by length as by max_tokens unless two
  // streams were swapped (equal texts could swap unseen, and harmlessly).
  by_prompt.forEach((texts, i) => {
    for (let c = 1; c < COPIES; c++)
      assert.ok(texts[c].length >= texts[c - 1].length, `prompt ${i}: max_tokens ${MIN_TOKENS + c - 1} and ${MIN_TOKENS + c} streamed ${JSON.stringify(texts[c - 1])} and ${JSON.stringify(texts[c])}`);
  });

  const m = await read_metrics(server);
  const engine_max = sample(m, "replayssm_engine_max_running");
  t.diagnostic(`256 streams in ${seconds.toFixed(2)} s; engine max_running ${engine_max}, polled running max ${polled_max}`);
  assert.ok(engine_max >= 64, `the engine ran at most ${engine_max} requests at once`);
  assert.ok(engine_max <= 256, `max_running ${engine_max} is over --max-running 256`);
  assert.equal(sample(m, 'replayssm_requests_finished_total{model_name="load",finish_reason="length"}'), 256);
  assert.equal(sample(m, 'replayssm_requests_running{model_name="load"}'), 0);
  assert.equal(sample(m, 'replayssm_requests_waiting{model_name="load"}'), 0);
});

test("32 streams cut off by their clients free their state", async (t) => {
  const STATE = ['replayssm_state_bytes{kind="checkpoints"}', 'replayssm_state_bytes{kind="logs"}',
                 'replayssm_state_bytes{kind="kv"}'];
  const RUNNING = 'replayssm_requests_running{model_name="load"}';
  const CANCELLED = 'replayssm_requests_finished_total{model_name="load",finish_reason="cancelled"}';
  const before_m = await read_metrics(server);
  const idle = STATE.map((k) => sample(before_m, k));
  assert.equal(sample(before_m, RUNNING), 0);
  const cancelled_before = before_m.get(CANCELLED) ?? 0;

  // 32 long streams; each signals once its first two chunks came.
  const N = 32;
  const controllers = Array.from({ length: N }, () => new AbortController());
  let started = 0, all_started;
  const all = new Promise((r) => (all_started = r));
  const streams = controllers.map((ctl, k) =>
    stream_one(k % TOPICS.length, 4000, ctl.signal, (n) => {
      if (n === 2 && ++started === N) all_started();
    }).then(() => "completed", (e) => (e.name === "AbortError" ? "aborted" : Promise.reject(e))));
  await all;
  // While they run the state is held (else the check below would be empty).
  const busy = await read_metrics(server);
  assert.equal(sample(busy, RUNNING), N);
  assert.ok(STATE.some((k, j) => sample(busy, k) > idle[j]), "no state held by 32 running streams");
  for (const ctl of controllers) ctl.abort();
  assert.deepEqual(await Promise.all(streams), Array(N).fill("aborted"));

  const t0 = Date.now();
  let m;
  for (;;) {
    m = await read_metrics(server);
    if (sample(m, RUNNING) === 0 && STATE.every((k, j) => sample(m, k) === idle[j])) break;
    assert.ok(Date.now() - t0 < 5000, `state or running not back to idle 5 s after the aborts:\n` +
      [RUNNING, ...STATE].map((k) => `${k} ${m.get(k)}`).join("\n"));
    await new Promise((r) => setTimeout(r, 20));
  }
  t.diagnostic(`state back to idle ${Date.now() - t0} ms after the aborts`);
  assert.equal(sample(m, CANCELLED) - cancelled_before, N);

  // The server still answers, with the same greedy text.
  const r = await stream_one(0, MAX_TOKENS);
  assert.equal(r.text, expected[0]);
  assert.equal(r.finish, "length");
});
