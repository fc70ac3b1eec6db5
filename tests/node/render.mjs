// Renders chat templates with @huggingface/jinja, the reference that
// tests/jinja_oracle_test.cpp compares the C++ engine with.
//
// stdin: one JSON value. An object {template, context} prints its render as
// is (for trying a template by hand). An array of such objects is a batch:
// one process for the whole test, so the test stays fast; it prints a JSON
// array with, per case, {"output": "..."} or {"error": "..."}.
import { Template } from "@huggingface/jinja";

// JavaScript strings are UTF-16: slicing can split a surrogate pair, and a
// lone surrogate has no UTF-8 form. It becomes U+FFFD, as a UTF-8 encoder
// would write it, so the output stays valid JSON for any reader.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function render_one(c) {
  return new Template(c.template).render(c.context ?? {}).replace(LONE_SURROGATE, "\uFFFD");
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));

if (Array.isArray(input)) {
  const results = input.map((c) => {
    try {
      return { output: render_one(c) };
    } catch (e) {
      return { error: String(e && e.message ? e.message : e) };
    }
  });
  process.stdout.write(JSON.stringify(results));
} else {
  process.stdout.write(render_one(input));
}
