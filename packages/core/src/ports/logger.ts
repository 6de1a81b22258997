import { errorFields } from '../errors.ts';

/** Fields of one log line: ids, names, counts and error fields. Never a secret or a credential. */
export type LogFields = Readonly<Record<string, unknown>>;

/**
 * The structured logger every package writes to: a message and fields, one line each. The local runtime's
 * (`@queuebox/local` `createLogger`) and the Lambda shell's both build on Powertools Logger, so a line has one
 * shape in both places.
 */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (e.g. `{ component: 'relay' }`). */
  child(fields: LogFields): Logger;
}

/** A logger that drops everything: the default of every package that takes one. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};

/** What {@link loggerOver} writes to: leveled `(message, fields)` methods, as Powertools Logger has them. */
export interface LogSink {
  debug(message: string, fields: LogFields): void;
  info(message: string, fields: LogFields): void;
  warn(message: string, fields: LogFields): void;
  error(message: string, fields: LogFields): void;
}

/**
 * The keys Powertools Logger writes itself; a field of one of these names would be dropped with a warning of its
 * own ("is a reserved key"), so {@link loggerOver} writes it as `field_<name>` instead.
 */
const RESERVED_KEYS: readonly string[] = ['level', 'message', 'sampling_rate', 'service', 'timestamp'];

/**
 * `fields` as a line writes them: a reserved key renamed (see {@link RESERVED_KEYS}), and an `error` given as text
 * or as an `Error` written as the object `errorFields` makes (`{ name, message, code? }`; text as `{ message }`), so
 * `error` has one type on every line — a log store that maps it as an object refuses a line where it is text. The
 * same object when nothing changes.
 */
function lineFields(fields: LogFields): LogFields {
  const error = fields.error;
  const textError = typeof error === 'string';
  if (!textError && !(error instanceof Error) && !RESERVED_KEYS.some((key) => key in fields)) return fields;
  const written: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields))
    written[RESERVED_KEYS.includes(key) ? `field_${key}` : key] = value;
  if (textError) written.error = { message: error };
  else if (error instanceof Error) written.error = errorFields(error);
  return written;
}

/**
 * The logger port over a sink (the local runtime's Powertools Logger, the Lambda shell's): every line goes to the
 * same sink instance, so what it adds (Powertools' Lambda context keys) stays on every line, with a child's
 * `base` fields merged under the line's own. A field named as a key the sink writes itself (`message`, `level`,
 * …) is written as `field_<name>`, never dropped; `error` is always an object (see `lineFields`).
 */
export function loggerOver(sink: LogSink, base: LogFields = {}): Logger {
  const line = (fields: LogFields | undefined) => lineFields({ ...base, ...fields });
  return {
    debug: (message, fields) => sink.debug(message, line(fields)),
    info: (message, fields) => sink.info(message, line(fields)),
    warn: (message, fields) => sink.warn(message, line(fields)),
    error: (message, fields) => sink.error(message, line(fields)),
    child: (fields) => loggerOver(sink, { ...base, ...fields }),
  };
}
