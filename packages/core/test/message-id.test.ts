import { describe, expect, it } from 'vitest';
import { brokerPublishHeaders } from '../src/broker-headers.ts';
import { StoreError } from '../src/errors.ts';
import type { OutboxRow } from '../src/messages.ts';
import {
  type ClaimedOutboxRow,
  claimedMessageId,
  installIdOf,
  isInstallId,
  onceInstallId,
  outboxMessageId,
  withMessageIds,
} from '../src/ports/message-id.ts';
import type { OutboxStore } from '../src/ports/outbox-store.ts';
import { MessageState } from '../src/states.ts';

const INSTALL = '3f0c9a4be1d84c7fa2b65d0e9c1f7a30';

const aRow = (id: string): OutboxRow => ({
  id,
  topic: 't',
  key: null,
  payload: {},
  headers: {},
  state: MessageState.Processing,
  attempt: 0,
  maxAttempts: 3,
  scheduledAt: new Date(0),
  claimToken: 'token',
  leaseUntil: new Date(0),
  createdAt: new Date(0),
  updatedAt: new Date(0),
  sentAt: null,
  lastError: null,
  destination: null,
});

describe('outboxMessageId', () => {
  it('is <install id>-<row id>-<uid> (migration 0009): one row id of two uids (a restore, a copy) gives two ids', () => {
    const uid = '9B2E4C1D-0A8F-4E7B-9C3D-2E1F0A9B8C7D';
    const later = '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9';

    expect(outboxMessageId('4', INSTALL, uid)).toBe(`${INSTALL}-4-9b2e4c1d0a8f4e7b9c3d2e1f0a9b8c7d`);
    expect(outboxMessageId('4', INSTALL, uid)).not.toBe(outboxMessageId('4', INSTALL, later));
    expect(outboxMessageId('9223372036854775807', INSTALL, uid)).toMatch(
      /^[0-9a-f]{32}-\d{19}-[0-9a-f]{32}$/,
    );
    expect(outboxMessageId('9223372036854775807', INSTALL, uid).length).toBeLessThanOrEqual(85);
  });

  it('is <install id>-<row id> for a row written before migration 0009 (no uid), as it was', () => {
    const other = 'c1d2e3f40516273849aabbccddeeff00';

    expect(outboxMessageId('1', INSTALL)).toBe(`${INSTALL}-1`);
    expect(outboxMessageId('1', INSTALL)).not.toBe(outboxMessageId('1', other));
    expect(outboxMessageId('9223372036854775807', INSTALL)).toMatch(/^[0-9a-f]{32}-\d{19}$/);
    expect(outboxMessageId('9223372036854775807', INSTALL).length).toBeLessThanOrEqual(52);
  });

  it('goes out as the message-id header of a broker publish, replacing a row header of that name', () => {
    const id = outboxMessageId('5', INSTALL);

    expect(brokerPublishHeaders({ id, headers: { 'Message-ID': 'forged', a: 'b' } })).toEqual({
      a: 'b',
      'message-id': id,
    });
  });
});

describe('install ids', () => {
  it('are 32 lower-case hex digits', () => {
    expect(isInstallId(INSTALL)).toBe(true);
    for (const bad of [
      INSTALL.toUpperCase(),
      `${INSTALL}0`,
      INSTALL.slice(1),
      `${INSTALL.slice(1)} `,
      '',
      7,
    ]) {
      expect(isInstallId(bad), String(bad)).toBe(false);
    }
  });

  it('are read from exactly one install row; anything else is a StoreError that says to migrate', () => {
    expect(installIdOf([{ id: INSTALL }], 'qb')).toBe(INSTALL);
    for (const rows of [[], [{ id: INSTALL }, { id: INSTALL }], [{ id: null }], [{ id: 'x' }]]) {
      const error = (() => {
        try {
          return installIdOf(rows, 'qb');
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/schema "qb" has no install id .*migration 0005/s);
    }
  });

  it('are read once and kept; a failed read is not kept', async () => {
    let reads = 0;
    const installId = onceInstallId(async () => {
      reads++;
      if (reads === 1) throw new Error('outage');
      return INSTALL;
    });

    await expect(installId()).rejects.toThrow('outage');
    expect(await installId()).toBe(INSTALL);
    expect(await installId()).toBe(INSTALL);
    expect(reads).toBe(2);
  });
});

describe('withMessageIds', () => {
  const outboxOf = (rows: OutboxRow[], calls: string[]): OutboxStore =>
    ({
      claim: async () => {
        calls.push('claim');
        return rows;
      },
      get: async () => undefined,
    }) as unknown as OutboxStore;

  it('gives every claimed row its message id, the install id read before the claim', async () => {
    const calls: string[] = [];
    const outbox = withMessageIds(outboxOf([aRow('1'), aRow('2')], calls), async () => {
      calls.push('install id');
      return INSTALL;
    });

    const rows = (await outbox.claim({ batchSize: 2, leaseMs: 1 })) as ClaimedOutboxRow[];

    expect(calls).toEqual(['install id', 'claim']);
    expect(rows.map((r) => [r.id, r.messageId])).toEqual([
      ['1', `${INSTALL}-1`],
      ['2', `${INSTALL}-2`],
    ]);
    expect(rows.map(claimedMessageId)).toEqual([`${INSTALL}-1`, `${INSTALL}-2`]);
    expect(await outbox.get('1')).toBeUndefined();
  });

  it('claims nothing when the install id cannot be read', async () => {
    const calls: string[] = [];
    const outbox = withMessageIds(outboxOf([aRow('1')], calls), async () => {
      throw new StoreError('no install id');
    });

    await expect(outbox.claim({ batchSize: 1, leaseMs: 1 })).rejects.toThrow('no install id');
    expect(calls).toEqual([]);
  });

  it('leaves rows read any other way without one', () => {
    expect(claimedMessageId(aRow('1'))).toBeUndefined();
  });
});
