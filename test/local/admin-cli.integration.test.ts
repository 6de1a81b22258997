/**
 * The operator commands of the `queuebox` CLI as real processes against a real PostgreSQL (fresh schema): stats,
 * outbox/inbox list|show|requeue, outbox replay, purge; JSON output, exit codes, and progress on stderr — plain
 * lines through a pipe, one line updated in place on a terminal (a pseudo-terminal from `script`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { delimiter, dirname, join } from 'node:path';
import { MessageState, type RowId, type Store, type Table } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, requireServices, useSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, REPO_ROOT, runQueueBoxCli, tempDir } from './support.ts';

const needs = await requireServices('queuebox admin cli tests', ['postgres']);
const hasScript = spawnSync('script', ['--version']).status === 0;
if (!hasScript)
  console.info('[queuebox admin cli tests] terminal progress skipped: no `script` command (util-linux)');

const HOUR_MS = 3_600_000;

afterAll(async () => {
  await cleanup();
});

describe.skipIf(needs.skipReason)('queuebox admin commands (PostgreSQL)', () => {
  const pool = new pg.Pool({ connectionString: needs.url.postgres, max: 2 });
  const schema = useSchema('local_admin_cli', {
    drop: async (name) => {
      const client = new pg.Client(needs.url.postgres);
      await client.connect();
      try {
        await client.query(dropPostgresSchemaStatement(name).text);
      } finally {
        await client.end();
      }
    },
  });
  let store: Store;
  let cwd: string;
  const env = () => ({ QUEUEBOX_DATABASE__URL: needs.url.postgres, QUEUEBOX_DATABASE__SCHEMA: schema.name });
  const cli = (...args: string[]) => runQueueBoxCli(args, { cwd, env: env() });
  const json = (stdout: string) => JSON.parse(stdout) as Record<string, unknown>;

  beforeAll(async () => {
    cwd = await tempDir();
    store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 2 });
    await store.migrate();
  });
  afterEach(async () => {
    await pool.query(`DELETE FROM "${schema.name}".outbox; DELETE FROM "${schema.name}".inbox`);
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
  });

  async function outboxRows(count: number, state: 'pending' | 'sent' | 'dead', topic = 'orders.paid') {
    const ids = await store.outbox.insert(
      Array.from({ length: count }, (_, i) => ({ topic, payload: { i }, maxAttempts: 3 })),
    );
    if (state === 'pending') return ids;
    const claimed = (await store.outbox.claim({ batchSize: 1000, leaseMs: 60_000 })).map((r) => ({
      id: r.id,
      claimToken: r.claimToken ?? '',
    }));
    await store.outbox.release(claimed.filter((c) => !ids.includes(c.id)));
    const mine = claimed.filter((c) => ids.includes(c.id));
    if (state === 'sent') await store.outbox.markSent(mine.map((c) => ({ ...c, destination: 'billing' })));
    else await store.outbox.markDead(mine.map((c) => ({ ...c, reason: 'HTTP 410 Gone', attempted: true })));
    return ids;
  }

  async function backdate(table: Table, ids: readonly RowId[], ms: number) {
    await pool.query(
      `UPDATE "${schema.name}".${table} SET updated_at = updated_at - $2::float8 * interval '1 millisecond'
       WHERE id = ANY($1::bigint[])`,
      [ids, ms],
    );
  }

  it('stats: counts per state literal, dead rows per topic and source (JSON and text)', async () => {
    await outboxRows(2, 'dead');
    await outboxRows(1, 'sent');
    await store.inbox.storeDead(
      { source: 'orders-in', idempotencyKey: 'k1', payload: {}, maxAttempts: 3 },
      'not JSON',
    );

    const asJson = await cli('stats', '--json');
    const asText = await cli('stats');

    expect(asJson.code, asJson.stderr).toBe(0);
    expect(json(asJson.stdout)).toEqual({
      ok: true,
      stats: {
        outbox: {
          counts: { pending: 0, processing: 0, sent: 1, dead: 2, failed: 0 },
          oldestPendingAgeMs: null,
          deadByTopic: { 'orders.paid': 2 },
        },
        inbox: {
          counts: { pending: 0, processing: 0, processed: 0, dead: 1, failed: 0 },
          oldestPendingAgeMs: null,
          deadBySource: { 'orders-in': 1 },
        },
      },
    });
    expect(asText.code).toBe(0);
    expect(asText.stdout).toContain('outbox: 0 pending, 0 processing, 1 sent, 2 dead, 0 failed');
    expect(asText.stdout).toContain('dead by topic: orders.paid 2');
  });

  it('outbox list pages with --limit and --cursor; outbox show prints one row, or exits 1', async () => {
    const dead = await outboxRows(3, 'dead');
    await outboxRows(1, 'dead', 'orders.created');

    const first = await cli(
      'outbox',
      'list',
      '--state',
      'dead',
      '--topic',
      'orders.paid',
      '--limit',
      '2',
      '--json',
    );
    const { rows, nextCursor } = json(first.stdout) as {
      rows: { id: string; state: string }[];
      nextCursor: string;
    };
    const second = await cli(
      'outbox',
      'list',
      '--state=dead',
      '--topic=orders.paid',
      '--limit=2',
      `--cursor=${nextCursor}`,
    );
    const shown = await cli('outbox', 'show', dead[0] as string, '--json');
    const missing = await cli('outbox', 'show', '999999999');

    expect(first.code, first.stderr).toBe(0);
    expect(rows.map((r) => [r.id, r.state])).toEqual([
      [dead[0], 'dead'],
      [dead[1], 'dead'],
    ]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.split('\n')[0]).toMatch(/^ID\s+STATE\s+ATTEMPT\s+TOPIC/);
    expect(second.stdout).toMatch(new RegExp(`^${dead[2]}\\s+dead\\s+1/3\\s+orders\\.paid\\s`, 'm'));
    expect(second.stderr).toBe('');
    expect(json(shown.stdout)).toMatchObject({
      ok: true,
      row: { id: dead[0], state: 'dead', lastError: 'HTTP 410 Gone' },
    });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('No outbox row 999999999.');
  });

  it('outbox requeue: a dry run changes nothing; --all requeues in batches with plain progress lines', async () => {
    const ids = await outboxRows(5, 'dead');

    const dry = await cli('outbox', 'requeue', '--topic', 'orders.paid', '--dry-run', '--json');
    const counts = await pool.query(
      `SELECT state, count(*)::int AS n FROM "${schema.name}".outbox GROUP BY state`,
    );
    const run = await cli('outbox', 'requeue', '--all', '--batch-size', '2');

    expect(json(dry.stdout)).toEqual({ ok: true, dryRun: true, count: 5, ids });
    expect(counts.rows).toEqual([{ state: 'dead', n: 5 }]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('requeued 2/5 outbox rows\nrequeued 4/5 outbox rows\nrequeued 5/5 outbox rows\n');
    expect(run.stdout).toBe(
      'Requeued 5 dead outbox rows in all; 0 dead outbox rows left in the selection.\n',
    );
    const claimed = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    expect(claimed.map((r) => [r.id, r.attempt])).toEqual(ids.map((id) => [id, 0]));
  });

  it('outbox requeue of a row that is not dead exits 1 and says why', async () => {
    const [pending] = (await outboxRows(1, 'pending')) as [RowId];
    const [dead] = (await outboxRows(1, 'dead')) as [RowId];

    const result = await cli('outbox', 'requeue', dead, pending, '--json');

    expect(result.code).toBe(1);
    expect(json(result.stdout)).toEqual({
      ok: false,
      error: 'not_dead',
      count: 1,
      ids: [dead],
      skipped: [{ id: pending, state: 'pending' }],
    });
    expect((await store.outbox.get(dead))?.state).toBe(MessageState.Pending);
  });

  /** Key `key`'s first row dead (one failed attempt), its second claimed: being delivered. */
  async function deadBehindProcessing(key: string): Promise<{ dead: RowId; processing: RowId }> {
    const [dead, processing] = (await store.outbox.insert([
      { topic: 'orders.paid', key, payload: { n: 1 }, maxAttempts: 3 },
      { topic: 'orders.paid', key, payload: { n: 2 }, maxAttempts: 3 },
    ])) as [RowId, RowId];
    const [head] = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    if (head?.id !== dead) throw new Error(`claimed ${head?.id}, not the head ${dead}`);
    await store.outbox.markDead([
      { id: head.id, claimToken: head.claimToken ?? '', reason: 'HTTP 500', attempted: true },
    ]);
    const [next] = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    if (next?.id !== processing) throw new Error(`claimed ${next?.id}, not ${processing}`);
    return { dead, processing };
  }

  it('outbox requeue <id> of a row whose key has a later row processing exits 1 and says why', async () => {
    const { dead, processing } = await deadBehindProcessing('Q');

    const asText = await cli('outbox', 'requeue', dead);
    const asJson = await cli('outbox', 'requeue', dead, '--json');

    expect(asText.code).toBe(1);
    expect(asText.stderr).toBe(
      `Requeued 0 dead outbox rows.\nOutbox row ${dead} stays dead: row ${processing} of its key "Q" is being delivered (processing), and a requeued row would be claimed beside it. Try again when that row settles.\n`,
    );
    expect(asJson.code).toBe(1);
    expect(json(asJson.stdout)).toEqual({
      ok: false,
      error: 'key_in_flight',
      count: 0,
      ids: [],
      skipped: [{ id: dead, state: 'dead', reason: 'key_in_flight', key: 'Q', processingId: processing }],
    });
    expect((await store.outbox.get(dead))?.state).toBe(MessageState.Dead);
  });

  it('outbox requeue --topic leaves rows whose key is busy dead and says how many and why', async () => {
    const { dead, processing } = await deadBehindProcessing('Q');
    const [other] = (await outboxRows(1, 'dead')) as [RowId];

    const dry = await cli('outbox', 'requeue', '--topic', 'orders.paid', '--dry-run', '--json');
    const run = await cli('outbox', 'requeue', '--topic', 'orders.paid');

    expect(json(dry.stdout)).toEqual({
      ok: true,
      dryRun: true,
      count: 1,
      ids: [other],
      skipped: {
        reason: 'key_in_flight',
        count: 1,
        message:
          '1 dead row stays dead: it shares its key with a row being delivered (processing), and requeued it would be claimed beside that row. Requeue again when that row settles',
        rows: [{ id: dead, key: 'Q', processingId: processing }],
      },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(
      `Requeued 1 dead outbox row in all; 1 dead outbox row left in the selection.\n1 dead row stays dead: it shares its key with a row being delivered (processing), and requeued it would be claimed beside that row. Requeue again when that row settles. Left dead: ${dead} (key "Q", row ${processing} processing).\n`,
    );
    expect((await store.outbox.get(dead))?.state).toBe(MessageState.Dead);
    expect((await store.outbox.get(other))?.state).toBe(MessageState.Pending);
  });

  it('outbox replay copies a sent row as a new pending row; a dead row exits 1', async () => {
    const [sent] = (await outboxRows(1, 'sent')) as [RowId];
    const [dead] = (await outboxRows(1, 'dead')) as [RowId];

    const replayed = await cli('outbox', 'replay', sent, '--json');
    const refused = await cli('outbox', 'replay', dead);

    expect(replayed.code, replayed.stderr).toBe(0);
    const { id } = json(replayed.stdout) as { id: RowId };
    expect(json(replayed.stdout)).toEqual({ ok: true, id, replayOf: sent });
    expect(await store.outbox.get(id)).toMatchObject({ state: MessageState.Pending, topic: 'orders.paid' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`Outbox row ${dead} is dead: only sent rows are replayed.`);
  });

  it('inbox list, show and requeue by source', async () => {
    const stored = await store.inbox.storeDead(
      { source: 'github', idempotencyKey: 'gh-1', payload: { a: 1 }, maxAttempts: 3 },
      'not JSON',
    );
    await store.inbox.storeDead(
      { source: 'stripe', idempotencyKey: 'st-1', payload: {}, maxAttempts: 3 },
      'x',
    );

    const listed = await cli('inbox', 'list', '--source', 'github', '--state', 'dead', '--json');
    const shown = await cli('inbox', 'show', stored.id);
    const requeued = await cli('inbox', 'requeue', '--source', 'github');

    expect((json(listed.stdout).rows as { id: string }[]).map((r) => r.id)).toEqual([stored.id]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: stored.id, source: 'github', state: 'dead' });
    expect(requeued.code, requeued.stderr).toBe(0);
    expect(requeued.stdout).toBe(
      'Requeued 1 dead inbox row in all; 0 dead inbox rows left in the selection.\n',
    );
    expect((await store.inbox.get(stored.id))?.state).toBe(MessageState.Pending);
  });

  it('purge deletes rows older than --older-than in batches and keeps the younger ones', async () => {
    const old = await outboxRows(3, 'sent');
    const [young] = (await outboxRows(1, 'sent')) as [RowId];
    await backdate('outbox', old, 2 * HOUR_MS);

    const result = await cli(
      'purge',
      '--state',
      'sent',
      '--older-than',
      '1h',
      '--table',
      'outbox',
      '--batch-size',
      '2',
    );

    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('purged 2 sent outbox rows\npurged 3 sent outbox rows\n');
    expect(result.stdout).toBe('Purged 3 outbox rows older than 1h.\n');
    for (const id of old) expect(await store.outbox.get(id)).toBeUndefined();
    expect((await store.outbox.get(young))?.state).toBe(MessageState.Sent);
  });

  it('exits 2 on bad usage, before touching the database', async () => {
    const wrongOption = await runQueueBoxCli(['outbox', 'list', '--source', 'x'], { cwd });
    const noSelection = await runQueueBoxCli(['inbox', 'requeue'], { cwd });
    const noUnit = await runQueueBoxCli(['purge', '--state', 'dead', '--older-than', '5'], { cwd });

    expect([wrongOption.code, noSelection.code, noUnit.code]).toEqual([2, 2, 2]);
    expect(wrongOption.stderr).toContain('--source does not apply to "outbox list"');
    expect(noSelection.stderr).toContain('"inbox requeue" needs row ids, --source <name>, or --all');
    expect(noUnit.stderr).toContain('--older-than takes a number and a unit');
  });

  it('refuses, with exit 2 and nothing changed, a selection that is two at once, an empty topic and an age past 100 years', async () => {
    const dead = await outboxRows(2, 'dead');
    await outboxRows(1, 'dead', 'orders.created');
    await backdate('outbox', dead, 2 * HOUR_MS);

    const idsAndAll = await cli('outbox', 'requeue', dead[0] as string, '--all');
    const topicAndAll = await cli('outbox', 'requeue', '--topic', 'orders.paid', '--all');
    const emptyTopic = await cli('outbox', 'requeue', '--topic', '');
    // Once `StoreError … timestamp out of range` (exit 1) and "must be at least 1h".
    const ages = await Promise.all(
      ['3000000d', '999999999999d'].map((age) => cli('purge', '--state', 'dead', '--older-than', age)),
    );

    expect([idsAndAll, topicAndAll, emptyTopic, ...ages].map((r) => r.code)).toEqual([2, 2, 2, 2, 2]);
    expect(idsAndAll.stderr).toContain('not row ids and --all together');
    expect(topicAndAll.stderr).toContain('not --topic and --all together');
    expect(emptyTopic.stderr).toContain('--topic must be a text of 1 to 400 characters, not empty');
    for (const age of ages) expect(age.stderr).toContain('--older-than must be at most 36500d (100 years)');
    const stats = json((await cli('stats', '--json')).stdout) as { stats: { outbox: { counts: unknown } } };
    expect(stats.stats.outbox.counts).toMatchObject({ pending: 0, dead: 3 });
  });

  it.runIf(hasScript)('on a terminal, bulk progress is one line updated in place', async () => {
    await outboxRows(3, 'dead');
    // The installed `queuebox` bin itself: its shebang (`#!/usr/bin/env node`) finds the repository's Node first on PATH.
    const bin = join(REPO_ROOT, 'node_modules', '.bin', 'queuebox');
    const command = `${bin} outbox requeue --all --batch-size 1`;

    // `script` runs the command on a pseudo-terminal, so stderr is a TTY; what it shows comes back on stdout.
    const shown = await new Promise<{ code: number | null; screen: string }>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        cwd,
        env: {
          ...process.env,
          ...env(),
          PATH: [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let screen = '';
      child.stdout.setEncoding('utf8').on('data', (text: string) => {
        screen += text;
      });
      child.on('exit', (code) => resolve({ code, screen }));
    });

    expect(shown.code, shown.screen).toBe(0);
    const [progress, ...after] = shown.screen.split('\r\n');
    expect(progress).toBe(
      ['requeued 1/3 outbox rows', 'requeued 2/3 outbox rows', 'requeued 3/3 outbox rows']
        .map((line) => `\r\x1b[2K${line}`)
        .join(''),
    );
    expect(after.join('\n')).toBe(
      'Requeued 3 dead outbox rows in all; 0 dead outbox rows left in the selection.\n',
    );
  });

  const deadCount = async () =>
    (
      await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema.name}".outbox WHERE state = 'dead'`,
      )
    ).rows[0]?.n;

  // An outside audit saw `purge --state dead` delete 14,183 dead rows at once, the only copy of undelivered
  // webhooks, with no way to see the count first (`--dry-run` was refused).
  it('needs --yes, counts with --dry-run (per table, deleting nothing), and deletes with --yes', async () => {
    // Prepare: 3 dead outbox rows two hours old, 1 dead a moment ago, 1 dead inbox row two hours old.
    const ids = (await store.outbox.insert(
      Array.from({ length: 4 }, (_, i) => ({ topic: 'orders.paid', payload: { i }, maxAttempts: 3 })),
    )) as RowId[];
    await pool.query(`UPDATE "${schema.name}".outbox SET state = 'dead', last_error = 'HTTP 503'`);
    await pool.query(
      `UPDATE "${schema.name}".outbox SET updated_at = updated_at - interval '2 hours' WHERE id = ANY ($1::bigint[])`,
      [ids.slice(0, 3)],
    );
    await store.inbox.storeDead({ source: 'pay', idempotencyKey: 'k1', payload: {}, maxAttempts: 3 }, 'x');
    await pool.query(`UPDATE "${schema.name}".inbox SET updated_at = updated_at - interval '2 hours'`);

    // Act
    const refused = await cli('purge', '--state', 'dead', '--older-than', '1h');
    const counted = await cli('purge', '--state', 'dead', '--older-than', '1h', '--dry-run', '--json');
    const countedText = await cli(
      'purge',
      '--state',
      'dead',
      '--older-than',
      '1h',
      '--table',
      'outbox',
      '--dry-run',
    );
    const afterDryRuns = await deadCount();
    const purged = await cli('purge', '--state', 'dead', '--older-than', '1h', '--table', 'outbox', '--yes');

    // Assess
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      '"purge --state dead" deletes dead rows, the only copy of messages that were never delivered: add --yes to delete them (every dead outbox and inbox row older than 1h), or --dry-run to count them first',
    );
    expect(counted.code, counted.stderr).toBe(0);
    expect(JSON.parse(counted.stdout)).toEqual({
      ok: true,
      dryRun: true,
      state: 'dead',
      olderThanMs: 3_600_000,
      wouldDelete: { outbox: 3, inbox: 1 },
    });
    expect(countedText.stdout).toBe(
      'Would purge 3 dead outbox rows older than 1h (it needs --yes); nothing was deleted.\n',
    );
    expect(afterDryRuns).toBe(4);
    expect(purged.code, purged.stderr).toBe(0);
    expect(purged.stdout).toBe('Purged 3 outbox rows older than 1h.\n');
    expect(await deadCount()).toBe(1);
  });
});
