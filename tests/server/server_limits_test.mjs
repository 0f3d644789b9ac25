// `diskformer serve`'s README claims about its HTTP workers and its shutdown, with plain HTTP
// (node's fetch and raw sockets; no npm package needed):
//
//   node tests/server/server_limits_test.mjs --bin build/diskformer
//
//   - "--threads-http N workers, one per open connection": with --threads-http 1 an idle open
//     connection holds the only worker, so another client's GET /health waits until that
//     connection closes; with --threads-http 2 it is answered at once;
//   - "SIGINT / SIGTERM: new requests get 503, running ones finish (up to --shutdown-grace,
//     then they are cancelled), exit 0": a request of 24 tokens running at SIGTERM ends with
//     all of them (finish_reason length); one that would run for minutes is cancelled about
//     --shutdown-grace 1 s after SIGTERM (its stream ends with an error event), /health and a
//     new completion get 503 meanwhile, and the server exits 0.
import assert from 'node:assert/strict';
import net from 'node:net';
import { binArg, startServe, exited } from './server_proc.mjs';

const BIN = binArg('server_limits_test.mjs');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const startServer = (extra) => startServe(BIN, ['-t', '1', ...extra]);

// GET path on a new connection (Connection: close); resolves with the status code.
function rawGet(port, path) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let data = '';
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`));
    s.on('data', (d) => { data += d; });
    s.on('end', () => resolve(Number((data.match(/^HTTP\/1\.1 (\d+)/) || [])[1])));
    s.on('error', reject);
  });
}

function completion(port, body) {
  return fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'default', prompt: 'for i in range(10):\n', temperature: 0, ...body }),
  });
}

// Reads an SSE response; calls onEvent(count) after each `data:` event; returns the events.
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const events = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) {
      const line = buf.slice(0, i);
      if (!line.startsWith('data: ')) continue;
      const d = line.slice(6);
      events.push(d === '[DONE]' ? d : JSON.parse(d));
      onEvent(events.length);
    }
  }
  return events;
}

let passed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    console.log(`FAIL ${name}`);
    console.error(e);
    process.exit(1);
  }
}

// With N workers, is another client answered while one idle connection is open?
async function answeredBesideAnIdleConnection(threads) {
  const s = await startServer(['-q', '--threads-http', String(threads)]);
  try {
    const idle = net.connect(s.port, '127.0.0.1');
    await new Promise((r, j) => { idle.on('connect', r); idle.on('error', j); });
    await sleep(300);  // accepted and handed to a worker (which waits for its request line)
    const got = rawGet(s.port, '/health');
    const early = await Promise.race([got.then(() => 'answered'), sleep(1500).then(() => 'waiting')]);
    idle.destroy();
    const status = await Promise.race([got, sleep(10000).then(() => 'no answer 10 s after the idle connection closed')]);
    assert.equal(status, 200);
    return early;
  } finally {
    s.kill('SIGTERM');
    assert.equal(await exited(s), 0, s.stderrText());
  }
}

await check('--threads-http 1: one idle connection holds the only worker', async () => {
  assert.equal(await answeredBesideAnIdleConnection(1), 'waiting');
});

await check('--threads-http 2: a second connection is served beside an idle one', async () => {
  assert.equal(await answeredBesideAnIdleConnection(2), 'answered');
});

await check('SIGTERM: a running request finishes within the grace; exit 0', async () => {
  const s = await startServer(['-q', '-c', '512', '--keep-alive', '1']);  // --shutdown-grace 10 (default)
  const res = await completion(s.port, { max_tokens: 24, stream: true, ignore_eos: true,
                                         stream_options: { include_usage: true } });
  assert.equal(res.status, 200);
  const events = await readEvents(res, (n) => { if (n === 1) s.kill('SIGTERM'); });
  assert.equal(events.at(-1), '[DONE]');
  assert.ok(!events.some((e) => e.error), JSON.stringify(events.filter((e) => e.error)));
  const finish = events.find((e) => e.choices?.[0]?.finish_reason)?.choices[0].finish_reason;
  assert.equal(finish, 'length');
  assert.equal(events.find((e) => e.usage)?.usage.completion_tokens, 24);
  assert.equal(await exited(s), 0, s.stderrText());
});

await check('SIGTERM with --shutdown-grace 1: 503s meanwhile, the long request cancelled after ~1 s, exit 0', async () => {
  // A context that 1 s of generation cannot fill, and no time limit.
  const s = await startServer(['-q', '-c', '32768', '--shutdown-grace', '1', '--time-limit', '0', '--keep-alive', '1']);
  const res = await completion(s.port, { max_tokens: 100000, stream: true, ignore_eos: true });
  assert.equal(res.status, 200);
  let tSig = 0, during = null;
  const events = await readEvents(res, (n) => {
    if (n !== 2) return;
    tSig = Date.now();
    s.kill('SIGTERM');
    during = (async () => {
      await sleep(300);
      const health = await rawGet(s.port, '/health');
      const r = await completion(s.port, { max_tokens: 4 });
      return { health, status: r.status, body: await r.json() };
    })();
  });
  const dt = Date.now() - tSig;
  assert.ok(tSig > 0, 'the stream ended before its second event');
  const d = await during;
  assert.equal(d.health, 503);
  assert.equal(d.status, 503);
  assert.match(d.body.error.message, /shutting down/);
  const last = events.filter((e) => e !== '[DONE]').at(-1);
  assert.ok(last.error, `the stream ended without the cancellation: ${JSON.stringify(last)}`);
  assert.match(last.error.message, /cancelled/);
  assert.ok(events.length > 3, `only ${events.length} events before the cancel`);
  assert.ok(dt >= 900 && dt < 5000, `cancelled ${dt} ms after SIGTERM with a grace of 1 s`);
  console.log(`     cancelled ${dt} ms after SIGTERM, after ${events.length} events`);
  assert.equal(await exited(s), 0, s.stderrText());
  assert.ok(Date.now() - tSig < 8000, `exited ${Date.now() - tSig} ms after SIGTERM`);
});

console.log(`server_limits_test: ${passed} checks passed`);
