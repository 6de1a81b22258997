/**
 * The operator commands of the `queuebox` CLI over core's `AdminStore`: `stats`, `outbox list|show|requeue|replay`,
 * `inbox list|show|requeue`, `purge`. Arguments are checked before the store opens (`planAdminCommand`, pure), so a
 * usage error never needs the database; `runAdminCommand` then runs the plan.
 */

import { PURGE_MIN_AGE_MS } from '@queuebox/admin';
import {
  ADMIN_LIST_MAX_LIMIT,
  ADMIN_MAX_BATCH_SIZE,
  type AdminListOptions,
  type AdminStats,
  type InboxRow,
  type MessageState,
  type OutboxRow,
  type RequeueSelection,
  type RowId,
  STATE_LITERALS,
  type Store,
  type StoredState,
  type Table,
} from '@queuebox/core';
import { printable } from './terminal-text.ts';

/** The words that start an admin command. */
export const ADMIN_COMMANDS: ReadonlySet<string> = new Set(['stats', 'outbox', 'inbox', 'purge']);

/** Default rows of `list`. */
export const CLI_LIST_LIMIT = 50;

/** Default rows per statement of bulk `requeue` and `purge`. */
export const CLI_BATCH_SIZE = 500;

/** The command line of an admin command, as commands.ts parsed it. */
export interface AdminArgs {
  /** The command words and positional arguments, e.g. `['outbox', 'requeue', '41', '42']`. */
  readonly words: readonly string[];
  /** `--name value` options by name without dashes (`state`, `older-than`, …). */
  readonly options: Readonly<Record<string, string>>;
  /** `--dry-run`, `--all`. */
  readonly flags: ReadonlySet<string>;
}

/** What an admin command will do, checked. */
export type AdminPlan =
  | { readonly kind: 'stats' }
  | { readonly kind: 'list'; readonly table: Table; readonly options: AdminListOptions }
  | { readonly kind: 'show'; readonly table: Table; readonly id: RowId }
  | {
      readonly kind: 'requeue';
      readonly table: Table;
      readonly selection: RequeueSelection;
      readonly dryRun: boolean;
      readonly batchSize: number;
    }
  | { readonly kind: 'replay'; readonly id: RowId }
  | {
      readonly kind: 'purge';
      readonly tables: readonly Table[];
      readonly state: 'Sent' | 'Dead';
      readonly olderThanMs: number;
      readonly batchSize: number;
    };

const ROW_ID = /^[1-9][0-9]{0,18}$/;
const DURATION = /^([0-9]{1,12})(ms|s|m|h|d)$/;
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A usage problem: the message for stderr (exit 2). */
class Usage {
  readonly message: string;
  constructor(message: string) {
    this.message = message;
  }
}

function usage(message: string): never {
  throw new Usage(message);
}

function rowId(word: string | undefined, what: string): RowId {
  if (word === undefined || !ROW_ID.test(word) || BigInt(word) > 9223372036854775807n) {
    return usage(
      `${what} needs a row id (a positive whole number)${word === undefined ? '' : `, not "${word}"`}`,
    );
  }
  return word;
}

function wholeNumber(value: string, name: string, max: number): number {
  const n = /^[0-9]{1,6}$/.test(value) ? Number(value) : Number.NaN;
  if (n >= 1 && n <= max) return n;
  return usage(`--${name} must be a whole number from 1 to ${max}, not "${value}"`);
}

/** A state word of `table` (its literal, or `failed`), in any case. */
export function stateOfWord(table: Table, word: string): MessageState | undefined {
  const lower = word.toLowerCase();
  if (lower === 'failed') return 'Failed';
  const literals = STATE_LITERALS[table];
  return (Object.keys(literals) as StoredState[]).find((state) => literals[state] === lower);
}

/** The word for `state` on `table`: its literal, or `failed`. */
export function wordOfState(table: Table, state: MessageState): string {
  return state === 'Failed' ? 'failed' : STATE_LITERALS[table][state];
}

