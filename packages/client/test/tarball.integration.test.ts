/**
 * @queuebox/client as an application gets it: scripts/pack.ts packs it into a tarball, a scratch application in a
 * temporary folder outside the repository installs that tarball and `pg` with npm (from the registry), and the
 * application's own JavaScript — run by node, with nothing of the workspace on its module path — enqueues in a
 * real PostgreSQL transaction and pulls an inbox row. Its TypeScript is type-checked against the tarball's
 * declarations.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { npm, pack } from '../../../scripts/pack.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const CLIENT = join(ROOT, 'packages/client');
const SOURCE = 'invoices';

const needs = await requireServices('client tarball', ['postgres']);

/** The versions the workspace itself runs, so the application gets the same drivers. */
function workspaceVersion(name: string): string {
  return (
    JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }
  ).version;
}

/** The application: a business write and an enqueue in one transaction, committed and rolled back; one pull. */
const APP_JS = `
import { ConfigError, QueueBoxError, StoreError, enqueue, openPullWorker } from '@queuebox/client';
import pg from 'pg';

const [url, schema, source] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: 1 });

async function placeOrder(orderId, outcome) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(\`INSERT INTO "\${schema}".orders (id) VALUES ($1)\`, [orderId]);
    const id = await enqueue(
      client,
      { topic: 'orders.created', key: orderId, payload: { orderId }, headers: { 'x-app': 'scratch' } },
      { schema },
    );
    await client.query(outcome);
    return id;
  } finally {
    client.release();
  }
}

const committed = await placeOrder('order-1', 'COMMIT');
const rolledBack = await placeOrder('order-2', 'ROLLBACK');

// The error classes come from the client itself (core is bundled inside it, out of the application's reach).
const client = await pool.connect();
await client.query('BEGIN');
const storeError = await enqueue(client, { topic: 't', payload: 1 }, { schema: 'qb_never_migrated' }).catch((e) => e);
await client.query('ROLLBACK');
client.release();
const configError = await openPullWorker({ url, schema: 'not a schema', source }).catch((e) => e);
const errors = [storeError instanceof StoreError, configError instanceof ConfigError, configError instanceof QueueBoxError];
await pool.end();

const worker = await openPullWorker({ url, schema, source, poolSize: 1 });
const claimed = await worker.claim(10, 60_000);
for (const row of claimed) await worker.markProcessed(row);
await worker.close();

console.log(JSON.stringify({ committed, rolledBack, errors, pulled: claimed.map((row) => [row.id, row.payload]) }));
`;

/**
 * An application on postgres.js, with no `pg` installed: the README's recipe (a query function from the
 * transaction's tagged template) must not load pg, which only the pull worker's PostgreSQL URL needs.
 */
const APP_NO_PG_JS = `
import { enqueue, notifyOutbox, sqlTemplate } from '@queuebox/client';
import postgres from 'postgres';

const [url, schema] = process.argv.slice(2);
const pg = await import('pg').then(() => 'installed', () => 'absent');
const sql = postgres(url, { max: 1, onnotice() {} });
const id = await sql.begin(async (tx) => {
  const query = sqlTemplate((strings, ...values) => tx(strings, ...values));
  const id = await enqueue(query, { topic: 'orders.created', key: 'order-3', payload: { orderId: 'order-3' } }, { schema });
  await notifyOutbox(query, { schema });
  return id;
});
await sql.end();
console.log(JSON.stringify({ pg, id }));
`;

