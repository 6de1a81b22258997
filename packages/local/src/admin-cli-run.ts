/**
 * Running a checked admin plan (admin-cli.ts) on a store: the text an operator reads and the JSON a script reads.
 * Rows and stats are shown as `@queuebox/admin` shows them over HTTP.
 */
import {
  BulkConflictError,
  busyMessage,
  busyView,
  forwardedRowsNote,
  inboxRowView,
  keyBusyMessage,
  keyInFlightMessage,
  outboxRowView,
  purgeCounterOf,
  type RequeueBusy,
  type RequeueSkipped,
  redactNotFinalMessage,
  replayKeyBusyMessage,
  requeueBusy,
  requeueConflictMessage,
  requeueSkipped,
  retryTransientConflicts,
  skippedMessage,
  skippedView,
  stateWord,
  statsView,
} from '@queuebox/admin';
import type {
  AdminStats,
  InboxRow,
  MessageState,
  OutboxRow,
  RequeueResult,
  RowId,
  Store,
  Table,
} from '@queuebox/core';
import { type AdminPlan, formatAge, purgeDedupWarning } from './admin-cli.ts';
import { printable } from './terminal-text.ts';

/** Where an admin command writes. */
export interface AdminOutput {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  /** Whether stderr is a terminal: progress is then one line updated in place. Default false. */
  readonly isTTY?: boolean;
  /** Machine-readable output on stdout. */
  readonly json: boolean;
}

/**
 * Progress of a long command on stderr: on a terminal one line rewritten in place (and ended when done); else
 * one plain line per step, unless the output is JSON (then a script reads stdout and needs no chatter).
 */
export function createProgress(output: Pick<AdminOutput, 'err' | 'isTTY' | 'json'>) {
  let open = false;
  return {
    update(text: string): void {
      if (output.isTTY === true) {
        output.err(`\r\x1b[2K${text}`);
        open = true;
      } else if (!output.json) output.err(`${text}\n`);
    },
    done(): void {
      if (open) output.err('\n');
      open = false;
    },
  };
}

/** A row as the admin API shows it: the stored literal for its state, times as ISO text. */
function rowJson(table: Table, row: OutboxRow | InboxRow): unknown {
  return table === 'outbox' ? outboxRowView(row as OutboxRow) : inboxRowView(row as InboxRow);
}

