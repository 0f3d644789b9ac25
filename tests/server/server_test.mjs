// End-to-end test of `diskformer serve` with the official OpenAI Node client (npm `openai`,
// installed by scripts/setup.sh from this folder's package-lock.json).
//
//   node tests/server/server_test.mjs --bin build/diskformer
//
// Starts the server on a free loopback port with the default model, then checks: models,
// chat and completions (greedy text equal to `diskformer run`), streaming, stop sequences
// across token boundaries, usage, logprobs, penalties, 32 concurrent clients x 4 requests
// (greedy outputs equal the single-client ones), a client disconnecting mid-stream (its slot
// is freed, seen in /metrics), every bad input's 4xx, the per-request time limit, and a
// graceful exit 0 on SIGTERM / SIGINT.
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import { binArg, startServe, exited } from './server_proc.mjs';

// A fresh connection per request: a kept-alive socket that the server closed while the test
// ran a CLI reference (longer than --keep-alive) would otherwise be reused and reset.
const agent = new http.Agent({ keepAlive: false });

const here = path.dirname(fileURLToPath(import.meta.url));
let OpenAI;
try {
  OpenAI = createRequire(path.join(here, 'package.json'))('openai').OpenAI;
} catch (e) {
  console.error(`server_test: the npm 'openai' client is not installed in ${here}/node_modules ` +
                '(run scripts/setup.sh, or npm ci there)');
  process.exit(1);
}

const BIN = binArg('server_test.mjs');
const KEY = 'test-key-123';
const CTX = 512;

// ---- helpers ----
const startServer = (extra, ctx = CTX) => startServe(BIN, ['-q', '-c', String(ctx), ...extra]);

function cliRun(prompt, n, chat) {
  const a = ['run', '-q', '--output', 'json', '--temp', '0', '-n', String(n), '-c', String(CTX), '-p', prompt];
  if (chat) a.push('--chat', '--no-think');
  return JSON.parse(execFileSync(BIN, a, { encoding: 'utf8' }));
}

async function metrics(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name) => {
    const m = text.match(new RegExp('^diskformer_' + name.replace(/[{}"]/g, (c) => '\\' + c) + ' (\\S+)$', 'm'));
    assert.ok(m, `metric ${name} missing in:\n${text}`);
    return Number(m[1]);
  };
  return { active: get('requests_active'), queued: get('requests_queued'),
           cancelled: get('requests_finished_total{reason="cancelled"}'), text };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let passed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    console.log(`FAIL ${name}`);
    throw e;
  }
}

const CODE_PROMPTS = [
  'def fibonacci(n):\n',
  'import os\nimport sys\n\n\ndef main():\n',
  'class Stack:\n    def __init__(self):\n',
  'def read_json(path):\n    """Read a JSON file."""\n',
  'for i in range(10):\n',
  '# Sort a list of numbers\ndef sort_numbers(xs):\n',
];
const CHAT_PROMPTS = ['def add(a, b):', 'Write a function that reverses a string.', 'import numpy as np'];

// ---- the tests ----
// 12 slots: a full step runs as two forwards (--step-rows 8), a queue forms behind them.
const server = await startServer(['--parallel', '12', '--api-key', KEY, '--max-body', '65536', '--alias', 'my-alias']);
const port = server.port;
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000, httpAgent: agent });
const noThink = { chat_template_kwargs: { enable_thinking: false } };

