'use strict';
/**
 * A small broadcast bus on one shared WAL SQLite file, written for the
 * knell example: the contract knell tests, in about 200 lines of Node.
 *
 * Many processes (one adapter per knell worker) open the same file, so
 * every invariant lives in the store, under SQLite's single write lock:
 *
 * - WAL journal and a busy timeout: readers run beside the writer, and a
 *   writer waits for the lock instead of failing at once.
 * - post: seq = MAX(seq) + 1 inside a BEGIN IMMEDIATE transaction (the
 *   write lock is taken before anything is read), and an idempotency key
 *   is looked up in the same transaction; a unique index on (channel, key)
 *   backs it up. A repeated key returns the original message.
 * - subscribe: a new handle joins at the current head (no history flood);
 *   subscribing again never moves an existing cursor.
 * - fetch: a peek. It never consumes and never moves a cursor.
 * - ack: forward-only, acked = MAX(acked, up_to) inside the write
 *   transaction, so a stale ack from any process is a no-op; an ack beyond
 *   head is refused. (The seeded-bug twin, `bugs: ['stale-ack']`, writes
 *   up_to as is: the bug knell's matrix must catch.)
 * - wait: the doorbell. Holds no durable state; rings at once for unacked
 *   backlog written by others, otherwise polls (bounded by poll_interval)
 *   for the first post by someone else above the heads it remembered when
 *   armed. Never rings for the handle's own posts.
 *
 * Errors carry an `outcome` the adapter reports: 'definite' when nothing
 * happened (refusals; a write lock never taken), 'indeterminate' when a
 * write may or may not have landed (a failed commit).
 */

