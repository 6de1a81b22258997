/**
 * A legacy cluster's database in LATIN1: the migrations' text reaches the server converted from the client's UTF-8,
 * and a character LATIN1 lacks (an arrow in a comment of 0004) failed the migration, so QueueBox could not be
 * installed there. The migrations are ASCII; rows hold what LATIN1 holds, and refuse the rest as a value.
 */
import { randomUUID } from 'node:crypto';
import { isValueRefused } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS, openPostgresStore } from '../src/index.ts';

const needs = await requireServices('store-postgres: a LATIN1 database', ['postgres']);

describe('the PostgreSQL migrations', () => {
  it('are ASCII, so a database in any server encoding can take them', () => {
    for (const migration of MIGRATIONS) {
      const beyond = [...migration.sql].filter((c) => (c.codePointAt(0) ?? 0) > 0x7f);
      expect(beyond, migration.name).toEqual([]);
    }
  });
});

describe.skipIf(needs.skipReason)('a database in LATIN1', () => {
  it('migrates, stores what LATIN1 holds, and refuses the rest as a value', async () => {
    const database = `t_pg_latin1_${randomUUID().slice(0, 8)}`;
    const admin = new pg.Client({ connectionString: needs.url.postgres });
    await admin.connect();
    try {
      await admin.query(
        `CREATE DATABASE ${database} ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'`,
      );
      const url = new URL(needs.url.postgres);
      url.pathname = `/${database}`;
      const store = await openPostgresStore({ url: url.toString(), schema: 'queuebox', poolSize: 1 });
      try {
        const report = await store.migrate();
        const [id] = await store.outbox.insert([{ topic: 'café', payload: { name: 'Zoë' }, maxAttempts: 3 }]);
        const refused = await store.outbox
          .insert([{ topic: 'euro', payload: { price: '5 €' }, maxAttempts: 3 }])
          .then(
            () => undefined,
            (error: unknown) => error,
          );

        expect(report.applied.length).toBe(MIGRATIONS.length);
        expect(await store.outbox.get(id as string)).toMatchObject({
          topic: 'café',
          payload: { name: 'Zoë' },
        });
        expect(isValueRefused(refused)).toBe(true);
      } finally {
        await store.close();
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    }
  });
});
