// colibri serve driven by the official `openai` npm client: models, chat (whole and streamed, with usage),
// completions, logprobs, an aborted stream and the errors a client sees. Starts its own server on a free
// loopback port. usage: node openai_client.mjs COLIBRI_BINARY MODEL.bin   (exit 0: all passed; 77: no client)
import { spawn } from "node:child_process";
import assert from "node:assert/strict";

let OpenAI;
try {
  ({ default: OpenAI } = await import("openai"));
} catch {
  console.error("the openai package is not installed: npm ci --prefix tests/server/openai (tools/install-deps.sh does it)");
  // Skipped on a developer's machine without it; in CI (which ran install-deps.sh) a missing client is a failure.
  process.exit(process.env.CI ? 1 : 77);
}

const [colibri, model] = process.argv.slice(2);
const server = spawn(colibri, ["serve", "-m", model, "--port", "0", "--slots", "2", "-c", "512", "-t", "2"], {
  stdio: ["ignore", "inherit", "pipe"],
});
const port = await new Promise((resolve, reject) => {
  let log = "";
  const timer = setTimeout(() => reject(new Error("the server did not start: " + log)), 300000);
  server.stderr.on("data", (d) => {
    log += d;
    const m = /listening on http:\/\/[^ ]*:(\d+)/.exec(log);
    if (m) {
      clearTimeout(timer);
      resolve(Number(m[1]));
    }
  });
  server.on("exit", (code) => reject(new Error(`the server exited (${code}): ${log}`)));
});

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
const tests = [];
const test = (name, fn) => tests.push([name, fn]);

test("models.list names the served model", async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ["demo"]);
});

test("chat, whole and streamed, agree for a seed", async () => {
  const request = { model: "demo", messages: [{ role: "user", content: "Hello, who are you?" }], max_tokens: 10, seed: 42 };
  const whole = await client.chat.completions.create(request);
  assert.equal(whole.object, "chat.completion");
  const reply = whole.choices[0].message.content;
  assert.equal(typeof reply, "string");
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason));
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks >= 3);
  assert.equal(text, reply);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
});

test("completions with legacy logprobs", async () => {
  const r = await client.completions.create({ model: "demo", prompt: "Once upon a time", max_tokens: 5, logprobs: 2, seed: 1 });
  assert.equal(r.object, "text_completion");
  const lp = r.choices[0].logprobs;
  assert.ok(lp.tokens.length > 0);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  for (const x of lp.token_logprobs) assert.ok(x <= 0);
});

test("chat logprobs with top_logprobs", async () => {
  const r = await client.chat.completions.create({
    model: "demo", messages: [{ role: "user", content: "Hi" }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const content = r.choices[0].logprobs.content;
  assert.ok(content.length >= 1);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);  // greedy takes the most likely token
  }
});

test("an aborted stream is cancelled, and only it", async () => {
  // A seeded request alone, then the same one beside a stream the client aborts: it gives the same reply, the
  // aborted one is counted as cancelled in /metrics, and the server goes on serving.
  const seeded = { model: "demo", messages: [{ role: "user", content: "Beside" }], max_tokens: 30, seed: 8, ignore_eos: true };
  const alone = await client.chat.completions.create(seeded);
  const cancelled = async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/outcome="cancelled"\} (\d+)/.exec(text)[1]);
  };
  const before = await cancelled();
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: "demo", messages: [{ role: "user", content: "Go on" }], max_tokens: 480, stream: true, ignore_eos: true },
    { signal: controller.signal });
  const beside = client.chat.completions.create(seeded);
  // Abort at the first chunk (the demo model makes the 480 tokens in well under a second). The client ends
  // the iteration quietly on its own abort (openai's Stream swallows the AbortError); no more chunks arrive.
  let n = 0;
  for await (const _ of stream) if (++n === 1) controller.abort();
  assert.ok(n < 100, `${n} chunks arrived after the abort`);
  assert.equal((await beside).choices[0].message.content, alone.choices[0].message.content);
  let after = before;
  for (let i = 0; i < 300 && after === before; ++i) {
    await new Promise((r) => setTimeout(r, 200));
    after = await cancelled();
  }
  assert.equal(after, before + 1);
  const r = await client.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "Still there?" }], max_tokens: 2 });
  assert.equal(r.object, "chat.completion");
});

test("errors arrive as the client's typed errors", async () => {
  await assert.rejects(client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.status, 404);
    assert.equal(e.code, "model_not_found");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "hi" }], max_tokens: 100000 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.code, "context_length_exceeded");
    assert.equal(e.param, "max_tokens");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: "demo", messages: [{ role: "robot", content: "hi" }] }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    return true;
  });
});

let failed = 0;
for (const [name, fn] of tests) {
  try {
    await fn();
    console.log(`PASS   ${name}`);
  } catch (e) {
    ++failed;
    console.log(`FAIL!  ${name}: ${e?.stack ?? e}`);
  }
}
server.kill("SIGTERM");
const code = await new Promise((resolve) => server.on("exit", (c) => resolve(c)));
if (code !== 0) {
  console.log(`FAIL!  the server exited with ${code} after SIGTERM`);
  ++failed;
}
console.log(`${tests.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