function statsText(stats: AdminStats): string {
  const lines: string[] = [];
  for (const table of ['outbox', 'inbox'] as const) {
    const s = stats[table];
    const counts = Object.entries(s.counts)
      .map(([state, n]) => `${n} ${stateWord(table, state as MessageState)}`)
      .join(', ');
    const age =
      s.oldestPendingAgeMs === null
        ? 'no pending row is due'
        : `oldest due row waiting ${formatAge(s.oldestPendingAgeMs)}`;
    lines.push(`${table}: ${counts}; ${age}`);
    const dead = table === 'outbox' ? stats.outbox.deadByTopic : stats.inbox.deadBySource;
    const groups = Object.entries(dead).map(([name, n]) => `${printable(name)} ${n}`);
    if (groups.length > 0)
      lines.push(`  dead by ${table === 'outbox' ? 'topic' : 'source'}: ${groups.join(', ')}`);
  }
  return `${lines.join('\n')}\n`;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function clip(text: string | null, width = 60): string {
  if (text === null) return '';
  const line = printable(text.replace(/\s+/g, ' '));
  return line.length > width ? `${line.slice(0, width - 1)}…` : line;
}

/** One table cell: on one line, controls shown as escapes (a line feed would break the table). */
function cell(text: string | null): string {
  return text === null ? '' : printable(text);
}

function listText(t: Table, rows: readonly (OutboxRow | InboxRow)[]): string {
  const header =
    t === 'outbox'
      ? ['ID', 'STATE', 'ATTEMPT', 'TOPIC', 'KEY', 'UPDATED', 'LAST ERROR']
      : ['ID', 'STATE', 'ATTEMPT', 'SOURCE', 'EVENT TYPE', 'RECEIVED', 'LAST ERROR'];
  const body = rows.map((row) => {
    const common = [row.id, stateWord(t, row.state), `${row.attempt}/${row.maxAttempts}`];
    return 'topic' in row
      ? [...common, cell(row.topic), cell(row.key), row.updatedAt.toISOString(), clip(row.lastError)]
      : [...common, cell(row.source), cell(row.eventType), row.receivedAt.toISOString(), clip(row.lastError)];
  });
  return `${table([header, ...body])}\n`;
}

/**
 * Runs a checked plan on `store` and answers the exit code: 0 done, 1 when what was asked did not happen (a row
 * that does not exist, is not dead, is not sent, is not final for a redact). Store errors reject; the caller reports them (exit 1).
 */
export async function runAdminCommand(
  store: Pick<Store, 'admin' | 'outbox' | 'inbox'>,
  plan: AdminPlan,
  output: AdminOutput,
): Promise<number> {
  const { out, err, json } = output;
  // Text output carries what senders chose (event types, topics, keys, errors): controls are shown, never obeyed.
  const print = (value: unknown, text: string) =>
    out(
      json ? `${JSON.stringify({ ok: true, ...(value as object) })}\n` : printable(text, { keepLines: true }),
    );
  const fail = (value: Record<string, unknown>, text: string) => {
    if (json) out(`${JSON.stringify({ ok: false, ...value })}\n`);
    else err(`${printable(text, { keepLines: true })}\n`);
    return 1;
  };
  const getRow = (t: Table, id: RowId) => (t === 'outbox' ? store.outbox.get(id) : store.inbox.get(id));

  switch (plan.kind) {
    case 'stats': {
      const stats = await store.admin.stats();
      print({ stats: statsView(stats) }, statsText(stats));
      return 0;
    }
    case 'list': {
      const page =
        plan.table === 'outbox'
          ? await store.admin.list('outbox', plan.options)
          : await store.admin.list('inbox', plan.options);
      const rows = page.rows as readonly (OutboxRow | InboxRow)[];
      print(
        { rows: rows.map((r) => rowJson(plan.table, r)), nextCursor: page.nextCursor },
        rows.length === 0 ? `No ${plan.table} rows match.\n` : listText(plan.table, rows),
      );
      if (!json && page.nextCursor !== null) err(`More rows: add --cursor ${page.nextCursor}\n`);
      return 0;
    }
    case 'show': {
      const row = await getRow(plan.table, plan.id);
      if (row === undefined)
        return fail({ error: 'row_not_found', id: plan.id }, `No ${plan.table} row ${plan.id}.`);
      const view = rowJson(plan.table, row);
      print({ row: view }, `${JSON.stringify(view, null, 2)}\n`);
      return 0;
    }
    case 'requeue':
      return requeue(store, plan, output, fail);
    case 'replay': {
      const result = await store.admin.replay(plan.id);
      if (result.status === 'replayed') {
        print(
          { id: result.id, replayOf: plan.id },
          `Replayed outbox row ${plan.id} as new pending row ${result.id}.\n`,
        );
        return 0;
      }
      if (result.status === 'not_found') {
        return fail({ error: 'row_not_found', id: plan.id }, `No outbox row ${plan.id}.`);
      }
      if (result.status === 'key_busy') {
        return fail(
          { error: 'key_busy', id: plan.id, key: result.key },
          `${replayKeyBusyMessage(plan.id, result.key)}.`,
        );
      }
      const state = stateWord('outbox', result.state);
      return fail(
        { error: 'not_sent', id: plan.id, state },
        `Outbox row ${plan.id} is ${state}: only sent rows are replayed.`,
      );
    }
    case 'redact': {
      const { table: t, id } = plan;
      const result = await store.admin.redact(t, id);
      if (result.status === 'not_found') {
        return fail({ error: 'row_not_found', id }, `No ${t} row ${id}.`);
      }
      if (result.status === 'not_final') {
        const state = stateWord(t, result.state);
        return fail({ error: 'not_final', id, state }, `${redactNotFinalMessage(t, id, result.state)}.`);
      }
      // The outbox rows forwarded from an inbox row are not looked for (no index finds them): the answer says so.
      const note = t === 'inbox' ? forwardedRowsNote(id) : undefined;
      print(
        { status: 'redacted', id, ...(note === undefined ? {} : { note }) },
        `Redacted ${t} row ${id}: payload null, headers {}, ${
          t === 'inbox' ? 'last error, aggregate id and correlation id' : 'last error'
        } cleared.\n`,
      );
      if (!json && note !== undefined) err(`note: ${note}.\n`);
      return 0;
    }
    case 'purge': {
      if (plan.dryRun) return purgeDryRun(store, plan, output, print, fail);
      const progress = createProgress(output);
      const deleted: Partial<Record<Table, number>> = {};
      const word = plan.state === 'Dead' ? 'dead' : undefined;
      for (const t of plan.tables) {
        const label = word ?? stateWord(t, 'Sent');
        let n = 0;
        for (let more = true; more; ) {
          const batch = await store.admin.purge({
            table: t,
            state: plan.state,
            olderThanMs: plan.olderThanMs,
            batchSize: plan.batchSize,
          });
          n += batch;
          more = batch === plan.batchSize;
          if (batch > 0) progress.update(`purged ${n} ${label} ${t} rows`);
        }
        deleted[t] = n;
      }
      progress.done();
      const summary = plan.tables.map((t) => `${deleted[t]} ${t}`).join(', ');
      // Processed inbox rows are the inbox's deduplication memory: deleting young ones reopens provider retries.
      const warnings = plan.tables.flatMap(
        (t) => purgeDedupWarning(t, plan.state, plan.olderThanMs, deleted[t] ?? 0) ?? [],
      );
      print(
        {
          state: plan.state === 'Dead' ? 'dead' : 'sent',
          olderThanMs: plan.olderThanMs,
          deleted,
          ...(warnings.length > 0 ? { warnings } : {}),
        },
        `Purged ${summary} rows older than ${formatAge(plan.olderThanMs)}.\n`,
      );
      if (!json) for (const warning of warnings) err(`warning: ${warning}\n`);
      return 0;
    }
  }
}

/**
 * Most row ids a requeue lists in its output (`ids`; JSON `idsOmitted` counts the rest): a run of 20,000 rows printed
 * every id, 166 KB on one line of JSON (an outside audit). `count` covers them all.
 */
export const CLI_REPORTED_IDS = 100;

/** `ids` as a requeue's JSON shows them: the first {@link CLI_REPORTED_IDS}, and how many were left out. */
function idsView(ids: readonly RowId[]): { ids: RowId[]; idsOmitted?: number } {
  const shown = ids.slice(0, CLI_REPORTED_IDS);
  return ids.length > shown.length ? { ids: shown, idsOmitted: ids.length - shown.length } : { ids: shown };
}

/** `n` rows, for a sentence: `1 dead outbox row`, `2 dead outbox rows`. */
function deadRowsText(n: number, t: Table): string {
  return `${n} dead ${t} row${n === 1 ? '' : 's'}`;
}

/**
 * `purge --dry-run`: what the purge would delete, counted per table (`countPurge`, see `@queuebox/admin`'s
 * `purgeCounterOf`); nothing is deleted. Exit 1 on a store that cannot count one.
 */
async function purgeDryRun(
  store: Pick<Store, 'admin'>,
  plan: Extract<AdminPlan, { kind: 'purge' }>,
  output: AdminOutput,
  print: (value: unknown, text: string) => void,
  fail: (value: Record<string, unknown>, text: string) => number,
): Promise<number> {
  const counter = purgeCounterOf(store.admin);
  if (counter === undefined) {
    return fail(
      { error: 'dry_run_unavailable' },
      'This store cannot count what a purge would delete (purge --dry-run runs on PostgreSQL and PGlite); nothing was deleted.',
    );
  }
  const state = plan.state === 'Dead' ? 'dead' : 'sent';
  const wouldDelete: Partial<Record<Table, number>> = {};
  for (const t of plan.tables) {
    wouldDelete[t] = await counter.countPurge({ table: t, state: plan.state, olderThanMs: plan.olderThanMs });
  }
  const rows = plan.tables.map((t) => {
    const n = wouldDelete[t] ?? 0;
    return `${n} ${plan.state === 'Dead' ? 'dead' : stateWord(t, 'Sent')} ${t} row${n === 1 ? '' : 's'}`;
  });
  const deletes = plan.state === 'Dead' ? ' (it needs --yes)' : '';
  print(
    { dryRun: true, state, olderThanMs: plan.olderThanMs, wouldDelete },
    `Would purge ${rows.join(' and ')} older than ${formatAge(plan.olderThanMs)}${deletes}; nothing was deleted.\n`,
  );
  if (!output.json) {
    const warnings = plan.tables.flatMap(
      (t) => purgeDedupWarning(t, plan.state, plan.olderThanMs, wouldDelete[t] ?? 0, true) ?? [],
    );
    for (const warning of warnings) output.err(`warning: ${warning}\n`);
  }
  return 0;
}

/** The rows a requeue left dead for `key_in_flight`, for the terminal: why, then which (the first of them). */
function skippedText(skipped: RequeueSkipped, table: Table): string {
  const what = table === 'outbox' ? 'key' : 'aggregate id';
  const rows = skipped.rows.map(
    (r) => `${r.id} (${what} ${JSON.stringify(r.key)}, row ${r.processingId} processing)`,
  );
  return `${skippedMessage(skipped, table)}. Left dead: ${rows.join(', ')}${skipped.count > rows.length ? ', …' : ''}.`;
}

/** The rows a requeue left dead for `key_busy`, for the terminal: why, then which (the first of them). */
function busyText(busy: RequeueBusy): string {
  const rows = busy.rows.map((r) => `${r.id} (key ${JSON.stringify(r.key)})`);
  return `${busyMessage(busy)}. Left dead: ${rows.join(', ')}${busy.count > rows.length ? ', …' : ''}.`;
}

async function requeue(
  store: Pick<Store, 'admin' | 'outbox' | 'inbox'>,
  plan: Extract<AdminPlan, { kind: 'requeue' }>,
  output: AdminOutput,
  fail: (value: Record<string, unknown>, text: string) => number,
): Promise<number> {
  const { out, json } = output;
  const { table: t, selection } = plan;
  // Keys and ids come from senders: the text is shown with controls escaped, never obeyed.
  const say = (value: Record<string, unknown>, text: string) =>
    out(json ? `${JSON.stringify({ ok: true, ...value })}\n` : printable(text, { keepLines: true }));
  // A batch the database ended for a conflict (a deadlock with deliveries) rolled back whole: tried again.
  const dryRun = () =>
    retryTransientConflicts(() =>
      store.admin.requeue(t, selection, { dryRun: true, batchSize: plan.batchSize }),
    );
  // The dead rows of the selection: with --all the table's, counted at once (`deadRows`); else those a requeue may
  // take now and those whose key is in flight, two statements (a key that settles between them may count twice or
  // not at all while deliveries run).
  const everyRow =
    selection.ids === undefined && selection.topic === undefined && selection.source === undefined;
  const deadLeft = async () => {
    if (everyRow) return retryTransientConflicts(() => store.admin.deadRows(t));
    const now = await dryRun();
    return now.count + (requeueSkipped(now)?.count ?? 0);
  };
  const preview = await dryRun();
  if (plan.dryRun) {
    const ids = preview.ids.slice(0, CLI_REPORTED_IDS);
    const shown = ids.length < preview.count ? `first ${ids.length}: ` : '';
    const skipped = requeueSkipped(preview);
    say(
      {
        dryRun: true,
        count: preview.count,
        ...idsView(preview.ids),
        ...(skipped === undefined ? {} : { skipped: skippedView(skipped, t) }),
      },
      `Would requeue ${deadRowsText(preview.count, t)}${preview.count > 0 ? ` (${shown}${ids.join(', ')})` : ''}.\n${
        skipped === undefined ? '' : `${skippedText(skipped, t)}\n`
      }`,
    );
    return 0;
  }
  const progress = createProgress(output);
  const requeued: RowId[] = [];
  let last: RequeueResult;
  // Until the last batch, or one that requeued nothing: the next would choose the same rows (their keys busy, or
  // in flight since it chose them), so the run stops there, with that batch's report and `more` as it says.
  for (;;) {
    try {
      last = await retryTransientConflicts(() =>
        store.admin.requeue(t, selection, { batchSize: plan.batchSize }),
      );
    } catch (error) {
      if (!(error instanceof BulkConflictError)) throw error;
      progress.done();
      // Not an outage: the database answers, a batch kept meeting other transactions. What the run requeued
      // before stays requeued; the output says how many, and how many are still dead.
      const left = await deadLeft().catch(() => undefined);
      const message = requeueConflictMessage(t, error.tries, requeued.length);
      return fail(
        {
          error: 'requeue_conflict',
          message,
          count: requeued.length,
          ...idsView(requeued),
          ...(left === undefined ? {} : { deadLeft: left }),
        },
        `${message}.${left === undefined ? '' : ` ${deadRowsText(left, t)} left in the selection.`}`,
      );
    }
    requeued.push(...last.ids);
    // A last, empty batch (the one before was exactly full) has nothing new to show.
    if (last.count > 0) {
      progress.update(`requeued ${requeued.length}/${Math.max(preview.count, requeued.length)} ${t} rows`);
    }
    if (!last.more || last.count === 0) break;
  }
  progress.done();
  // What the last batch left dead: a later batch chooses an earlier one's rows again, so its report stands.
  const inFlight = requeueSkipped(last);
  const busy = requeueBusy(last);
  const done = new Set(requeued);
  const inFlightRows = new Map((inFlight?.rows ?? []).map((row) => [row.id, row]));
  const busyRows = new Map((busy?.rows ?? []).map((row) => [row.id, row]));
  const notDead: { id: RowId; state: string | null }[] = [];
  const leftInFlight: {
    id: RowId;
    state: 'dead';
    reason: 'key_in_flight';
    key: string;
    processingId: RowId;
  }[] = [];
  const leftBusy: { id: RowId; state: 'dead'; reason: 'key_busy'; key: string }[] = [];
  // Dead rows the run did not reach: it stopped at a batch that requeued nothing, before their batch.
  const notReached: { id: RowId; state: 'dead'; reason: 'not_reached' }[] = [];
  for (const id of selection.ids ?? []) {
    if (done.has(id)) continue;
    const inFlightRow = inFlightRows.get(id);
    if (inFlightRow !== undefined) {
      leftInFlight.push({
        id,
        state: 'dead',
        reason: 'key_in_flight',
        key: inFlightRow.key,
        processingId: inFlightRow.processingId,
      });
      continue;
    }
    const busyRow = busyRows.get(id);
    if (busyRow !== undefined) {
      leftBusy.push({ id, state: 'dead', reason: 'key_busy', key: busyRow.key });
      continue;
    }
    const current = t === 'outbox' ? await store.outbox.get(id) : await store.inbox.get(id);
    if (last.more && current?.state === 'Dead') notReached.push({ id, state: 'dead', reason: 'not_reached' });
    else notDead.push({ id, state: current === undefined ? null : stateWord(t, current.state) });
  }
  const summary = `Requeued ${requeued.length} dead ${t} row${requeued.length === 1 ? '' : 's'}.`;
  if (notDead.length + leftInFlight.length + leftBusy.length + notReached.length > 0) {
    const why = notDead.map((s) => (s.state === null ? `${s.id} does not exist` : `${s.id} is ${s.state}`));
    const lines = [
      notDead.length > 0 ? `${summary} Not requeued (only dead rows are): ${why.join('; ')}.` : summary,
      ...leftInFlight.map((row) => `${keyInFlightMessage(row, t)}.`),
      ...leftBusy.map((row) => `${keyBusyMessage(row)}.`),
      ...(notReached.length > 0
        ? [
            `Not reached, still dead: ${notReached.map((row) => row.id).join(', ')} (the run stopped at a batch that requeued none of the rows it chose). Run the command again in a moment.`,
          ]
        : []),
    ];
    const error =
      notDead.length > 0
        ? 'not_dead'
        : leftInFlight.length > 0
          ? 'key_in_flight'
          : leftBusy.length > 0
            ? 'key_busy'
            : 'not_reached';
    return fail(
      {
        error,
        count: requeued.length,
        ...idsView(requeued),
        skipped: [...notDead, ...leftInFlight, ...leftBusy, ...notReached],
      },
      lines.join('\n'),
    );
  }
  // Requeued by topic, source or --all: rows whose key is in flight or busy stay dead, and the answer says how many
  // and why; a run that stopped at a batch that requeued nothing while rows remain says so too.
  const leftDead = selection.ids === undefined ? inFlight : undefined;
  const leftBusyKeys = selection.ids === undefined ? busy : undefined;
  const stopped = selection.ids === undefined && last.more;
  // The run's total, and what is still dead in the selection at its end (the reports above are the last batch's).
  const left = selection.ids === undefined ? await deadLeft() : undefined;
  say(
    {
      dryRun: false,
      count: requeued.length,
      ...idsView(requeued),
      ...(left === undefined ? {} : { deadLeft: left }),
      ...(leftDead === undefined ? {} : { skipped: skippedView(leftDead, t) }),
      ...(leftBusyKeys === undefined ? {} : { keyBusy: busyView(leftBusyKeys) }),
      ...(stopped ? { more: true } : {}),
    },
    [
      left === undefined
        ? summary
        : `${summary.slice(0, -1)} in all; ${deadRowsText(left, t)} left in the selection.`,
      ...(leftDead === undefined ? [] : [skippedText(leftDead, t)]),
      ...(leftBusyKeys === undefined ? [] : [busyText(leftBusyKeys)]),
      ...(stopped
        ? [
            `Stopped at a batch that requeued none of the rows it chose; more dead ${t} rows may remain: run the command again in a moment.`,
          ]
        : []),
      '',
    ].join('\n'),
  );
  return 0;
}