const Database = require('better-sqlite3');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    sender TEXT NOT NULL,
    idem_key TEXT,
    posted_at REAL NOT NULL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS messages_idem
    ON messages (channel, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS cursors (
    handle TEXT NOT NULL,
    channel TEXT NOT NULL,
    acked INTEGER NOT NULL,
    PRIMARY KEY (handle, channel)
) WITHOUT ROWID;
`;

class BusError extends Error {
  constructor(outcome, kind, message) {
    super(message);
    this.outcome = outcome; // 'definite' | 'indeterminate'
    this.kind = kind;
  }
}

const definite = (kind, message) => new BusError('definite', kind, message);

const isBusy = (err) => err && typeof err.code === 'string' &&
  (err.code.startsWith('SQLITE_BUSY') || err.code.startsWith('SQLITE_LOCKED'));

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Parse `sqlite:///abs/path.db?poll_interval=0.05&busy_timeout=10`. */
function parseStoreUrl(url) {
  const match = /^sqlite:\/\/(?:localhost)?(\/[^?]*)(?:\?(.*))?$/.exec(url || '');
  if (!match) throw definite('invalid-argument', `not a sqlite:/// store URL: ${JSON.stringify(url)}`);
  // The path is written as is but for %25, %3F and %23 (%, ?, #); on
  // Windows it starts /C:/..., a drive after the slash.
  let path = decodeURIComponent(match[1]);
  if (process.platform === 'win32' && /^\/[A-Za-z]:([/\\]|$)/.test(path)) path = path.slice(1);
  const options = { path, pollInterval: 0.1, busyTimeout: 10, synchronous: 'NORMAL' };
  for (const [key, value] of new URLSearchParams(match[2] || '')) {
    if (key === 'poll_interval') options.pollInterval = Number(value);
    else if (key === 'busy_timeout') options.busyTimeout = Number(value);
    else if (key === 'synchronous') options.synchronous = value.toUpperCase();
    else if (key === 'open_timeout') continue; // knell's own bus retries opening; this one does not
    else throw definite('invalid-argument', `unknown store URL option ${key}`);
  }
  if (!(options.pollInterval > 0)) throw definite('invalid-argument', 'poll_interval must be > 0');
  if (!['OFF', 'NORMAL', 'FULL', 'EXTRA'].includes(options.synchronous)) {
    throw definite('invalid-argument', `bad synchronous=${options.synchronous}`);
  }
  return options;
}

class SqliteBroadcastBus {
  constructor(url, { bugs = [] } = {}) {
    const options = parseStoreUrl(url);
    this.pollInterval = options.pollInterval;
    this.bugs = new Set(bugs);
    this.db = new Database(options.path, { timeout: options.busyTimeout * 1000 });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`synchronous = ${options.synchronous}`);
    this.write(() => this.db.exec(SCHEMA));
    const q = (sql) => this.db.prepare(sql);
    this.sql = {
      head: q('SELECT COALESCE(MAX(seq), 0) AS head FROM messages WHERE channel = ?'),
      byKey: q('SELECT seq, body, sender FROM messages WHERE channel = ? AND idem_key = ?'),
      insert: q('INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)' +
        ' VALUES (?, ?, ?, ?, ?, ?)'),
      cursor: q('SELECT acked FROM cursors WHERE handle = ? AND channel = ?'),
      join: q('INSERT INTO cursors (handle, channel, acked) VALUES (?, ?, ?)'),
      ack: q('UPDATE cursors SET acked = MAX(acked, ?) WHERE handle = ? AND channel = ?'),
      ackStale: q('UPDATE cursors SET acked = ? WHERE handle = ? AND channel = ?'),
      page: q('SELECT seq, body, sender, idem_key FROM messages' +
        ' WHERE channel = ? AND seq > ? ORDER BY seq LIMIT ?'),
      backlog: q('SELECT m.channel, m.seq, m.sender FROM cursors c JOIN messages m' +
        ' ON m.channel = c.channel AND m.seq > c.acked' +
        ' WHERE c.handle = ? AND m.sender != ? ORDER BY m.channel, m.seq LIMIT 1'),
      channels: q('SELECT channel FROM cursors WHERE handle = ?'),
      firstByOther: q('SELECT seq, sender FROM messages' +
        ' WHERE channel = ? AND seq > ? AND sender != ? ORDER BY seq LIMIT 1'),
    };
  }

  /** Run fn inside BEGIN IMMEDIATE ... COMMIT, classifying failures. */
  write(fn) {
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      if (isBusy(err)) throw definite('busy', `sqlite write lock: ${err.message}`);
      throw err;
    }
    let result;
    try {
      result = fn();
    } catch (err) {
      this.db.exec('ROLLBACK'); // nothing was committed: the caller's error stands
      throw err;
    }
    try {
      this.db.exec('COMMIT');
    } catch (err) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw new BusError('indeterminate', 'commit', `sqlite commit: ${err.message}`);
    }
    return result;
  }

  head(channel) {
    return this.sql.head.get(channel).head;
  }

  cursorOf(handle, channel) {
    const row = this.sql.cursor.get(handle, channel);
    return row === undefined ? null : row.acked;
  }

  post(channel, body, sender, idempotencyKey = null) {
    return this.write(() => {
      if (idempotencyKey !== null) {
        const original = this.sql.byKey.get(channel, idempotencyKey);
        if (original !== undefined) {
          return message(channel, original.seq, original.body, original.sender, idempotencyKey);
        }
      }
      const seq = this.head(channel) + 1;
      this.sql.insert.run(channel, seq, body, sender, idempotencyKey, Date.now() / 1000);
      return message(channel, seq, body, sender, idempotencyKey);
    });
  }

  subscribe(handle, channel, at = 'head') {
    if (at !== 'head' && at !== 'start') {
      throw definite('invalid-argument', `subscribe at must be 'head' or 'start', got ${at}`);
    }
    return this.write(() => {
      const existing = this.cursorOf(handle, channel);
      if (existing !== null) return existing;
      const start = at === 'head' ? this.head(channel) : 0;
      this.sql.join.run(handle, channel, start);
      return start;
    });
  }

  fetch(handle, channel, after = null, limit = 100) {
    if (!(limit > 0)) throw definite('invalid-argument', `fetch limit must be > 0, got ${limit}`);
    if (after === null) {
      after = this.cursorOf(handle, channel);
      if (after === null) throw notSubscribed(handle, channel);
    }
    return this.sql.page.all(channel, after, limit)
      .map((r) => message(channel, r.seq, r.body, r.sender, r.idem_key));
  }

  ack(handle, channel, upTo) {
    return this.write(() => {
      const head = this.head(channel);
      if (upTo > head) {
        throw definite('ack-beyond-head', `ack ${upTo} is beyond head ${head} of ${channel}`);
      }
      const stale = this.bugs.has('stale-ack');
      const update = stale ? this.sql.ackStale : this.sql.ack;
      if (update.run(upTo, handle, channel).changes === 0) throw notSubscribed(handle, channel);
      return stale ? upTo : this.cursorOf(handle, channel);
    });
  }

  cursor(handle, channel) {
    const value = this.cursorOf(handle, channel);
    if (value === null) throw notSubscribed(handle, channel);
    return value;
  }

  async wait(handle, timeout) {
    const deadline = Date.now() + timeout * 1000;
    const backlog = this.sql.backlog.get(handle, handle);
    if (backlog !== undefined) {
      return { channel: backlog.channel, seq: backlog.seq, sender: backlog.sender, reason: 'backlog' };
    }
    const armed = this.sql.channels.all(handle).map(({ channel }) => [channel, this.head(channel)]);
    for (;;) {
      for (const [channel, head] of armed) {
        const row = this.sql.firstByOther.get(channel, head, handle);
        if (row !== undefined) return { channel, seq: row.seq, sender: row.sender, reason: 'post' };
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) return null;
      await sleep(Math.min(this.pollInterval * 1000, remaining));
    }
  }

  close() {
    if (this.db.open) this.db.close();
  }
}

function message(channel, seq, body, sender, idempotencyKey) {
  return { channel, seq, body, sender, idempotency_key: idempotencyKey ?? null };
}

function notSubscribed(handle, channel) {
  return definite('not-subscribed', `${handle} is not subscribed to ${channel}`);
}

module.exports = { BusError, SqliteBroadcastBus, parseStoreUrl };
