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
 * The logger port over a sink (the local runtime's Powertools Logger, the Lambda shell's): every line goes to the
 * same sink instance, so what it adds (Powertools' Lambda context keys) stays on every line, with a child's
 * `base` fields merged under the line's own.
 */
export function loggerOver(sink: LogSink, base: LogFields = {}): Logger {
  return {
    debug: (message, fields) => sink.debug(message, { ...base, ...fields }),
    info: (message, fields) => sink.info(message, { ...base, ...fields }),
    warn: (message, fields) => sink.warn(message, { ...base, ...fields }),
    error: (message, fields) => sink.error(message, { ...base, ...fields }),
    child: (fields) => loggerOver(sink, { ...base, ...fields }),
  };
}
