import { type LogItem, Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import type { ConstructorOptions } from '@aws-lambda-powertools/logger/types';
import { errorFields, type Logger, loggerOver } from '@queuebox/core';
import { terminalSafeJson } from './terminal-text.ts';

export type { LogFields, Logger } from '@queuebox/core';

/** Log levels, most verbose first (the configuration's `logLevel`). */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Lines below this level are dropped. Default `info`. */
  readonly level?: LogLevel;
  /** Where each line goes (without the newline). Default: written to stdout with a newline. */
  readonly write?: (line: string) => void;
  /** The `service` key of every line. Default `POWERTOOLS_SERVICE_NAME`, else `queuebox`. */
  readonly serviceName?: string;
}

/**
 * Powertools Logger writing each line through `write`, terminal-safe: log lines reach terminals (`npm start`) and
 * carry what senders chose (event types, sources, errors), so the controls JSON.stringify leaves raw are escaped.
 */
class LocalLogger extends PowertoolsLogger {
  readonly #write: (line: string) => void;

  constructor(options: ConstructorOptions, write: (line: string) => void) {
    super(options);
    this.#write = write;
  }

  protected override printLog(_logLevel: number, log: LogItem): void {
    log.prepareForPrint();
    const attributes = log.getAttributes();
    let line: string;
    try {
      line = JSON.stringify(attributes, this.getJsonReplacer());
    } catch {
      const { level, message, timestamp } = attributes;
      line = JSON.stringify({ level, message, timestamp, logError: 'fields were not serializable' });
    }
    this.#write(terminalSafeJson(line));
  }
}

/**
 * Creates the local runtime's logger: Powertools Logger, as in the Lambda functions, so a line has one shape in
 * both places: one JSON object per line, `{"level":"INFO","message":…,"timestamp":…,"service":…,…fields}`.
 * Errors in fields are written as {@link errorFields}.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const powertools = new LocalLogger(
    {
      logLevel: (options.level ?? 'info').toUpperCase() as 'INFO',
      serviceName: options.serviceName ?? (process.env.POWERTOOLS_SERVICE_NAME || 'queuebox'),
      jsonReplacerFn: (_key, value) => (value instanceof Error ? errorFields(value) : value),
    },
    write,
  );
  return loggerOver(powertools);
}
