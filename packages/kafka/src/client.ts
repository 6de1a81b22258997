import { Kafka, type LogEntry, logLevel } from 'kafkajs';
import { registerKafkaDecompressionCodecs } from './compression.ts';
import { quietIdleRequestQueues } from './request-queue.ts';
import { type KafkaSecurityOptions, kafkaSecurity } from './security.ts';

/**
 * Connection settings shared by the producer and the consumer, with the `ssl` and `sasl` of the destination or
 * source (see `kafkaSecurity`).
 */
export interface KafkaClientOptions extends KafkaSecurityOptions {
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: readonly string[];
  /** Kafka client id. Default `queuebox`. */
  readonly clientId?: string;
  /** Time to open a broker connection. Default 3000 ms. */
  readonly connectionTimeoutMs?: number;
  /** Time a broker may take to answer a request. Default 10000 ms. */
  readonly requestTimeoutMs?: number;
  /**
   * Retries kafkajs makes inside one operation before it gives up (then the publish counts as a failed attempt
   * and the outbox's own backoff takes over). Default 2, starting at 100 ms.
   */
  readonly retries?: number;
  /** Receives kafkajs's log lines at `warn` and `error`. Default: none (kafkajs stays silent). */
  readonly log?: (entry: { level: 'warn' | 'error'; namespace: string; message: string }) => void;
}

/**
 * The kafkajs client of these options: silent unless `log` is given. It reads record batches compressed with
 * gzip, Snappy, LZ4 or ZSTD (see `registerKafkaDecompressionCodecs`). TLS and SASL come from `ssl` and `sasl`
 * (before them, a cluster that needs either, MSK or Confluent Cloud, could not be reached at all). Its idle
 * connections no longer wake every millisecond (`quietIdleRequestQueues`).
 */
export function createKafkaClient(options: KafkaClientOptions): Kafka {
  registerKafkaDecompressionCodecs();
  quietIdleRequestQueues();
  const log = options.log;
  return new Kafka({
    clientId: options.clientId ?? 'queuebox',
    brokers: [...options.brokers],
    ...kafkaSecurity(options),
    connectionTimeout: options.connectionTimeoutMs ?? 3000,
    requestTimeout: options.requestTimeoutMs ?? 10_000,
    retry: { retries: options.retries ?? 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: log ? logLevel.WARN : logLevel.NOTHING,
    logCreator: () => (entry: LogEntry) => {
      if (!log) return;
      log({
        level: entry.level === logLevel.ERROR ? 'error' : 'warn',
        namespace: entry.namespace,
        message: entry.log.message,
      });
    },
  });
}

/** A kafkajs error as text: its message, the broker's error type and the causes behind it. */
export function describeKafkaError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
    if (current instanceof Error) {
      const type = (current as { type?: unknown }).type;
      const text =
        typeof type === 'string' && !current.message.includes(type)
          ? `${current.message} (${type})`
          : current.message;
      // kafkajs wraps an error in one of the same message (retries exhausted): one part, with the type if known.
      const message = current.message;
      const same = parts.findIndex((part) => part === message || part.startsWith(`${message} (`));
      if (same === -1) parts.push(text || current.name);
      else if (text.length > (parts[same] ?? '').length) parts[same] = text;
      current =
        (current as { cause?: unknown }).cause ?? (current as { originalError?: unknown }).originalError;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join(': ');
}
