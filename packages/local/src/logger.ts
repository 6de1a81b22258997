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
  return dropBelow(loggerOver(powertools), LEVEL_RANK[powertools.getLevelName()] ?? 0);
}

/** Rank of Powertools' level names, as `getLevelName()` answers them. */
const LEVEL_RANK: Readonly<Record<string, number>> = {
  TRACE: 0,
  DEBUG: 0,
  INFO: 1,
  WARN: 2,
  ERROR: 3,
  CRITICAL: 4,
  SILENT: 5,
};

const drop = (): void => undefined;

/**
 * `logger` with the methods below `rank` (Powertools' level as it resolved it at construction) replaced by a no-op,
 * children included. Powertools drops those lines too, but only after the port has merged the fields into a new
 * object and Powertools has read the X-Ray trace id from the environment: the runtime's `info` line of every
 * webhook cost about 1% of its CPU at `logLevel: warn`.
 */
function dropBelow(logger: Logger, rank: number): Logger {
  return {
    debug: rank <= 0 ? logger.debug : drop,
    info: rank <= 1 ? logger.info : drop,
    warn: rank <= 2 ? logger.warn : drop,
    error: rank <= 3 ? logger.error : drop,
    child: (fields) => dropBelow(logger.child(fields), rank),
  };
}
