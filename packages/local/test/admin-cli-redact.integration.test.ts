/**
 * `queuebox outbox redact <id>` and `queuebox inbox redact <id>` through `runCli`, in this process, on a real
 * PostgreSQL (fresh schema): the text an operator reads, the JSON a script reads, and the exit codes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageState, type RowId } from '@queuebox/core';
import { requireServices, useTestStore } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, runCli } from '../src/commands.ts';

const needs = await requireServices('queuebox redact cli tests', ['postgres']);

describe.skipIf(needs.skipReason)('queuebox outbox|inbox redact (PostgreSQL)', () => {
  const db = useTestStore('local_redact_cli', { url: needs.url.postgres });
  let cwd = '';
  beforeAll(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'queuebox-redact-'));
  });
  afterAll(async () => {
    await rm(cwd, { recursive: true, force: true });
  });
  afterEach(async () => {
    await db.clear();
  });

  async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await runCli(argv, {
      out: (text) => {
        out += text;
      },
      err: (text) => {
        err += text;
      },
      env: { QUEUEBOX_DATABASE__URL: needs.url.postgres, QUEUEBOX_DATABASE__SCHEMA: db.schema },
      cwd,
    });
    return { code, out, err };
  }

  /** One outbox row with customer data, settled as asked (sent, dead) or left pending. */
  async function outboxRow(settle: 'pending' | 'sent' | 'dead'): Promise<RowId> {
    const [id] = (await db.store.outbox.insert([
      {
        topic: 'customers.updated',
        key: 'customer-7',
        payload: { email: 'ada@example.com' },
        headers: { 'X-Email': 'ada@example.com' },
        maxAttempts: 3,
      },
    ])) as [RowId];
    if (settle === 'pending') return id;
    const [claimed] = await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    const claim = { id, claimToken: claimed?.claimToken ?? '' };
    if (settle === 'sent') await db.store.outbox.markSent([{ ...claim, destination: 'crm' }]);
    else await db.store.outbox.markDead([{ ...claim, reason: 'HTTP 410: ada@example.com', attempted: true }]);
    return id;
  }

  it('outbox redact erases a sent row and says so; --json answers {ok, status, id}', async () => {
    const sent = await outboxRow('sent');
    const dead = await outboxRow('dead');

    const text = await cli('outbox', 'redact', sent);
    const json = await cli('outbox', 'redact', dead, '--json');

    expect(text).toEqual({
      code: EXIT.ok,
      out: `Redacted outbox row ${sent}: payload null, headers {}, last error cleared.\n`,
      err: '',
    });
    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.out)).toEqual({ ok: true, status: 'redacted', id: dead });
    for (const id of [sent, dead]) {
      expect(await db.store.outbox.get(id)).toMatchObject({
        payload: null,
        headers: {},
        lastError: null,
        key: 'customer-7',
      });
    }
    expect((await db.store.outbox.get(dead))?.state).toBe(MessageState.Dead);
  });

  it('inbox redact erases a dead row and notes the outbox rows forwarded from it (stderr; `note` with --json)', async () => {
    const stored = await db.store.inbox.storeDead(
      {
        source: 'crm',
        idempotencyKey: 'evt-1',
        eventType: 'customer.updated',
        aggregateId: 'cus_ada',
        correlationId: 'corr-ada',
        payload: { email: 'ada@example.com' },
        headers: { 'x-email': 'ada@example.com' },
        maxAttempts: 3,
      },
      'not JSON',
    );
    const note = `Outbox rows the relay forwarded from inbox row ${stored.id} (header x-inbox-id: ${stored.id}) hold their own copy of its payload and headers and were not changed: find them and redact each (see @queuebox/admin, "Redact")`;

    const text = await cli('inbox', 'redact', stored.id);
    const json = await cli('inbox', 'redact', stored.id, '--json');

    expect(text).toEqual({
      code: EXIT.ok,
      out: `Redacted inbox row ${stored.id}: payload null, headers {}, last error, aggregate id and correlation id cleared.\n`,
      err: `note: ${note}.\n`,
    });
    expect(JSON.parse(json.out)).toEqual({ ok: true, status: 'redacted', id: stored.id, note });
    expect(json.err).toBe('');
    expect(await db.store.inbox.get(stored.id)).toMatchObject({
      idempotencyKey: 'evt-1',
      aggregateId: null,
      correlationId: null,
      payload: null,
      headers: {},
      lastError: null,
      state: MessageState.Dead,
    });
  });

  it('a pending row exits 1 with not_final and is left as it was; a missing row exits 1 with row_not_found', async () => {
    const pending = await outboxRow('pending');

    const refused = await cli('outbox', 'redact', pending);
    const refusedJson = await cli('outbox', 'redact', pending, '--json');
    const missing = await cli('inbox', 'redact', '999999999', '--json');

    expect(refused).toEqual({
      code: EXIT.failure,
      out: '',
      err: `Outbox row ${pending} is pending: only sent or dead rows are redacted, as a row in any other state may still be in delivery. Redact it once it is sent or dead.\n`,
    });
    expect(refusedJson.code).toBe(EXIT.failure);
    expect(JSON.parse(refusedJson.out)).toEqual({
      ok: false,
      error: 'not_final',
      id: pending,
      state: 'pending',
    });
    expect(missing.code).toBe(EXIT.failure);
    expect(JSON.parse(missing.out)).toEqual({ ok: false, error: 'row_not_found', id: '999999999' });
    expect((await db.store.outbox.get(pending))?.payload).toEqual({ email: 'ada@example.com' });
  });
});
