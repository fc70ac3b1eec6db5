// replayssm serve through the official `openai` npm SDK: a client this
// project did not write, so every response shape, stream and error is
// read the way applications read OpenAI's own API. Greedy text is compared
// with `replayssm generate` run alone; streams with the whole response;
// errors must come back as the SDK's error classes with the field named.
//
// Run: REPLAYSSM_CLI=build/replayssm node --test tests/node/openai_sdk.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { CHAT_TEMPLATE, generate_text, load_openai, start_server } from "./serve_util.mjs";

const OpenAI = await load_openai();
const PROMPT = "The Python standard library";

let server;
let client;
before(async () => {
  server = await start_server(["--chat-template", CHAT_TEMPLATE, "--max-tokens", "256", "--max-n", "8",
                               "--no-request-log"]);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  // A drain that hangs or fails would be a bug of its own.
  assert.deepEqual(await server.stop(), { code: 0, signal: null }, server.log());
});

// The text of a completions stream, by choice index, and each choice's
// finish_reason; the usage chunk if one came.
async function collect_completion_stream(stream) {
  const text = [], finish = [];
  let usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "text_completion");
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, [], "the usage chunk has no choices");
      usage = chunk.usage;
    }
    for (const c of chunk.choices) {
      text[c.index] = (text[c.index] ?? "") + c.text;
      if (c.finish_reason !== null) {
        assert.equal(finish[c.index], undefined, `choice ${c.index} finished twice`);
        finish[c.index] = c.finish_reason;
      }
    }
  }
  return { text, finish, usage, chunks };
}

test("models list and retrieve", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [server.name]);
  assert.equal((await client.models.retrieve(server.name)).id, server.name);
  await assert.rejects(client.models.retrieve("no-such-model"), OpenAI.NotFoundError);
});

// usage without prompt_tokens_details (what the prefix cache held differs
// between a first request and its repeat).
function without_cached(u) {
  const { prompt_tokens_details, ...rest } = u;
  assert.equal(typeof prompt_tokens_details.cached_tokens, "number");
  return rest;
}

test("greedy completion equals replayssm generate, streamed or not", async () => {
  const want = await generate_text(PROMPT, 24);
  const body = { model: server.name, prompt: PROMPT, max_tokens: 24, temperature: 0, ignore_eos: true };
  const r = await client.completions.create(body);
  assert.equal(r.object, "text_completion");
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, server.name);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 24);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 24);

  const s = await collect_completion_stream(
    await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }));
  assert.ok(s.chunks >= 3, `only ${s.chunks} chunks: not streamed`);
  assert.deepEqual(s.text, [want]);
  assert.deepEqual(s.finish, ["length"]);
  // The same usage, but the repeat found the prompt in the prefix cache:
  // all of it but the last token, which is always computed.
  assert.deepEqual(without_cached(s.usage), without_cached(r.usage));
  assert.equal(s.usage.prompt_tokens_details.cached_tokens, s.usage.prompt_tokens - 1);

  // Without include_usage no chunk carries usage.
  const plain = await collect_completion_stream(await client.completions.create({ ...body, stream: true }));
  assert.deepEqual(plain.text, [want]);
  assert.equal(plain.usage, null);
});

test("chat completion: greedy, streamed with the role first, usage", async () => {
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Debian" }];
  const body = { model: server.name, messages, max_tokens: 12, temperature: 0, ignore_eos: true };
  // The template (role_prefixed.jinja) renders to this; the tokenizer adds
  // no special tokens, so generate on the rendered text is the oracle.
  const want = await generate_text("system: Be brief.\nuser: Debian\nassistant:", 12);
  const r = await client.chat.completions.create(body);
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(r.choices[0].message.content, want);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 12);

  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let first = true, content = "", finish = null, usage = null;
  const ids = new Set();
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    ids.add(chunk.id);
    if (chunk.usage) {
      usage = chunk.usage;
      continue;
    }
    assert.equal(chunk.choices.length, 1);
    const c = chunk.choices[0];
    if (first) {
      assert.equal(c.delta.role, "assistant", `the first delta has no role: ${JSON.stringify(chunk)}`);
      first = false;
    }
    content += c.delta.content ?? "";
    if (c.finish_reason !== null) finish = c.finish_reason;
  }
  assert.equal(content, want);
  assert.equal(finish, "length");
  assert.deepEqual(without_cached(usage), without_cached(r.usage));
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens - 1);
  assert.equal(ids.size, 1, "one id for every chunk of a stream");
  assert.match([...ids][0], /^chatcmpl-/);

  // The SDK's own stream helper assembles the same message.
  const runner = client.chat.completions.stream(body);
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, want);
  assert.equal(final.choices[0].message.role, "assistant");
  assert.equal(final.choices[0].finish_reason, "length");
});