/** Type-checked only: the declarations must carry real types (the expected error proves they are not `any`). */
const APP_TS = `
import {
  ClaimLostError,
  createOutboxWaker,
  enqueue,
  type EnqueueMessage,
  notifyOutbox,
  openPullWorker,
  type RetryOutcome,
  sqlTemplate,
  StoreUnavailableError,
} from '@queuebox/client';
import type pg from 'pg';

export async function placeOrder(client: pg.PoolClient, orderId: string): Promise<string> {
  const message: EnqueueMessage = { topic: 'orders.created', key: orderId, payload: { orderId } };
  // @ts-expect-error a topic is a string
  const wrong: EnqueueMessage = { topic: 42, payload: {} };
  void wrong;
  // @ts-expect-error a number is no transaction (were EnqueueTransaction any, this would be no error)
  void enqueue(42, message);
  return enqueue(client, message);
}

// A query function as the README's recipes write it: its parameters' types come from enqueue (strict: no implicit any).
export async function viaQueryFunction(run: (text: string, values: unknown[]) => Promise<unknown[]>): Promise<string> {
  const id = await enqueue({ query: (text, values) => run(text.trim(), values.slice()) }, { topic: 't', payload: {} });
  await notifyOutbox(sqlTemplate((strings, ...values) => run(strings.join('?'), values)));
  return id;
}

export async function work(handle: (payload: unknown) => Promise<void>): Promise<RetryOutcome[]> {
  const worker = await openPullWorker({ url: 'postgres://db/app', source: 'invoices' });
  const outcomes: RetryOutcome[] = [];
  for (const row of await worker.claim(10, 60_000)) {
    try {
      await handle(row.payload);
      await worker.markProcessed(row);
    } catch (error) {
      if (error instanceof ClaimLostError) continue;
      if (error instanceof StoreUnavailableError) throw error;
      outcomes.push(await worker.retry(row, 30_000, String(error)));
    }
  }
  await worker.close();
  await createOutboxWaker({ functionName: 'outbox-tick', lambda: { region: 'eu-west-1' } }).wake();
  return outcomes;
}
`;