/** `7d`, `12h`, `30m`, `45s`, `500ms` in milliseconds. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * (UNIT_MS[match[2] as string] as number);
}

/** Refuses options the command does not take. */
function only(
  args: AdminArgs,
  command: string,
  options: readonly string[],
  flags: readonly string[] = [],
): void {
  for (const name of Object.keys(args.options)) {
    if (!options.includes(name)) usage(`--${name} does not apply to "${command}"`);
  }
  for (const name of args.flags) {
    if (!flags.includes(name)) usage(`--${name} does not apply to "${command}"`);
  }
}

/** Checks an admin command line; answers the plan, or the usage problem as a string. */
export function planAdminCommand(args: AdminArgs): AdminPlan | string {
  try {
    return plan(args);
  } catch (error) {
    if (error instanceof Usage) return error.message;
    throw error;
  }
}

function plan(args: AdminArgs): AdminPlan {
  const [first, second, ...rest] = args.words;
  const { options } = args;
  if (first === 'stats') {
    if (second !== undefined) usage('"stats" takes no arguments');
    only(args, 'stats', []);
    return { kind: 'stats' };
  }
  if (first === 'purge') {
    if (second !== undefined)
      usage('"purge" takes no arguments; name the rows with --state and --older-than');
    only(args, 'purge', ['state', 'older-than', 'table', 'batch-size']);
    const word = options.state?.toLowerCase();
    if (word === undefined) usage('"purge" needs --state sent|processed|dead');
    const state = word === 'sent' || word === 'processed' ? 'Sent' : word === 'dead' ? 'Dead' : undefined;
    if (state === undefined) usage(`--state of "purge" is sent, processed or dead, not "${options.state}"`);
    const age = options['older-than'];
    if (age === undefined) usage('"purge" needs --older-than, e.g. 7d, 12h, 30m');
    const olderThanMs = parseDuration(age);
    if (olderThanMs === undefined)
      usage(`--older-than takes a number and a unit (ms, s, m, h, d), not "${age}"`);
    // A typo such as 0ms or 7s would delete rows an operator is still looking at, dead rows above all.
    if (olderThanMs < PURGE_MIN_AGE_MS) {
      usage(`--older-than must be at least ${formatAge(PURGE_MIN_AGE_MS)}, not "${age}"`);
    }
    const table = options.table;
    if (table !== undefined && table !== 'outbox' && table !== 'inbox') {
      usage(`--table is outbox or inbox, not "${table}"`);
    }
    return {
      kind: 'purge',
      tables: table === undefined ? ['outbox', 'inbox'] : [table],
      state,
      olderThanMs,
      batchSize: batchSizeOf(args),
    };
  }
  if (first !== 'outbox' && first !== 'inbox') return usage(`unknown command "${args.words.join(' ')}"`);
  const table: Table = first;
  const filter = table === 'outbox' ? 'topic' : 'source';
  const command = `${table} ${second ?? ''}`.trim();
  switch (second) {
    case 'list': {
      if (rest.length > 0) usage(`"${command}" takes no arguments; filter with --state, --${filter}`);
      only(args, command, ['state', filter, 'cursor', 'limit']);
      const listOptions: AdminListOptions = {
        limit:
          options.limit === undefined
            ? CLI_LIST_LIMIT
            : wholeNumber(options.limit, 'limit', ADMIN_LIST_MAX_LIMIT),
        ...(options.state === undefined ? {} : { state: stateOf(table, options.state) }),
        ...(options.cursor === undefined ? {} : { cursor: rowId(options.cursor, '--cursor') }),
        ...(options.topic === undefined || table !== 'outbox' ? {} : { topic: options.topic }),
        ...(options.source === undefined || table !== 'inbox' ? {} : { source: options.source }),
      };
      return { kind: 'list', table, options: listOptions };
    }
    case 'show': {
      only(args, command, []);
      if (rest.length !== 1) usage(`"${command}" takes one row id`);
      return { kind: 'show', table, id: rowId(rest[0], `"${command}"`) };
    }
    case 'requeue': {
      only(args, command, [filter, 'batch-size'], ['all', 'dry-run']);
      const ids = rest.map((word) => rowId(word, `"${command}"`));
      const name = options[filter];
      if (ids.length === 0 && name === undefined && !args.flags.has('all')) {
        usage(`"${command}" needs row ids, --${filter} <name>, or --all for every dead ${table} row`);
      }
      const selection: RequeueSelection = {
        ...(ids.length === 0 ? {} : { ids: [...new Set(ids)] }),
        ...(name === undefined ? {} : table === 'outbox' ? { topic: name } : { source: name }),
      };
      return {
        kind: 'requeue',
        table,
        selection,
        dryRun: args.flags.has('dry-run'),
        batchSize: batchSizeOf(args),
      };
    }
    case 'replay': {
      if (table === 'inbox') usage('"inbox replay" does not exist: only sent outbox rows are replayed');
      only(args, command, []);
      if (rest.length !== 1) usage('"outbox replay" takes one row id');
      return { kind: 'replay', id: rowId(rest[0], '"outbox replay"') };
    }
    default:
      return usage(
        `unknown command "${args.words.join(' ')}": use ${table} list|show|requeue${table === 'outbox' ? '|replay' : ''}`,
      );
  }
}