test("n > 1: choices indexed, streamed per index", async () => {
  const body = { model: server.name, prompt: "Debian", max_tokens: 6, n: 3, temperature: 1, seed: 7, ignore_eos: true };
  const r = await client.completions.create(body);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(r.choices.map((c) => c.finish_reason), ["length", "length", "length"]);
  assert.equal(r.usage.completion_tokens, 18);
  // The seed fixes the samples: the stream carries the same three texts.
  const s = await collect_completion_stream(await client.completions.create({ ...body, stream: true }));
  assert.deepEqual(s.text, r.choices.map((c) => c.text));
  assert.deepEqual(s.finish, r.choices.map((c) => c.finish_reason));

  const chat = await client.chat.completions.create({
    model: server.name, messages: [{ role: "user", content: "Debian" }], max_tokens: 5, n: 2, temperature: 1, seed: 3,
  });
  assert.deepEqual(chat.choices.map((c) => c.index), [0, 1]);
  for (const c of chat.choices) assert.equal(c.message.role, "assistant");
});

test("logprobs: completions (top-k dictionaries) and chat (top_logprobs)", async () => {
  const r = await client.completions.create({
    model: server.name, prompt: PROMPT, max_tokens: 5, temperature: 0, ignore_eos: true, logprobs: 2,
  });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  for (let i = 0; i < 5; i++) {
    assert.equal(typeof lp.token_logprobs[i], "number");
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.entries(lp.top_logprobs[i]);
    assert.equal(top.length, 2, JSON.stringify(lp.top_logprobs[i]));
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(Math.max(...top.map(([, v]) => v)) - lp.token_logprobs[i]) < 1e-6);
  }
  assert.equal(lp.text_offset[0], 0);

  const chat = await client.chat.completions.create({
    model: server.name, messages: [{ role: "user", content: "Debian" }], max_tokens: 4, temperature: 0,
    ignore_eos: true, logprobs: true, top_logprobs: 3,
  });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  assert.equal(content.map((t) => t.token).join(""), chat.choices[0].message.content);
  for (const t of content) {
    assert.equal(typeof t.logprob, "number");
    assert.ok(Array.isArray(t.bytes) && t.bytes.length > 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].logprob, Math.max(...t.top_logprobs.map((x) => x.logprob)));
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
    for (const x of t.top_logprobs) assert.deepEqual(Object.keys(x).sort(), ["bytes", "logprob", "token"]);
  }
});

test("stop strings cut the text before the stop, streamed or not", async () => {
  const full = await generate_text(PROMPT, 24);
  const stop = full.slice(8, 13);
  const want = full.slice(0, full.indexOf(stop));
  const body = { model: server.name, prompt: PROMPT, max_tokens: 24, temperature: 0, ignore_eos: true, stop: [stop] };
  const r = await client.completions.create(body);
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await collect_completion_stream(await client.completions.create({ ...body, stream: true }));
  assert.deepEqual(s.text, [want]);
  assert.deepEqual(s.finish, ["stop"]);
});

test("errors come back as the SDK's classes, the field named", async () => {
  const ok = { model: server.name, prompt: "x", max_tokens: 2 };
  const expect_bad = async (promise, param) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      assert.equal(e.type, "invalid_request_error");
      return true;
    });
  };
  await assert.rejects(client.completions.create({ ...ok, model: "no-such-model" }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.code, "model_not_found");
    return true;
  });
  await assert.rejects(
    client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    OpenAI.NotFoundError);
  await expect_bad(client.completions.create({ ...ok, presence_penalty: 1 }), "presence_penalty");
  await expect_bad(client.completions.create({ ...ok, max_tokens: 100000 }), "max_tokens");
  await expect_bad(client.completions.create({ ...ok, n: 9 }), "n");
  // A bad streamed request fails before its stream starts.
  await expect_bad(client.completions.create({ ...ok, temperature: 3, stream: true }), "temperature");
  await expect_bad(client.chat.completions.create({
    model: server.name, messages: [{ role: "user", content: "x" }], tool_choice: "required",
  }), "tool_choice");
  await expect_bad(client.chat.completions.create({ model: server.name, messages: [] }), "messages");
  // The server is unharmed.
  assert.equal((await client.completions.create(ok)).choices.length, 1);
});

test("API key: a wrong key is an AuthenticationError, the right one works", async () => {
  const keyed = await start_server(["--api-key", "sk-node-test", "--no-request-log"], "keyed");
  try {
    const base = { baseURL: `${keyed.base}/v1`, maxRetries: 0 };
    const wrong = new OpenAI({ ...base, apiKey: "sk-node-tesu" });
    await assert.rejects(wrong.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.code, "invalid_api_key");
      return true;
    });
    await assert.rejects(wrong.completions.create({ model: "keyed", prompt: "x", max_tokens: 1 }),
                         OpenAI.AuthenticationError);
    const right = new OpenAI({ ...base, apiKey: "sk-node-test" });
    const r = await right.completions.create({ model: "keyed", prompt: "Debian", max_tokens: 3, temperature: 0 });
    assert.equal(r.choices.length, 1);
  } finally {
    assert.deepEqual(await keyed.stop(), { code: 0, signal: null }, keyed.log());
  }
});
