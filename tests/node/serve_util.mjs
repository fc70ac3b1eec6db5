// What the node client tests share: `replayssm serve` started as a child
// process on a free port, `replayssm generate` as the oracle of greedy text,
// and /metrics read as numbers.
//
// The binary comes from REPLAYSSM_CLI (CTest sets it; by hand, point it at
// build/replayssm). REPLAYSSM_MODEL, when set, is the model directory the
// server and generate both load; unset, both take the CLI's embedded
// default, so the two always decode the same model. Anything missing fails
// the test with what to do: a skipped client test would prove nothing.
import { spawn, execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
export const SETUP_HINT = "run scripts/setup_test_tools.sh to install node and the packages of tests/node";
export const CHAT_TEMPLATE = path.join(here, "..", "data", "chat", "role_prefixed.jinja");

export function cli_path() {
  const cli = process.env.REPLAYSSM_CLI;
  if (!cli) throw new Error("REPLAYSSM_CLI is not set: point it at the replayssm binary (CTest sets it)");
  try {
    accessSync(cli, constants.X_OK);
  } catch {
    throw new Error(`REPLAYSSM_CLI=${cli} is not an executable file (build it first)`);
  }
  return cli;
}

function model_args() {
  return process.env.REPLAYSSM_MODEL ? ["--model", process.env.REPLAYSSM_MODEL] : [];
}

// The openai package, or an error that says how to get it (a bare
// ERR_MODULE_NOT_FOUND would not).
export async function load_openai() {
  try {
    return (await import("openai")).default;
  } catch (e) {
    throw new Error(`the npm package 'openai' is not installed under ${here}/node_modules (${e.code ?? e.message}): ${SETUP_HINT}`);
  }
}

// Starts `replayssm serve --port 0 --exact ARGS...` (exact: see
// generate_text) and resolves once /health says
// ready; rejects if the process exits first or takes over a minute. The
// model's id in the API is `name`.
export async function start_server(args = [], name = "replayssm-test") {
  const child = spawn(cli_path(), ["serve", "--port", "0", ...model_args(), "--served-model-name", name, "--exact",
                                   ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  let exit = null;
  child.on("exit", (code, signal) => (exit = { code, signal }));
  const port = await new Promise((resolve, reject) => {
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (s) => {
      log += s;
      const m = /listening on [^:\s]+:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", () => reject(new Error(`replayssm serve exited before listening:\n${log}`)));
    child.on("error", reject);
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exit) throw new Error(`replayssm serve exited while loading (${JSON.stringify(exit)}):\n${log}`);
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {}
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`replayssm serve was not ready within 60 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    base,
    name,
    log: () => log,
    // SIGTERM drains what runs; resolves to the exit status (SIGKILL after
    // `seconds`, then the status is the signal's).
    async stop(seconds = 10) {
      if (exit) return exit;
      const done = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), seconds * 1000);
      const st = await done;
      clearTimeout(timer);
      return st;
    },
  };
}

// `replayssm generate`'s greedy text for `prompt`, alone in its process.
// --exact, as the servers of these tests run: with the prefix cache on, a
// hit is then generate's text bit for bit (without --exact it replays in
// the dual form, equal within rounding only).
export function generate_text(prompt, max_new_tokens) {
  const args = ["generate", ...model_args(), "--prompt", prompt, "--max-new-tokens", String(max_new_tokens),
                "--ignore-eos", "--exact", "--json"];
  return new Promise((resolve, reject) => {
    execFile(cli_path(), args, { maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`replayssm generate failed: ${stderr || err.message}`));
      resolve(JSON.parse(stdout).text);
    });
  });
}

// generate_text for every [prompt, n] of `jobs`, `width` processes at a time.
export async function generate_texts(jobs, width = 4) {
  const out = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await generate_text(...jobs[i]);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return out;
}

// /metrics as a Map from a sample's name with its labels, exactly as
// written (`replayssm_state_bytes{kind="kv"}`), to its value.
export async function read_metrics(server, headers = {}) {
  const r = await fetch(`${server.base}/metrics`, { headers });
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  const m = new Map();
  for (const line of (await r.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    m.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return m;
}

// One sample of `metrics`; a missing sample is a failure, not a zero.
export function sample(metrics, key) {
  if (!metrics.has(key)) throw new Error(`/metrics has no sample ${key}`);
  return metrics.get(key);
}

// The data of a Server-Sent Events body as it arrives: each event's JSON
// ("[DONE]" as that string), through `on_event`; resolves when the body ends.
export async function read_sse(response, on_event) {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const bytes of response.body) {
    buf += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data: ")) continue;  // ": keep-alive" comments
        const data = line.slice(6);
        on_event(data === "[DONE]" ? "[DONE]" : JSON.parse(data));
      }
    }
  }
  if (buf.trim() !== "") throw new Error(`the stream ended inside an event: ${JSON.stringify(buf)}`);
}
