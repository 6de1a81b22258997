import { errorFields } from '@queuebox/core';
import { terminalSafeJson } from './terminal-text.ts';

/** Log levels, most verbose first (the configuration's `logLevel`). */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Fields of one log line: ids, names and counts. Never a secret or a credential. */
export type LogFields = Readonly<Record<string, unknown>>;

/**
 * A structured logger: one JSON object per line, `{"time","level","msg",...fields}`. Its shape is the one the
 * outbox package's `OutboxLogger` expects, so it is passed to the poller as it is.
 */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (e.g. `{ component: 'relay' }`). */
  child(fields: LogFields): Logger;
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Lines below this level are dropped. Default `info`. */
  readonly level?: LogLevel;
  /** Where each line goes (without the newline). Default: written to stdout with a newline. */
  readonly write?: (line: string) => void;
  /** Default `() => new Date()`. */
  readonly now?: () => Date;
}

function toJsonSafe(value: unknown): unknown {
  if (value instanceof Error) return errorFields(value);
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** Creates the JSON-lines logger of the local runtime. */
export function createLogger(options: LoggerOptions = {}, base: LogFields = {}): Logger {
  const min = RANK[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? (() => new Date());

  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (RANK[level] < min) return;
    const record: Record<string, unknown> = { time: now().toISOString(), level, msg };
    for (const [key, value] of Object.entries({ ...base, ...fields })) {
      if (value !== undefined && !(key in record)) record[key] = toJsonSafe(value);
    }
    let line: string;
    try {
      line = JSON.stringify(record, (_key, value: unknown) => toJsonSafe(value));
    } catch {
      line = JSON.stringify({ time: record.time, level, msg, logError: 'fields were not serializable' });
    }
    // Log lines reach terminals (`npm start`) and carry what senders chose: event types, sources, errors.
    write(terminalSafeJson(line));
  };

  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (fields) => createLogger(options, { ...base, ...fields }),
  };
}
