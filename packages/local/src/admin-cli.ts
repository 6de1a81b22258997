/**
 * The operator commands of the `queuebox` CLI over core's `AdminStore`: `stats`,
 * `outbox list|show|requeue|replay|redact`, `inbox list|show|requeue|redact`, `purge`. Arguments are checked here
 * before the store opens (`planAdminCommand`, pure),
 * so a usage error never needs the database; `runAdminCommand` (admin-cli-run.ts) then runs the plan.
 */

import {
  formatAge,
  isRowId,
  PURGE_MAX_AGE_MS,
  PURGE_MIN_AGE_MS,
  parseAgeMs,
  parseBatchSize,
  parseLimit,
  parseName,
  parsePurgeState,
  parseState,
  parseTable,
  purgeDedupWarning as sharedPurgeDedupWarning,
  stateWords,
} from '@queuebox/admin';
import {
  ADMIN_LIST_MAX_LIMIT,
  ADMIN_MAX_BATCH_SIZE,
  type AdminListOptions,
  HttpError,
  type MessageState,
  type RequeueSelection,
  type RowId,
  type Table,
} from '@queuebox/core';

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
  /** `--dry-run`, `--all`, `--yes`. */
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
  | { readonly kind: 'redact'; readonly table: Table; readonly id: RowId }
  | {
      readonly kind: 'purge';
      readonly tables: readonly Table[];
      readonly state: 'Sent' | 'Dead';
      readonly olderThanMs: number;
      readonly batchSize: number;
      /** `--dry-run`: count what would be deleted, per table, and delete nothing. */
      readonly dryRun: boolean;
    };

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

/**
 * Runs one of `@queuebox/admin`'s input checks (the HTTP admin API's own), so both accept the same values; its
 * refusal (a 400) becomes `message`, the CLI's usage line naming the option as typed.
 */
function checked<T>(check: () => T, message: string): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof HttpError && error.status === 400) usage(message);
    throw error;
  }
}

function rowId(word: string | undefined, what: string): RowId {
  if (word === undefined || !isRowId(word)) {
    return usage(
      `${what} needs a row id (a positive whole number)${word === undefined ? '' : `, not "${word}"`}`,
    );
  }
  return word;
}

/** A state word of `table` (its literal, or `failed`), in any case: `@queuebox/admin`'s `parseState`. */
export function stateOfWord(table: Table, word: string): MessageState | undefined {
  try {
    return parseState(table, word);
  } catch (error) {
    if (error instanceof HttpError) return undefined;
    throw error;
  }
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
    only(args, 'purge', ['state', 'older-than', 'table', 'batch-size'], ['dry-run', 'yes']);
    if (options.state === undefined) usage('"purge" needs --state sent|processed|dead');
    const state = checked(
      () => parsePurgeState(options.state),
      `--state of "purge" is sent, processed or dead, not "${options.state}"`,
    );
    const age = options['older-than'];
    if (age === undefined) usage('"purge" needs --older-than, at least 1h, e.g. 7d, 12h, 1h');
    const olderThanMs = parseDuration(age);
    if (olderThanMs === undefined)
      usage(`--older-than takes a number and a unit (ms, s, m, h, d), not "${age}"`);
    // A typo such as 0ms or 7s would delete rows an operator is still looking at, dead rows above all; an age past
    // 100 years is no timestamp the database can subtract (it failed there, exit 1, instead of here).
    checked(
      () => parseAgeMs(olderThanMs),
      olderThanMs > PURGE_MAX_AGE_MS
        ? `--older-than must be at most ${formatAge(PURGE_MAX_AGE_MS)} (100 years), not "${age}"`
        : `--older-than must be at least ${formatAge(PURGE_MIN_AGE_MS)}, not "${age}"`,
    );
    const table = options.table;
    const tables: Table[] =
      table === undefined
        ? ['outbox', 'inbox']
        : [checked(() => parseTable(table), `--table is outbox or inbox, not "${table}"`)];
    const dryRun = args.flags.has('dry-run');
    // Dead rows are the only copy of what was never delivered (a webhook its sender will not send again): a purge
    // deleted 14,183 at once, unasked (an outside audit). It needs --yes; --dry-run counts them first.
    if (state === 'Dead' && !dryRun && !args.flags.has('yes')) {
      usage(
        `"purge --state dead" deletes dead rows, the only copy of messages that were never delivered: add --yes to delete them (${deadPurgeScope(tables, olderThanMs)}), or --dry-run to count them first`,
      );
    }
    return { kind: 'purge', tables, state, olderThanMs, batchSize: batchSizeOf(args), dryRun };
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
            : checked(
                () => parseLimit(options.limit as string),
                `--limit must be a whole number from 1 to ${ADMIN_LIST_MAX_LIMIT}, not "${options.limit}"`,
              ),
        ...(options.state === undefined ? {} : { state: stateOf(table, options.state) }),
        ...(options.cursor === undefined ? {} : { cursor: rowId(options.cursor, '--cursor') }),
        ...(options.topic === undefined || table !== 'outbox'
          ? {}
          : { topic: nameOf('topic', options.topic) }),
        ...(options.source === undefined || table !== 'inbox'
          ? {}
          : { source: nameOf('source', options.source) }),
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
      const given = options[filter];
      const name = given === undefined ? undefined : nameOf(filter, given);
      const all = args.flags.has('all');
      const selections = [ids.length > 0, name !== undefined, all].filter(Boolean).length;
      if (selections === 0) {
        usage(`"${command}" needs row ids, --${filter} <name>, or --all for every dead ${table} row`);
      }
      // Given together, one would narrow the other (or --all would be ignored) without a word: refuse instead.
      if (selections > 1) {
        usage(
          `"${command}" takes one selection: row ids, --${filter} <name>, or --all; not ${[
            ...(ids.length > 0 ? ['row ids'] : []),
            ...(name !== undefined ? [`--${filter}`] : []),
            ...(all ? ['--all'] : []),
          ].join(' and ')} together`,
        );
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
    case 'redact': {
      only(args, command, []);
      if (rest.length !== 1) usage(`"${command}" takes one row id`);
      return { kind: 'redact', table, id: rowId(rest[0], `"${command}"`) };
    }
    default:
      return usage(
        `unknown command "${args.words.join(' ')}": use ${table} list|show|requeue${table === 'outbox' ? '|replay' : ''}|redact`,
      );
  }
}

