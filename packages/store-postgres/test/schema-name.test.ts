import { ConfigError } from '@queuebox/core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { insertInboxStatement } from '../src/inbox-dedupe.ts';
import { forwardInboxStatement } from '../src/inbox-sql.ts';
import { createPgExecutor, createPostgresStore, quoteSchema, runMigrations } from '../src/index.ts';
import { insertOutboxStatement, markOutboxSentStatement } from '../src/outbox-sql.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';

/**
 * A pool that must never connect: these checks run before any statement (`.invalid` resolves nowhere, and the unit
 * lane's guard fails the file on any connection attempt).
 */
function neverConnectedPool(max: number): pg.Pool {
  return new pg.Pool({ connectionString: 'postgres://nobody@never-connected.invalid/none', max });
}

const HOSTILE = [
  '',
  'queuebox"; DROP TABLE outbox; --',
  'a"b',
  'a b',
  'a.b',
  '1queuebox',
  'queue-box',
  'schéma',
  'x'.repeat(64),
  'queuebox\n',
  // Reserved by PostgreSQL (PGlite accepted them) and left out of pg_dump (an outside audit).
  'pg_x',
  'pg_toast',
  'information_schema',
  'INFORMATION_SCHEMA',
];

describe('schema names', () => {
  it.each(HOSTILE)('refuses %j with a ConfigError on database.schema', (name) => {
    const error = (() => {
      try {
        quoteSchema(name);
      } catch (e) {
        return e;
      }
    })();

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues[0]?.path).toBe('database.schema');
  });

  it('quotes valid names and keeps their case', () => {
    expect(quoteSchema('queuebox')).toBe('"queuebox"');
    expect(quoteSchema('Tenant_42')).toBe('"Tenant_42"');
    expect(quoteSchema(`_${'x'.repeat(62)}`)).toBe(`"_${'x'.repeat(62)}"`);
  });

  it('is checked when a store is created, before any statement', async () => {
    const pool = neverConnectedPool(1);
    const executor = createPgExecutor(pool);
    try {
      expect(() => createPostgresStore({ executor, schema: 'x"; DROP SCHEMA public; --' })).toThrow(
        ConfigError,
      );
      expect(pool.totalCount).toBe(0);
    } finally {
      await executor.close();
    }
  });

  it('is checked by the migrator, which sends nothing for an invalid name', async () => {
    const executor = createPgExecutor(neverConnectedPool(1));
    try {
      await expect(runMigrations(executor, { schema: 'bad name' })).rejects.toBeInstanceOf(ConfigError);
    } finally {
      await executor.close();
    }
  });
});

describe('statements', () => {
  const hostile = `x'); DROP TABLE outbox; --`;

  it('carry every value as a parameter, never in the text', () => {
    const statements = [
      insertOutboxStatement('queuebox', [
        anOutboxMessage({ topic: hostile, key: hostile, payload: hostile }),
      ]),
      insertInboxStatement(
        'queuebox',
        anInboxMessage({ source: hostile, idempotencyKey: hostile }),
        'dead',
        hostile,
      ),
      markOutboxSentStatement('queuebox', [{ id: '1', claimToken: hostile, destination: hostile }]),
      forwardInboxStatement('queuebox', [
        {
          id: '1',
          claimToken: hostile,
          outbox: anOutboxMessage({ topic: hostile, headers: { h: hostile } }),
        },
      ]),
    ];

    for (const { text, values } of statements) {
      expect(text).not.toContain('DROP');
      expect(JSON.stringify(values)).toContain('DROP TABLE outbox');
    }
  });

  it('send payloads as JSON text, so a string payload stays a JSON string', () => {
    const { values } = insertOutboxStatement('queuebox', [anOutboxMessage({ payload: 'plain text' })]);

    expect(values[2]).toEqual(['"plain text"']);
  });
});