try {
  await check('models', async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    assert.equal(list.data[0].id, 'default');
    assert.equal(list.data[0].object, 'model');
    assert.deepEqual(list.data[0].aliases, ['diskformer', 'my-alias']);
  });

  await check('the model by its id, "diskformer" or an --alias; a missing model means the served one', async () => {
    for (const model of ['default', 'diskformer', 'my-alias', undefined]) {
      const q = { prompt: 'import os', max_tokens: 1, temperature: 0 };
      if (model) q.model = model;
      const r = await client.completions.create(q);
      assert.equal(r.model, model ?? 'default');
    }
    await assert.rejects(client.completions.create({ model: 'other', prompt: 'import os', max_tokens: 1 }),
                         (e) => e.status === 404);
  });

  const ref = cliRun(CODE_PROMPTS[0], 40, false);
  await check('completion equals `diskformer run`, usage', async () => {
    const r = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[0], max_tokens: 40, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].text, ref.text);
    assert.equal(r.choices[0].finish_reason, ref.tokens.length === 40 ? 'length' : 'stop');
    assert.equal(r.usage.prompt_tokens, ref.prompt_tokens.length);
    assert.equal(r.usage.completion_tokens, ref.tokens.length);
    assert.equal(r.usage.total_tokens, ref.prompt_tokens.length + ref.tokens.length);
  });

  await check('streaming completion with include_usage', async () => {
    const s = await client.completions.create({ prompt: CODE_PROMPTS[0], max_tokens: 40, temperature: 0, stream: true,
                                                model: 'diskformer', stream_options: { include_usage: true } });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const c of s) {
      chunks++;
      if (c.choices.length) {
        text += c.choices[0].text;
        if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
      }
      if (c.usage) usage = c.usage;
    }
    assert.equal(text, ref.text);
    assert.ok(chunks > 5, `only ${chunks} chunks: not streamed`);
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, ref.tokens.length);
    assert.equal(usage.prompt_tokens, ref.prompt_tokens.length);
  });

  const chatRef = cliRun(CHAT_PROMPTS[0], 32, true);
  await check('chat (thinking off) equals `diskformer run --chat --no-think`', async () => {
    const r = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: CHAT_PROMPTS[0] }],
                                                     max_tokens: 32, temperature: 0, ...noThink });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.choices[0].message.content, chatRef.text);
    assert.equal(r.usage.prompt_tokens, chatRef.prompt_tokens.length);
    assert.equal(r.usage.completion_tokens, chatRef.tokens.length);
  });

  await check('chat with thinking on renders the open think block', async () => {
    const think = JSON.parse(execFileSync(BIN, ['run', '-q', '--output', 'json', '--temp', '0', '-n', '16', '-c', String(CTX),
                                                '--chat', '-p', CHAT_PROMPTS[1]], { encoding: 'utf8' }));
    const r = await client.chat.completions.create({ messages: [{ role: 'user', content: CHAT_PROMPTS[1] }],
                                                     model: 'default', max_tokens: 16, temperature: 0 });
    assert.equal(r.usage.prompt_tokens, think.prompt_tokens.length);
    assert.equal(r.choices[0].message.content, think.text);
    const off = await client.chat.completions.create({ messages: [{ role: 'user', content: CHAT_PROMPTS[1] }],
                                                       model: 'default', max_tokens: 16, temperature: 0, ...noThink });
    const offRef = cliRun(CHAT_PROMPTS[1], 16, true);
    assert.equal(off.usage.prompt_tokens, offRef.prompt_tokens.length);
    assert.ok(offRef.prompt_tokens.length > think.prompt_tokens.length);
    assert.equal(off.choices[0].message.content, offRef.text);
  });

  await check('streaming chat', async () => {
    const s = await client.chat.completions.create({ model: 'default', messages: [{ role: 'system', content: 'You write Python.' },
                                                     { role: 'user', content: CHAT_PROMPTS[0] }],
                                                     max_tokens: 32, temperature: 0, stream: true, ...noThink });
    let text = '', role = null, finish = null;
    for await (const c of s) {
      assert.equal(c.object, 'chat.completion.chunk');
      const d = c.choices[0].delta;
      if (d.role) role = d.role;
      text += d.content ?? '';
      if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
    }
    const r = await client.chat.completions.create({ model: 'default', messages: [{ role: 'system', content: 'You write Python.' },
                                                     { role: 'user', content: CHAT_PROMPTS[0] }],
                                                     max_tokens: 32, temperature: 0, ...noThink });
    assert.equal(role, 'assistant');
    assert.equal(text, r.choices[0].message.content);
    assert.equal(finish, r.choices[0].finish_reason);
  });

  await check('a returning conversation reuses its slot\'s cache (usage.prompt_tokens_details.cached_tokens)', async () => {
    const turn1 = [{ role: 'user', content: 'def multiply(a, b):' }];
    const a1 = await client.chat.completions.create({ model: 'default', messages: turn1, max_tokens: 12, temperature: 0, ...noThink });
    const turn2 = [...turn1, { role: 'assistant', content: a1.choices[0].message.content },
                   { role: 'user', content: 'Now divide.' }];
    const a2 = await client.chat.completions.create({ model: 'default', messages: turn2, max_tokens: 4, temperature: 0, ...noThink });
    // Turn 1's history (up to its assistant header) comes from the slot's checkpoint.
    const history = JSON.parse(execFileSync(BIN, ['tokenize', '-p', '<|im_start|>user\ndef multiply(a, b):<|im_end|>\n'],
                                            { encoding: 'utf8' }));
    assert.equal(a2.usage.prompt_tokens_details.cached_tokens, history.length,
                 `cached ${a2.usage.prompt_tokens_details.cached_tokens} of turn 1's ${a1.usage.prompt_tokens} prompt tokens`);
  });

  await check('stop sequences (string, list, streaming) across token boundaries', async () => {
    // A stop string that starts inside one token and ends inside a later one.
    const full = ref.text;
    const at = Math.floor(full.length / 2);
    const stop = full.slice(at, at + 5);
    const expect = full.slice(0, full.indexOf(stop));
    for (const s of [stop, ['never-appears', stop]]) {
      const r = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[0], max_tokens: 40, temperature: 0, stop: s });
      assert.equal(r.choices[0].text, expect);
      assert.equal(r.choices[0].finish_reason, 'stop');
    }
    const st = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[0], max_tokens: 40, temperature: 0,
                                                 stop: [stop], stream: true });
    let text = '', finish = null;
    for await (const c of st) {
      text += c.choices[0]?.text ?? '';
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    assert.equal(text, expect);
    assert.equal(finish, 'stop');
  });

  await check('max_tokens and finish_reason length', async () => {
    const r = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[1], max_tokens: 3, temperature: 0, ignore_eos: true });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 3);
  });

  await check('logprobs / top_logprobs', async () => {
    const r = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: CHAT_PROMPTS[0] }],
                                                     max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3, ...noThink });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    assert.equal(lp.map((t) => t.token).join(''), r.choices[0].message.content);
    for (const t of lp) {
      assert.equal(t.top_logprobs.length, 3);
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs[0].token, t.token);  // greedy: the chosen token is the most likely
      assert.equal(t.top_logprobs[0].logprob, t.logprob);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob && t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob);
    }
    const c = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[0], max_tokens: 5, temperature: 0, logprobs: 2 });
    assert.equal(c.choices[0].logprobs.tokens.length, 5);
    assert.equal(Object.keys(c.choices[0].logprobs.top_logprobs[0]).length, 2);
  });

  await check('frequency / presence penalties change a repetitive greedy answer', async () => {
    const rep = cliRun(CHAT_PROMPTS[0], 32, true).text;
    const msgs = [{ role: 'user', content: CHAT_PROMPTS[0] }];
    const plain = await client.chat.completions.create({ model: 'default', messages: msgs, max_tokens: 32, temperature: 0, ...noThink });
    assert.equal(plain.choices[0].message.content, rep);
    const pen = await client.chat.completions.create({ model: 'default', messages: msgs, max_tokens: 32, temperature: 0,
                                                       frequency_penalty: 2, presence_penalty: 1, ...noThink });
    assert.notEqual(pen.choices[0].message.content, rep);
  });

  await check('sampling with a seed is reproducible', async () => {
    const q = { model: 'default', prompt: CODE_PROMPTS[2], max_tokens: 24, temperature: 1.0, top_p: 0.9, top_k: 50, min_p: 0.01, seed: 42 };
    const a = await client.completions.create(q);
    const b = await client.completions.create(q);
    assert.equal(a.choices[0].text, b.choices[0].text);
  });

  // Single-client greedy answers, checked against `diskformer run`, then 32 clients at once.
  const N = 16;
  const cases = [
    ...CODE_PROMPTS.map((p) => ({ kind: 'completion', prompt: p })),
    ...CHAT_PROMPTS.map((p) => ({ kind: 'chat', prompt: p })),
  ];
  async function ask(c, stream) {
    if (c.kind === 'completion') {
      const q = { model: 'default', prompt: c.prompt, max_tokens: N, temperature: 0 };
      if (!stream) return (await client.completions.create(q)).choices[0].text;
      let t = '';
      for await (const ch of await client.completions.create({ ...q, stream: true })) t += ch.choices[0]?.text ?? '';
      return t;
    }
    const q = { model: 'default', messages: [{ role: 'user', content: c.prompt }], max_tokens: N, temperature: 0, ...noThink };
    if (!stream) return (await client.chat.completions.create(q)).choices[0].message.content;
    let t = '';
    for await (const ch of await client.chat.completions.create({ ...q, stream: true })) t += ch.choices[0]?.delta?.content ?? '';
    return t;
  }
  const single = [];
  await check('single-client greedy answers equal `diskformer run`', async () => {
    for (const c of cases) {
      const r = await ask(c, false);
      assert.equal(r, cliRun(c.prompt, N, c.kind === 'chat').text, `${c.kind} ${JSON.stringify(c.prompt)}`);
      single.push(r);
    }
  });

  await check('32 concurrent clients x 4 requests: all succeed, greedy outputs equal the single-client ones', async () => {
    let mismatches = [];
    await Promise.all(Array.from({ length: 32 }, async (_, i) => {
      for (let k = 0; k < 4; k++) {
        const ci = (i * 4 + k) % cases.length;
        const got = await ask(cases[ci], (i + k) % 2 === 0);
        if (got !== single[ci]) mismatches.push({ ci, got, want: single[ci] });
      }
    }));
    assert.deepEqual(mismatches, []);
    const m = await metrics(port);
    assert.equal(m.active, 0);
    assert.equal(m.queued, 0);
    const steps = Number(m.text.match(/^diskformer_decode_steps_total (\S+)$/m)[1]);
    const forwards = Number(m.text.match(/^diskformer_decode_forwards_total (\S+)$/m)[1]);
    assert.ok(forwards > steps, 'no step was split into forwards of at most 8 rows');
    const rows = Number(m.text.match(/^diskformer_decode_step_rows_total (\S+)$/m)[1]);
    assert.ok(rows / steps > 2, `decode steps advanced ${rows / steps} sequences on average: not concurrent`);
  });

  await check('a client that disconnects mid-stream frees its slot; the server still answers', async () => {
    const before = await metrics(port);
    const s = await client.completions.create({ model: 'default', prompt: CODE_PROMPTS[3], max_tokens: 100000,
                                                temperature: 0, stream: true, ignore_eos: true });
    let n = 0;
    for await (const c of s) {
      if (++n === 3) break;  // leaving the loop aborts the request
    }
    s.controller.abort();
    let m;
    for (let t = 0; t < 100; t++) {
      m = await metrics(port);
      if (m.active === 0 && m.cancelled === before.cancelled + 1) break;
      await sleep(50);
    }
    assert.equal(m.active, 0, 'the slot was not freed');
    assert.equal(m.cancelled, before.cancelled + 1);
    assert.equal(await ask(cases[0], false), single[0]);
  });

  await check('bad input gets an OpenAI-style error and its 4xx', async () => {
    const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
    const post = async (url, body, headers = auth) => {
      const r = await fetch(base + url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
      const j = await r.json();
      assert.ok(j.error && typeof j.error.message === 'string' && j.error.type, `no error object: ${JSON.stringify(j)}`);
      return { status: r.status, error: j.error };
    };
    const msgs = [{ role: 'user', content: 'hi' }];
    const chat = '/v1/chat/completions', comp = '/v1/completions';
    const cases400 = [
      [chat, '{"messages": [', null],
      [chat, '[1, 2]', null],
      [chat, '{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}', null],
      [chat, { model: 'default' }, 'messages'],
      [chat, { messages: [] }, 'messages'],
      [chat, { messages: 'hi' }, 'messages'],
      [chat, { messages: [{ role: 'wizard', content: 'hi' }] }, 'messages[0].role'],
      [chat, { messages: [{ role: 'user' }] }, 'messages[0].content'],
      [chat, { messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      [chat, { messages: msgs, temperature: 'hot' }, 'temperature'],
      [chat, { messages: msgs, temperature: 3 }, 'temperature'],
      [chat, { messages: msgs, max_tokens: 0 }, 'max_tokens'],
      [chat, { messages: msgs, max_tokens: -5 }, 'max_tokens'],
      [chat, { messages: msgs, max_completion_tokens: 1.5 }, 'max_completion_tokens'],
      [chat, { messages: msgs, stream: 'yes' }, 'stream'],
      [chat, { messages: msgs, stop: 7 }, 'stop'],
      [chat, { messages: msgs, top_logprobs: 2 }, 'top_logprobs'],
      [chat, { messages: msgs, n: 2 }, 'n'],
      [chat, { messages: msgs, stream_options: { include_usage: true } }, 'stream_options'],
      [chat, { messages: msgs, tools: [] }, 'tools'],
      [chat, { messages: msgs, response_format: { type: 'json_object' } }, 'response_format'],
      [chat, { messages: msgs, chat_template_kwargs: { other: 1 } }, 'chat_template_kwargs.other'],
      [chat, { messages: [{ role: 'user', content: 'x = 1\n'.repeat(400) }] }, 'messages'],
      [comp, { prompt: 'x = 1\n'.repeat(400) }, 'prompt'],
      [comp, { prompt: '' }, 'prompt'],
      [comp, { prompt: 42 }, 'prompt'],
      [comp, {}, 'prompt'],
      [comp, { prompt: 'a', logit_bias: {} }, 'logit_bias'],
    ];
    for (const [url, body, param] of cases400) {
      const r = await post(url, body);
      assert.equal(r.status, 400, `${url} ${JSON.stringify(body).slice(0, 80)}: ${r.status} ${r.error.message}`);
      if (param) assert.equal(r.error.param, param, r.error.message);
      if (param === 'tools') assert.match(r.error.message, /tools/);
    }
    const long = await post(comp, { prompt: 'x = 1\n'.repeat(400) });
    assert.equal(long.error.code, 'context_length_exceeded');
    const unknown = await post(chat, { model: 'gpt-4o', messages: msgs });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.error.code, 'model_not_found');
    const big = await post(comp, { prompt: 'a'.repeat(100000) });
    assert.equal(big.status, 413);
    assert.equal((await post(chat, { messages: msgs }, { 'Content-Type': 'application/json' })).status, 401);
    assert.equal((await post(chat, { messages: msgs }, { Authorization: 'Bearer wrong', 'Content-Type': 'application/json' })).status, 401);
    const models = await fetch(`${base}/v1/models`);
    assert.equal(models.status, 401);
    const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0, httpAgent: agent });
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
    await assert.rejects(client.chat.completions.create({ model: 'default', messages: [] }), (e) => e.status === 400);
    const nf = await fetch(`${base}/v1/nothing`);
    assert.equal(nf.status, 404);
    assert.equal((await fetch(`${base}/health`)).status, 200);
    assert.equal(await ask(cases[1], true), single[1]);
  });

  await check('a second server on the same port fails with a clear error', async () => {
    let err = '';
    try {
      execFileSync(BIN, ['serve', '-q', '--port', String(port)], { encoding: 'utf8', stdio: 'pipe', timeout: 20000 });
      assert.fail('the second server started');
    } catch (e) {
      assert.equal(e.status, 1, String(e));
      err = e.stderr;
    }
    assert.match(err, /cannot listen on 127\.0\.0\.1:\d+/);
  });

  await check('per-request time limit; SIGTERM finishes the request in flight and exits 0', async () => {
    // A context that the 1 s of generation cannot fill.
    const s2 = await startServer(['--time-limit', '1', '--shutdown-grace', '5', '--keep-alive', '1'], 32768);
    const c2 = new OpenAI({ baseURL: `http://127.0.0.1:${s2.port}/v1`, apiKey: 'none', maxRetries: 0, httpAgent: agent });
    const t0 = Date.now();
    const st = await c2.completions.create({ model: 'default', prompt: CODE_PROMPTS[4], max_tokens: 100000,
                                             temperature: 0, stream: true, ignore_eos: true });
    let finish = null, n = 0;
    for await (const c of st) {
      if (++n === 2) s2.kill('SIGTERM');
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    const dt = Date.now() - t0;
    assert.equal(finish, 'length');
    assert.ok(dt >= 900 && dt < 4000, `took ${dt} ms with a 1 s limit`);
    assert.equal(await exited(s2), 0, s2.stderrText());
    assert.ok(Date.now() - t0 < 6000, `exit took ${Date.now() - t0 - dt} ms after the stream ended`);
  });
} catch (e) {
  server.kill('SIGKILL');
  console.error(e);
  console.error('--- server stderr:\n' + server.stderrText());
  process.exit(1);
}

server.kill('SIGINT');
const code = await exited(server);
if (code !== 0) {
  console.error(`the server exited with ${code} on SIGINT\n${server.stderrText()}`);
  process.exit(1);
}
console.log(`server_test: ${passed} checks passed; the server exited 0 on SIGINT`);
