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