/** Which dead rows a purge of `tables` older than `olderThanMs` deletes, for its usage line. */
function deadPurgeScope(tables: readonly Table[], olderThanMs: number): string {
  return `every dead ${tables.join(' and ')} row older than ${formatAge(olderThanMs)}`;
}

/** A `--topic` or `--source` value: 1 to 400 characters, as the admin API takes it (`invalid_topic`). */
function nameOf(option: 'topic' | 'source', value: string): string {
  return checked(
    () => parseName(option, value),
    `--${option} must be a text of 1 to 400 characters${value === '' ? ', not empty' : ''}`,
  );
}

function stateOf(table: Table, word: string): MessageState {
  return checked(
    () => parseState(table, word),
    `--state of ${table} is one of ${stateWords(table).join(', ')}`,
  );
}

function batchSizeOf(args: AdminArgs): number {
  const value = args.options['batch-size'];
  if (value === undefined) return CLI_BATCH_SIZE;
  return checked(
    () => parseBatchSize(/^[0-9]{1,6}$/.test(value) ? Number(value) : Number.NaN),
    `--batch-size must be a whole number from 1 to ${ADMIN_MAX_BATCH_SIZE}, not "${value}"`,
  );
}

// In @queuebox/admin, whose `POST /admin/purge` gives the same warning; exported here as before.
export { INBOX_DEDUP_WINDOW_MS } from '@queuebox/admin';
export { formatAge };

/** What `queuebox purge` tells to do instead, in the words of its flags (see {@link purgeDedupWarning}). */
export const CLI_PURGE_DEDUP_REMEDY = '--older-than 72h or more, or --table outbox';

/**
 * The warning of a purge that deleted `deleted` processed or dead inbox rows a provider may still retry, else
 * undefined: `@queuebox/admin`'s text, which `POST /admin/purge` answers too, with the CLI's flags as the remedy.
 */
export function purgeDedupWarning(
  table: Table,
  state: 'Sent' | 'Dead',
  olderThanMs: number,
  deleted: number,
  dryRun = false,
): string | undefined {
  return sharedPurgeDedupWarning(table, state, olderThanMs, deleted, CLI_PURGE_DEDUP_REMEDY, dryRun);
}

export { type AdminOutput, createProgress, runAdminCommand } from './admin-cli-run.ts';
