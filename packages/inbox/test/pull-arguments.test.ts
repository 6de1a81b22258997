/**
 * What the pull worker refuses before any statement, and how it says so: a `markDead` reason that is not a string,
 * and a row whose id or claim token is not a string (a number, say), which is the caller's mistake and not a lost
 * claim.
 */
import { randomUUID } from 'node:crypto';
import { ClaimLostError, type InboxStore } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createPullWorker } from '../src/index.ts';

/** A store that fails the test when it is called: every refusal here happens before the store. */
const untouchable = new Proxy({} as InboxStore, {
  get: (_target, name) => () => {
    throw new Error(`the store was called (${String(name)})`);
  },
});

const aClaimedRow = (overrides: Record<string, unknown> = {}) => ({
  id: '42',
  claimToken: randomUUID(),
  attempt: 0,
  maxAttempts: 5,
  ...overrides,
});

describe('pull worker arguments', () => {
  it.each([
    ['undefined', undefined, 'got undefined'],
    ['an Error', new Error('boom'), 'got an Error'],
    ['a number', 7, 'got 7'],
  ])('markDead refuses %s as the reason with a TypeError naming it', async (_name, reason, shown) => {
    // Prepare
    const worker = createPullWorker({ store: untouchable, source: 'invoices' });

    // Act
    const error = await worker.markDead(aClaimedRow(), reason as unknown as string).catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain('markDead(row, reason): reason must be a string');
    expect((error as Error).message).toContain(shown);
  });

  it('retry names the value it refuses as the error', async () => {
    const worker = createPullWorker({ store: untouchable, source: 'invoices' });

    const error = await worker.retry(aClaimedRow(), 0, new Error('boom') as never).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain('error must be a string (got an Error)');
  });

  it.each([
    ['markProcessed', (w: ReturnType<typeof createPullWorker>, row: never) => w.markProcessed(row)],
    ['retry', (w: ReturnType<typeof createPullWorker>, row: never) => w.retry(row, 0, 'failed')],
    ['markDead', (w: ReturnType<typeof createPullWorker>, row: never) => w.markDead(row, 'gave up')],
  ])('%s refuses a numeric id with a TypeError naming it, not a ClaimLostError', async (_name, settle) => {
    // Prepare
    const worker = createPullWorker({ store: untouchable, source: 'invoices' });

    // Act
    const error = await settle(worker, aClaimedRow({ id: 42 }) as never).catch((e: unknown) => e);

    // Assess
    expect(error).not.toBeInstanceOf(ClaimLostError);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/row\.id must be .* decimal string .*\(got 42\)/);
  });

  it.each([
    ['markProcessed', 'missing', undefined, 'got undefined'],
    ['retry', 'a number', 7, 'got 7'],
    ['markDead', 'missing', undefined, 'got undefined'],
  ])(
    '%s refuses a claim token that is %s with a TypeError naming it, on either store',
    async (call, _what, token, shown) => {
      // Prepare: PostgreSQL's store threw a TypeError of its own from deep inside, SQL Server's a lost claim.
      const worker = createPullWorker({ store: untouchable, source: 'invoices' });
      const row = aClaimedRow({ claimToken: token }) as never;

      // Act
      const error = await (call === 'markProcessed'
        ? worker.markProcessed(row)
        : call === 'retry'
          ? worker.retry(row, 0, 'failed')
          : worker.markDead(row, 'gave up')
      ).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toContain('row.claimToken must be the claim token the claim answered');
      expect((error as Error).message).toContain(shown);
    },
  );
});
