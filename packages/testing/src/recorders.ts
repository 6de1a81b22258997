import type { BrokerIngestionPort, Logger } from '@queuebox/core';

/** A line a {@link recordingLogger} kept. */
export interface RecordedLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly fields?: unknown;
}

/** A logger that keeps every line with its level (its children write to the same lines). */
export function recordingLogger(): Logger & { readonly lines: RecordedLine[] } {
  const lines: RecordedLine[] = [];
  const at =
    (level: RecordedLine['level']) =>
    (message: string, fields?: unknown): void => {
      lines.push({ level, message, fields });
    };
  const logger: Logger & { lines: RecordedLine[] } = {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => logger,
  };
  return logger;
}

/** A broker ingestion that stores nothing and counts what it is given: each message `stored` with the next id. */
export function countingIngestion(): BrokerIngestionPort & { count(): number } {
  let n = 0;
  return {
    count: () => n,
    async ingest() {
      n += 1;
      return { status: 'stored', id: String(n), wakeRelay: false };
    },
  };
}