/** SQL Server's types against the declarations (with `@types/mssql`, as the strict check has it). */
const APP_MSSQL_TS = `
import { enqueue } from '@queuebox/client';
import type mssql from 'mssql';

export async function placeOrderOnSqlServer(tx: mssql.Transaction): Promise<string> {
  return enqueue(tx, { topic: 'orders.created', payload: {} });
}
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  },
  files: ['app.ts'],
};

/**
 * The same check with `skipLibCheck: false`, as the README promises it works with `@types/mssql` added (and
 * `@types/node`): the declarations must not name what the application does not install — the AWS SDK, JSONata,
 * PGlite — nor any other module that is not there.
 */
const STRICT_TSCONFIG = {
  compilerOptions: { ...TSCONFIG.compilerOptions, skipLibCheck: false, types: ['node'] },
  files: ['app.ts', 'app-mssql.ts'],
};

describe.skipIf(needs.skipReason)('the @queuebox/client tarball', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'client_tarball', 2);
  const scratch = mkdtempSync(join(tmpdir(), 'queuebox-client-app-'));
  const app = join(scratch, 'app');
  let tarball = '';
  let store: Store | undefined;

  beforeAll(async () => {
    store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 2 });
    await store.migrate();
    await pool.query(`CREATE TABLE "${schema.name}".orders (id text PRIMARY KEY)`);

    tarball = pack(CLIENT, join(scratch, 'tarballs'));
    mkdirSync(app, { recursive: true });
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }),
    );
    writeFileSync(join(app, 'app.mjs'), APP_JS);
    writeFileSync(join(app, 'app.ts'), APP_TS);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG));
    writeFileSync(join(app, 'tsconfig.strict.json'), JSON.stringify(STRICT_TSCONFIG));
    writeFileSync(join(app, 'app-mssql.ts'), APP_MSSQL_TS);
    // An application on postgres.js, without pg.
    const noPg = join(scratch, 'no-pg');
    mkdirSync(noPg, { recursive: true });
    writeFileSync(
      join(noPg, 'package.json'),
      JSON.stringify({ name: 'scratch-app-no-pg', private: true, type: 'module' }),
    );
    writeFileSync(join(noPg, 'app.mjs'), APP_NO_PG_JS);
    npm(['install', tarball, `postgres@${workspaceVersion('postgres')}`, '--no-audit', '--no-fund'], noPg);
    // A second application, as on PostgreSQL without SQL Server's types.
    const noMssql = join(scratch, 'no-mssql');
    mkdirSync(noMssql, { recursive: true });
    writeFileSync(
      join(noMssql, 'package.json'),
      JSON.stringify({ name: 'scratch-app-no-mssql', private: true, type: 'module' }),
    );
    writeFileSync(join(noMssql, 'app.ts'), APP_TS);
    writeFileSync(join(noMssql, 'tsconfig.json'), JSON.stringify(TSCONFIG));
    npm(
      [
        'install',
        tarball,
        `pg@${workspaceVersion('pg')}`,
        `@types/pg@${workspaceVersion('@types/pg')}`,
        '--no-audit',
        '--no-fund',
      ],
      noMssql,
    );
    npm(
      [
        'install',
        tarball,
        `pg@${workspaceVersion('pg')}`,
        `@types/pg@${workspaceVersion('@types/pg')}`,
        `@types/mssql@${workspaceVersion('@types/mssql')}`,
        `@types/node@${workspaceVersion('@types/node')}`,
        '--no-audit',
        '--no-fund',
      ],
      app,
    );
  }, 300_000);

  afterAll(async () => {
    await store?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('holds compiled JavaScript, declarations, the README and the QueueBox packages it needs — no TypeScript source', () => {
    // Act
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
    const manifest = JSON.parse(
      readFileSync(join(app, 'node_modules/@queuebox/client/package.json'), 'utf8'),
    );

    // Assess
    expect(files).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/README.md',
        'package/dist/index.js',
        'package/dist/index.d.ts',
        'package/node_modules/@queuebox/core/dist/index.js',
        'package/node_modules/@queuebox/store-postgres/dist/outbox-key-lock.js',
      ]),
    );
    expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
    expect(manifest.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' });
    expect(manifest.private).toBeUndefined();
    expect(manifest.bundleDependencies).toContain('@queuebox/core');
    expect(manifest.peerDependencies).toMatchObject({ pg: expect.any(String), mssql: expect.any(String) });
  });

  it('installs cleanly: npm finds nothing missing or invalid in the application', () => {
    expect(() => npm(['ls', '--all'], app)).not.toThrow();
  });

  it("enqueues in the application's transaction: the row commits with the business write, a rolled-back one never exists", async () => {
    // Prepare: a pull-source row for the application's worker.
    const stored = await store?.inbox.store({
      source: SOURCE,
      idempotencyKey: 'inv-1',
      eventType: 'invoice.paid',
      aggregateId: 'inv-1',
      correlationId: null,
      payload: { invoice: 1 },
      headers: {},
      maxAttempts: 3,
    });

    // Act
    const output = execFileSync(process.execPath, ['app.mjs', needs.url.postgres, schema.name, SOURCE], {
      cwd: app,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 60_000,
    });
    const result = JSON.parse(output) as {
      committed: string;
      rolledBack: string;
      errors: boolean[];
      pulled: [string, unknown][];
    };

    // Assess
    const outbox = await pool.query(
      `SELECT id::text AS id, topic, key, payload, headers, state FROM "${schema.name}".outbox ORDER BY id`,
    );
    expect(outbox.rows).toEqual([
      {
        id: result.committed,
        topic: 'orders.created',
        key: 'order-1',
        payload: { orderId: 'order-1' },
        headers: { 'x-app': 'scratch' },
        state: 'pending',
      },
    ]);
    expect(result.rolledBack).not.toBe(result.committed);
    expect(result.errors).toEqual([true, true, true]);
    const orders = await pool.query(`SELECT id FROM "${schema.name}".orders`);
    expect(orders.rows).toEqual([{ id: 'order-1' }]);
    expect(result.pulled).toEqual([[stored?.id, { invoice: 1 }]]);
    const inbox = await pool.query(`SELECT state FROM "${schema.name}".inbox WHERE id = $1`, [stored?.id]);
    expect(inbox.rows).toEqual([{ state: 'processed' }]);
  });

  it('enqueues through a query function in an application without pg installed (postgres.js)', async () => {
    // Act
    const output = execFileSync(process.execPath, ['app.mjs', needs.url.postgres, schema.name], {
      cwd: join(scratch, 'no-pg'),
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 60_000,
    });
    const result = JSON.parse(output) as { pg: string; id: string };

    // Assess
    expect(result.pg).toBe('absent');
    const outbox = await pool.query(`SELECT key FROM "${schema.name}".outbox WHERE id = $1`, [result.id]);
    expect(outbox.rows).toEqual([{ key: 'order-3' }]);
  });

  it.each([
    ['skipLibCheck: true', 'tsconfig.json'],
    ['skipLibCheck: false', 'tsconfig.strict.json'],
    // The README's default on PostgreSQL: no @types/mssql, so `mssql` resolves to nothing. A declaration that named
    // mssql's types turned EnqueueTransaction into `any` unseen; app.ts's @ts-expect-error on a number given as the
    // transaction fails the check then.
    ['skipLibCheck: true, no @types/mssql', 'tsconfig.json', 'no-mssql'],
  ])(
    "type-checks the application's TypeScript against the tarball's declarations (%s)",
    (_name, config, folder = 'app') => {
      const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');

      const checked = spawnSync(process.execPath, [tsc, '-p', join(scratch, folder, config)], {
        encoding: 'utf8',
      });

      expect({ status: checked.status, output: checked.stdout + checked.stderr }).toEqual({
        status: 0,
        output: '',
      });
    },
  );
});