function stateOf(table: Table, word: string): MessageState {
  const state = stateOfWord(table, word);
  if (state === undefined) {
    usage(`--state of ${table} is one of ${[...Object.values(STATE_LITERALS[table]), 'failed'].join(', ')}`);
  }
  return state;
}

function batchSizeOf(args: AdminArgs): number {
  const value = args.options['batch-size'];
  return value === undefined ? CLI_BATCH_SIZE : wholeNumber(value, 'batch-size', ADMIN_MAX_BATCH_SIZE);
}

// ---------------------------------------------------------------------------------------------------------------
// Running a plan

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

/** A row as JSON: the stored literal for its state, times as ISO text (by JSON.stringify). */
function rowJson(table: Table, row: OutboxRow | InboxRow): Record<string, unknown> {
  return { ...row, state: wordOfState(table, row.state) };
}

/** `65_000` → `1m 5s`. */
export function formatAge(ms: number): string {
  const s = Math.floor(ms / 1000);
  const parts = [
    [Math.floor(s / 86_400), 'd'],
    [Math.floor((s % 86_400) / 3600), 'h'],
    [Math.floor((s % 3600) / 60), 'm'],
    [s % 60, 's'],
  ] as const;
  const shown = parts.filter(([n]) => n > 0).map(([n, unit]) => `${n}${unit}`);
  return shown.length > 0 ? shown.join(' ') : `${ms}ms`;
}

/** Counts keyed by the table's literals (`processed` on the inbox, `failed` for unknown literals), as the API. */
function statsJson(stats: AdminStats): Record<string, unknown> {
  const counts = (t: Table) =>
    Object.fromEntries(
      Object.entries(stats[t].counts).map(([state, n]) => [wordOfState(t, state as MessageState), n]),
    );
  return {
    outbox: { ...stats.outbox, counts: counts('outbox') },
    inbox: { ...stats.inbox, counts: counts('inbox') },
  };
}

function statsText(stats: AdminStats): string {
  const lines: string[] = [];
  for (const table of ['outbox', 'inbox'] as const) {
    const s = stats[table];
    const counts = Object.entries(s.counts)
      .map(([state, n]) => `${n} ${wordOfState(table, state as MessageState)}`)
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
    const common = [row.id, wordOfState(t, row.state), `${row.attempt}/${row.maxAttempts}`];
    return 'topic' in row
      ? [...common, cell(row.topic), cell(row.key), row.updatedAt.toISOString(), clip(row.lastError)]
      : [...common, cell(row.source), cell(row.eventType), row.receivedAt.toISOString(), clip(row.lastError)];
  });
  return `${table([header, ...body])}\n`;
}

