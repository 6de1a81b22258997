/**
 * The structured logger this package writes to: a message and fields. Powertools' Logger and console-like
 * adapters fit it.
 */
export interface OutboxLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** A logger that drops everything (the default). */
export const silentLogger: OutboxLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
