#!/usr/bin/env node
'use strict';
/**
 * A knell stdio adapter (protocol 1) for the example bus in bus.js.
 *
 * knell starts this program once per worker process and speaks
 * newline-delimited JSON with it (docs/stdio-protocol.md):
 *
 *   stdin:  {"id": 3, "op": "post", "args": {"channel": "events", ...}}
 *   stdout: {"id": 3, "ok": true, "result": {"message": {...}}}
 *       or  {"id": 3, "ok": false, "error": {"outcome": "definite", "kind": "...", "message": "..."}}
 *
 * Requests are answered one at a time, in order. stdout carries nothing
 * but replies; diagnostics go to stderr. The adapter exits when stdin
 * closes (that is how it dies with its worker on every platform).
 *
 *   node adapter.js                   the bus as written
 *   node adapter.js --bug stale-ack   its seeded-bug twin: ack without the
 *                                     forward-only clamp (knell must catch it)
 */

const readline = require('node:readline');
const { BusError, SqliteBroadcastBus } = require('./bus');

const PROTOCOL = 1;
const KNOWN_BUGS = ['stale-ack'];

function parseArgs(argv) {
  const bugs = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--bug' && i + 1 < argv.length) {
      bugs.push(argv[i + 1]);
      i += 1;
    } else {
      process.stderr.write(`adapter.js: unknown argument ${argv[i]} (use --bug NAME)\n`);
      process.exit(2);
    }
  }
  for (const bug of bugs) {
    if (!KNOWN_BUGS.includes(bug)) {
      process.stderr.write(`adapter.js: unknown bug ${bug} (known: ${KNOWN_BUGS.join(', ')})\n`);
      process.exit(2);
    }
  }
  return { bugs };
}

const { bugs } = parseArgs(process.argv.slice(2));
let bus = null;

const ops = {
  hello(args) {
    if (args.protocol !== PROTOCOL) {
      throw new BusError('definite', 'unsupported-protocol', `this adapter speaks protocol ${PROTOCOL}`);
    }
    bus = new SqliteBroadcastBus(args.store || process.env.KNELL_STORE_URL, { bugs });
    const name = bugs.length ? `example node bus (bugs: ${bugs.join(', ')})` : 'example node bus';
    // Broadcast only: knell never sends this adapter a queue or role
    // operation, and refuses (exit 3) a scenario for those contracts.
    // No SSE tails either, and none needed: a tail is served by a knell
    // bridge in front of this adapter (from head and fetch), never by a bus.
    // No message expiry: an empty features list says so, so knell never
    // sends expires_at or include_expired and refuses (exit 3) a scenario
    // that posts with a ttl.
    return { protocol: PROTOCOL, contracts: ['broadcast'], features: [], bus: name };
  },
  post: (a) => ({ message: bus.post(a.channel, a.body, a.sender, a.idempotency_key ?? null) }),
  subscribe: (a) => ({ cursor: bus.subscribe(a.handle, a.channel, a.at ?? 'head') }),
  fetch: (a) => ({ messages: bus.fetch(a.handle, a.channel, a.after ?? null, a.limit ?? 100) }),
  ack: (a) => ({ cursor: bus.ack(a.handle, a.channel, a.up_to) }),
  cursor: (a) => ({ cursor: bus.cursor(a.handle, a.channel) }),
  head: (a) => ({ head: bus.head(a.channel) }),
  wait: async (a) => ({ wake: await bus.wait(a.handle, a.timeout) }),
  close() {
    if (bus !== null) bus.close();
    bus = null;
    return {};
  },
};

async function answer(request) {
  const { op, args = {} } = request;
  if (!Object.prototype.hasOwnProperty.call(ops, op)) {
    throw new BusError('definite', 'unknown-op', `unknown op ${JSON.stringify(op)}`);
  }
  if (bus === null && op !== 'hello' && op !== 'close') {
    throw new BusError('definite', 'no-hello', 'the first request must be hello');
  }
  return ops[op](args);
}

function reply(id, body) {
  process.stdout.write(`${JSON.stringify({ id, ...body })}\n`);
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let request;
    try {
      request = JSON.parse(line);
    } catch (err) {
      process.stderr.write(`adapter.js: cannot parse request ${line.slice(0, 200)}: ${err.message}\n`);
      process.exit(2);
    }
    try {
      reply(request.id, { ok: true, result: await answer(request) });
    } catch (err) {
      const error = err instanceof BusError
        ? { outcome: err.outcome, kind: err.kind, message: err.message }
        : { outcome: 'indeterminate', kind: 'internal', message: String(err && err.stack || err) };
      reply(request.id, { ok: false, error });
    }
    if (request.op === 'close') break;
  }
  // End of input (or close): release the store and let Node exit once
  // stdout is flushed; the timer only guards against a stuck handle.
  if (bus !== null) bus.close();
  bus = null;
  process.exitCode = 0;
  setTimeout(() => process.exit(0), 1000).unref();
  process.stdin.destroy();
}

main();