/**
 * Runs a checked plan on `store` and answers the exit code: 0 done, 1 when what was asked did not happen (a row
 * that does not exist, is not dead, is not sent). Store errors reject; the caller reports them (exit 1).
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
      print({ stats: statsJson(stats) }, statsText(stats));
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
      const state = wordOfState('outbox', result.state);
      return fail(
        { error: 'not_sent', id: plan.id, state },
        `Outbox row ${plan.id} is ${state}: only sent rows are replayed.`,
      );
    }
    case 'purge': {
      const progress = createProgress(output);
      const deleted: Partial<Record<Table, number>> = {};
      const word = plan.state === 'Dead' ? 'dead' : undefined;
      for (const t of plan.tables) {
        const label = word ?? wordOfState(t, 'Sent');
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
      print(
        { state: plan.state === 'Dead' ? 'dead' : 'sent', olderThanMs: plan.olderThanMs, deleted },
        `Purged ${summary} rows older than ${formatAge(plan.olderThanMs)}.\n`,
      );
      return 0;
    }
  }
}

async function requeue(
  store: Pick<Store, 'admin' | 'outbox' | 'inbox'>,
  plan: Extract<AdminPlan, { kind: 'requeue' }>,
  output: AdminOutput,
  fail: (value: Record<string, unknown>, text: string) => number,
): Promise<number> {
  const { out, json } = output;
  const { table: t, selection } = plan;
  const preview = await store.admin.requeue(t, selection, { dryRun: true, batchSize: plan.batchSize });
  if (plan.dryRun) {
    const shown = preview.ids.length < preview.count ? `first ${preview.ids.length}: ` : '';
    out(
      json
        ? `${JSON.stringify({ ok: true, dryRun: true, count: preview.count, ids: preview.ids })}\n`
        : `Would requeue ${preview.count} dead ${t} row${preview.count === 1 ? '' : 's'}${
            preview.count > 0 ? ` (${shown}${preview.ids.join(', ')})` : ''
          }.\n`,
    );
    return 0;
  }
  const progress = createProgress(output);
  const requeued: RowId[] = [];
  for (let more = true; more; ) {
    const batch = await store.admin.requeue(t, selection, { batchSize: plan.batchSize });
    requeued.push(...batch.ids);
    more = batch.more && batch.count > 0;
    // A last, empty batch (the one before was exactly full) has nothing new to show.
    if (batch.count > 0) {
      progress.update(`requeued ${requeued.length}/${Math.max(preview.count, requeued.length)} ${t} rows`);
    }
  }
  progress.done();
  const done = new Set(requeued);
  const skipped: { id: RowId; state: string | null }[] = [];
  for (const id of selection.ids ?? []) {
    if (done.has(id)) continue;
    const row = t === 'outbox' ? await store.outbox.get(id) : await store.inbox.get(id);
    skipped.push({ id, state: row === undefined ? null : wordOfState(t, row.state) });
  }
  const summary = `Requeued ${requeued.length} dead ${t} row${requeued.length === 1 ? '' : 's'}.`;
  if (skipped.length > 0) {
    const why = skipped.map((s) => (s.state === null ? `${s.id} does not exist` : `${s.id} is ${s.state}`));
    return fail(
      { error: 'not_dead', count: requeued.length, ids: requeued, skipped },
      `${summary} Not requeued (only dead rows are): ${why.join('; ')}.`,
    );
  }
  out(
    json
      ? `${JSON.stringify({ ok: true, dryRun: false, count: requeued.length, ids: requeued })}\n`
      : `${summary}\n`,
  );
  return 0;
}
