import type { ConfigIssue, OutgoingMessage, Publisher, PublishOutcome } from '@queuebox/core';
import { brokerPublishHeaders, ConfigError, renderTemplate } from '@queuebox/core';
import type { ConfirmChannel, Message } from 'amqplib';
import { type AmqpConnection, createAmqpConnection, describeAmqpError } from './connection.ts';

/** `destinations.<name>` of `type: rabbitmq` (the validated configuration fits as it is). */
export interface RabbitMqDestinationOptions {
  readonly type?: 'rabbitmq';
  /** Broker URL, `amqp://` or `amqps://`. */
  readonly url: string;
  /** Exchange to publish to; `""` is the default exchange (the routing key names the queue). */
  readonly exchange: string;
  /** Routing key template with `{{ topic }}` and `{{ key }}`. Default `{{ topic }}`. */
  readonly routingKey?: string;
  /** Persistent messages (delivery mode 2). Default true. */
  readonly persistent?: boolean;
  /**
   * Largest message body (the JSON payload, in UTF-8 bytes: what RabbitMQ's `max_message_size` counts) to publish;
   * a larger message goes `dead` without being sent. Default {@link DEFAULT_MAX_MESSAGE_BYTES} (128 MiB, RabbitMQ
   * 3.x's default; 4.x's is 16 MiB); at most {@link MAX_MESSAGE_BYTES_LIMIT}. Set it to the broker's `max_message_size` or lower.
   */
  readonly maxMessageBytes?: number;
}

/** Options of the publisher: the destination plus tuning. */
export interface RabbitMqPublisherOptions extends RabbitMqDestinationOptions {
  /** The destination's name, for error messages and the connection name. Default `rabbitmq`. */
  readonly name?: string;
  /** How long to wait for the broker's confirm before the attempt counts as failed. Default 10000 ms. */
  readonly confirmTimeoutMs?: number;
  /** Socket connect timeout. Default 10000 ms. */
  readonly connectTimeoutMs?: number;
  /** Called with connection and channel errors (for logs). Default none. */
  readonly onProblem?: (error: unknown) => void;
}

function retry(error: string): PublishOutcome {
  return { kind: 'retry', error };
}

/**
 * How long a message is given back untried while the broker blocks publishing (`connection.blocked`): the row is
 * due again then, and tried only if the connection is unblocked by that time, so a long alarm is checked every few
 * seconds without spending the row's attempts.
 */
export const BLOCKED_RECHECK_MS = 5_000;

/** The answer to a publish while the broker blocks the connection: nothing written, no attempt counted. */
function blockedOutcome(reason: string): PublishOutcome {
  return {
    kind: 'retry',
    error: `the broker blocked publishing: ${reason}`,
    unstarted: true,
    retryAfterMs: BLOCKED_RECHECK_MS,
  };
}

/**
 * The error of a publish the broker nacked. RabbitMQ nacks a message a bound queue refused (at its length limit with
 * `overflow: reject-publish`, or a quorum queue's), also when other queues bound to the exchange took it: a fanout
 * or topic exchange then holds a copy in those queues per attempt.
 */
export const NACKED_ERROR =
  'the broker refused the message (a bound queue at its length limit with overflow reject-publish?); other queues bound to the exchange may have received it';

/**
 * Default `maxMessageBytes`: 128 MiB, RabbitMQ 3.x's default `max_message_size` (Amazon MQ's too), so no body a 3.x
 * broker takes is answered `dead` on an upgrade of QueueBox. A 4.x broker's default is 16 MiB: a larger body is
 * refused by the broker once (406), which names its limit; from then on such bodies are answered `dead`, unsent, on
 * that connection.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 134_217_728;
/** The highest `max_message_size` RabbitMQ takes (512 MiB), so the highest `maxMessageBytes`. */
export const MAX_MESSAGE_BYTES_LIMIT = 536_870_912;

/** What is wrong with a `maxMessageBytes` value, or undefined when it is a whole number of bytes RabbitMQ allows. */
function maxMessageBytesProblem(value: unknown): string | undefined {
  return typeof value === 'number' &&
    Number.isInteger(value) &&
    value >= 1 &&
    value <= MAX_MESSAGE_BYTES_LIMIT
    ? undefined
    : `must be an integer from 1 to ${MAX_MESSAGE_BYTES_LIMIT} (bytes)`;
}

/**
 * The broker's own limit in the reason it closed a channel with, when the close was over a message larger than
 * `max_message_size`: `406 PRECONDITION_FAILED - message size 141557762 is larger than configured max size
 * 134217728` (RabbitMQ's `rabbit_channel:check_msg_size`; "max size" without "configured" at its 512 MiB ceiling).
 * The size it names is the body's, in bytes. Undefined for any other reason.
 */
export function brokerMaxMessageSize(reason: unknown): number | undefined {
  if (!(reason instanceof Error)) return undefined;
  const match = /PRECONDITION_FAILED - message size \d+ is larger than (?:configured )?max size (\d+)/.exec(
    reason.message,
  );
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

/** AMQP 0-9-1 `shortstr` fields (routing key, exchange name, header names) hold at most 255 bytes. */
export const MAX_SHORTSTR_BYTES = 255;

/**
 * Headers RabbitMQ reads itself and refuses by type: `CC` and `BCC` (sender-selected distribution, matched with
 * that exact case) must be arrays of strings. Any other value makes the broker close the channel with `406
 * PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}`, failing every publish in
 * flight on it. (Other names, `x-…` included, are accepted with any value.)
 */
const ARRAY_HEADERS: readonly string[] = ['CC', 'BCC'];

/**
 * Why RabbitMQ can never take a message with this routing key and these headers, or undefined. Row headers are
 * text, and amqplib sends text as a long string, so a `CC` or `BCC` header is always refused.
 */
export function unpublishableReason(
  routingKey: string,
  headers: Readonly<Record<string, unknown>>,
): string | undefined {
  const keyBytes = Buffer.byteLength(routingKey, 'utf8');
  if (keyBytes > MAX_SHORTSTR_BYTES) {
    return `the routing key is ${keyBytes} bytes; AMQP allows at most ${MAX_SHORTSTR_BYTES}`;
  }
  for (const name of ARRAY_HEADERS) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = headers[name];
    if (!(Array.isArray(value) && value.every((v) => typeof v === 'string'))) {
      return (
        `header "${name}" must be an array of strings for RabbitMQ (sender-selected distribution), which closes ` +
        `the channel over any other value (PRECONDITION_FAILED unacceptable_type_in_header); rename the header`
      );
    }
  }
  for (const name of Object.keys(headers)) {
    const bytes = Buffer.byteLength(name, 'utf8');
    if (bytes > MAX_SHORTSTR_BYTES) {
      return `a header name is ${bytes} bytes; AMQP allows at most ${MAX_SHORTSTR_BYTES}`;
    }
  }
  return undefined;
}

/**
 * The errors amqplib (2.x) throws while encoding a publish, before anything is written: the same message fails the
 * same way on every attempt. Matched by class and message, as amqplib has no error codes for them:
 * - `lib/codec.js` `checkSpace`: a `RangeError` `Encoded field table (headers or arguments) exceeds the 65536 byte
 *   encoding buffer` (headers too large);
 * - `lib/codec.js` `encodeFieldValue`: a `TypeError` `Unknown type to encode: …` or `Decimal value must be …`;
 * - `lib/defs.js` (`encodeBasicPublish`, `encodeBasicProperties`): a `TypeError` `Field 'messageId' is the wrong
 *   type; must be a string (up to 255 chars)` and the like, for a property amqplib cannot encode.
 * Any other error, a `TypeError` or `RangeError` from amqplib's internal state included, is not the message's fault.
 */
export function isAmqpEncodingError(error: unknown): error is TypeError | RangeError {
  if (error instanceof RangeError) {
    return /^Encoded field table \(headers or arguments\) exceeds the \d+ byte encoding buffer$/.test(
      error.message,
    );
  }
  if (error instanceof TypeError) {
    return (
      /^Field '\w+' is the wrong type; must be /.test(error.message) ||
      error.message.startsWith('Unknown type to encode: ') ||
      error.message.startsWith('Decimal value must be ')
    );
  }
  return false;
}

/**
 * core's `Publisher` for a RabbitMQ exchange, on one confirm channel of one connection that is opened on first
 * use, reused by every publish, and replaced when it breaks (see `createAmqpConnection`).
 *
 * Each message: body = the JSON payload (`content-type: application/json`); routing key = the `routingKey`
 * template (default `{{ topic }}`); `persistent` (default true); `mandatory: true`; the `message-id` property and
 * header = the message id (consumers deduplicate on it); headers = the row's headers (the `message-id` header
 * replaced). Outcomes: the broker's ack → `sent`; a nack, a `basic.return` (no queue bound: unroutable), a closed
 * channel (e.g. the exchange does not exist; the error names the broker's reason, e.g. `404 NOT_FOUND - no
 * exchange`), no connection, or no confirm within `confirmTimeoutMs` → `retry`; what RabbitMQ can never take
 * (see `unpublishableReason`: a `CC`/`BCC` header, which would close the channel shared by every publish in
 * flight; a routing key or header name over 255 bytes; a body over `maxMessageBytes`, or over the broker's
 * `max_message_size` once the broker has named it on this connection) or amqplib cannot encode (headers too large
 * for its encoding buffer) → `dead`, before anything is sent. When the broker closes the channel over a message
 * larger than its `max_message_size` (a broker limit below `maxMessageBytes`), the publishes in flight whose body is
 * over the limit it names → `dead` (the broker refuses them whatever the attempt), the others on the channel →
 * `retry` as for any closed channel.
 */
export function createRabbitMqPublisher(options: RabbitMqPublisherOptions): Publisher {
  const name = options.name ?? 'rabbitmq';
  const template = options.routingKey ?? '{{ topic }}';
  const persistent = options.persistent ?? true;
  const confirmTimeoutMs = options.confirmTimeoutMs ?? 10_000;
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const badMax = maxMessageBytesProblem(maxMessageBytes);
  if (badMax !== undefined) {
    throw new ConfigError([{ path: `destinations.${name}.maxMessageBytes`, message: badMax }]);
  }
  const connection: AmqpConnection = createAmqpConnection({
    url: options.url,
    connectionName: `queuebox publisher ${name}`,
    connectTimeoutMs: options.connectTimeoutMs,
  });
  connection.onProblem = options.onProblem;
  // A `basic.return` arrives before the ack of the same publish on the same channel; keyed by channel so a message
  // returned on a channel that then broke cannot mark a later publish. Only a publish still waiting for its confirm
  // is marked: the return of one that gave up (timeout, abort) must not mark the retry of the same message.
  // `waiting` counts the publishes of each id still waiting (the same id twice at once stays marked until both end).
  const returned = new WeakMap<ConfirmChannel, { waiting: Map<string, number>; returned: Set<string> }>();
  const setup = (channel: ConfirmChannel) => {
    const ids = { waiting: new Map<string, number>(), returned: new Set<string>() };
    returned.set(channel, ids);
    channel.on('return', (message: Message) => {
      const id = message.properties.messageId;
      if (typeof id === 'string' && ids.waiting.has(id)) ids.returned.add(id);
    });
  };
  // The `max_message_size` a broker named when it closed a channel over a message too large, by the connection
  // (socket) it said it on: a reconnect may reach a broker (or a node) configured otherwise, so it is forgotten then.
  const brokerLimits = new WeakMap<ConfirmChannel['connection'], number>();

  async function publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishOutcome> {
    // Nothing was written: the row is given back without spending an attempt (a stop or a tick's deadline).
    if (signal?.aborted) return { kind: 'retry', error: 'aborted before publishing', unstarted: true };
    const routingKey = renderTemplate(template, { topic: message.topic, key: message.key });
    const headers = brokerPublishHeaders(message);
    const refused = unpublishableReason(routingKey, headers);
    if (refused !== undefined) {
      return {
        kind: 'dead',
        error: `RabbitMQ cannot take the message for destination "${name}": ${refused}`,
      };
    }
    // The body is the payload's JSON in UTF-8; its bytes are what RabbitMQ's max_message_size counts (headers and
    // properties are not). Measured before it is copied into a buffer, so a message refused here costs no copy.
    const json = JSON.stringify(message.payload);
    const bytes = Buffer.byteLength(json, 'utf8');
    if (bytes > maxMessageBytes) {
      return {
        kind: 'dead',
        error: `message of ${bytes} bytes is over maxMessageBytes ${maxMessageBytes} of destination "${name}"`,
      };
    }
    let channel: ConfirmChannel;
    try {
      // Under the confirm's own timeout and abort signal: on a half-open connection the channel's open-ok never
      // comes, and amqplib would wait for two missed heartbeats.
      channel = await connection.confirmChannel(setup, { timeoutMs: confirmTimeoutMs, signal });
    } catch (error) {
      // Aborted while the channel opened (a stop, a tick's deadline): nothing was written, so no attempt is spent,
      // as the HTTP publisher's request not yet started (review of b1464a8). A connection that cannot be had, or
      // a channel that does not open within the confirm timeout, is a try that failed.
      if (signal?.aborted) return { kind: 'retry', error: describeAmqpError(error), unstarted: true };
      return retry(describeAmqpError(error));
    }
    // The broker blocks publishing (memory or disk alarm): a publish written now would wait in the socket, time out,
    // and be taken by the broker once the alarm clears, as a copy per attempt. Given back untried instead.
    const blockedFor = connection.blockedReason(channel);
    if (blockedFor !== undefined) return blockedOutcome(blockedFor);
    const brokerLimit = brokerLimits.get(channel.connection);
    if (brokerLimit !== undefined && bytes > brokerLimit) {
      return { kind: 'dead', error: overBrokerLimit(bytes, brokerLimit) };
    }
    const content = Buffer.from(json, 'utf8');
    const returns = returned.get(channel);
    // What the connection had received when this publish was written: nothing more by the confirm timeout, not even
    // a heartbeat, and the connection is taken for half-open.
    const receivedBefore = connection.receivedBytes(channel);

    return new Promise<PublishOutcome>((resolve) => {
      let done = false;
      const finish = (outcome: PublishOutcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (returns) {
          const left = (returns.waiting.get(message.id) ?? 1) - 1;
          if (left > 0) returns.waiting.set(message.id, left);
          else {
            returns.waiting.delete(message.id);
            returns.returned.delete(message.id);
          }
        }
        resolve(outcome);
      };
      const onAbort = () => finish(retry('aborted while waiting for the broker confirm'));
      const timer = setTimeout(() => {
        const blockedNow = connection.blockedReason(channel);
        const unsent = connection.unsentBytes(channel);
        const silent = connection.receivedBytes(channel) === receivedBefore;
        let error = `no publisher confirm from RabbitMQ within ${confirmTimeoutMs} ms`;
        // Frames still waiting to be read by a blocked broker, or still in the socket, would reach it later, after
        // this message was given up and tried again: a copy per attempt. The connection is cut so they are dropped
        // (closing the channel would not: its frames are in the connection's socket). The other publishes in
        // flight on it fail and are retried (a retry may duplicate one the broker had taken, same message-id).
        // A connection from which nothing at all came since the publish was written (no frame, no heartbeat: the
        // broker sends one every heartbeat/2 s of silence) is half-open: cut too, so the next publishes open a new
        // one instead of each timing out until amqplib misses two heartbeats.
        if (blockedNow !== undefined || unsent > 0 || silent) {
          const why =
            blockedNow !== undefined
              ? `the broker blocked publishing: ${blockedNow}`
              : unsent > 0
                ? `${unsent} bytes not yet sent`
                : 'nothing came from the broker meanwhile, not even a heartbeat';
          connection.abort(channel, `${error} (${why})`);
          error +=
            blockedNow !== undefined || unsent > 0
              ? ` (${why}); the connection was cut so the message is not sent later`
              : ` (${why}); the connection was cut as half-open, so the next publishes open a new one`;
        }
        finish(retry(error));
      }, confirmTimeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      returns?.waiting.set(message.id, (returns.waiting.get(message.id) ?? 0) + 1);
      try {
        channel.publish(
          options.exchange,
          routingKey,
          content,
          {
            persistent,
            mandatory: true,
            contentType: 'application/json',
            messageId: message.id,
            timestamp: Math.floor(Date.now() / 1000),
            appId: 'queuebox',
            headers,
          },
          (error: unknown) => {
            if (error) {
              // A closed channel fails its confirms with a bare "channel closed"; the broker's reason (this or
              // another publish on the channel refused, the exchange missing, the connection lost) is known once
              // amqplib's close events of this turn have run.
              queueMicrotask(() => {
                const reason = connection.closeReason(channel);
                // The broker closed the channel over a message larger than its max_message_size: the close does
                // not say which publish it was, but every body over the limit it names is refused on every attempt,
                // so those are dead; the others only shared the channel, and are retried.
                const limit = brokerMaxMessageSize(reason);
                if (limit !== undefined) {
                  brokerLimits.set(channel.connection, limit);
                  if (bytes > limit) {
                    finish({ kind: 'dead', error: overBrokerLimit(bytes, limit) });
                    return;
                  }
                }
                const nacked = error instanceof Error && error.message === 'message nacked';
                finish(
                  retry(
                    reason
                      ? `the channel closed before RabbitMQ confirmed the message: ${describeAmqpError(reason)}`
                      : nacked
                        ? NACKED_ERROR
                        : `RabbitMQ did not accept the message: ${describeAmqpError(error)}`,
                  ),
                );
              });
            } else if (returns?.returned.has(message.id)) {
              finish(
                retry(
                  `RabbitMQ returned the message as unroutable: no queue is bound to exchange "${options.exchange}" for routing key "${routingKey}"`,
                ),
              );
            } else {
              finish({ kind: 'sent' });
            }
          },
        );
      } catch (error) {
        // Only amqplib's own encoding errors say the message can never be sent; anything else thrown here (a
        // TypeError of a connection torn down under the publish, say) may pass on the next attempt.
        if (isAmqpEncodingError(error))
          finish({ kind: 'dead', error: `Cannot encode the message: ${error.message}` });
        else finish(retry(`Cannot publish: ${describeAmqpError(error)}`));
      }
    });
  }

  function overBrokerLimit(bytes: number, limit: number): string {
    return (
      `message of ${bytes} bytes is over the max_message_size ${limit} of the RabbitMQ broker of destination ` +
      `"${name}" (it closes the channel over such a message: 406 PRECONDITION_FAILED); set maxMessageBytes ` +
      `(${maxMessageBytes}) to at most ${limit}`
    );
  }

  return {
    publish,
    close: () => connection.close(),
  };
}

function textOption(options: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = options[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The factory for packages/outbox's `createPublishers` (`{ ...defaultPublisherFactories, rabbitmq:
 * rabbitmqPublisherFactory }`): checks the fields it needs and throws ConfigError naming them.
 */
export function rabbitmqPublisherFactory(name: string, options: { readonly type: string }): Publisher {
  const fields = options as unknown as Readonly<Record<string, unknown>>;
  const url = textOption(fields, 'url');
  const exchange = textOption(fields, 'exchange');
  const issues: ConfigIssue[] = [];
  if (url === undefined || !/^amqps?:\/\//i.test(url)) {
    issues.push({ path: `destinations.${name}.url`, message: 'must be an amqp:// or amqps:// URL' });
  }
  if (exchange === undefined) {
    issues.push({
      path: `destinations.${name}.exchange`,
      message: 'is required ("" for the default exchange)',
    });
  } else if (Buffer.byteLength(exchange, 'utf8') > MAX_SHORTSTR_BYTES) {
    issues.push({
      path: `destinations.${name}.exchange`,
      message: `must be at most ${MAX_SHORTSTR_BYTES} bytes`,
    });
  }
  const badMax =
    fields.maxMessageBytes === undefined ? undefined : maxMessageBytesProblem(fields.maxMessageBytes);
  if (badMax !== undefined) issues.push({ path: `destinations.${name}.maxMessageBytes`, message: badMax });
  if (issues.length > 0) throw new ConfigError(issues);
  return createRabbitMqPublisher({
    name,
    url: url ?? '',
    exchange: exchange ?? '',
    routingKey: textOption(fields, 'routingKey'),
    persistent: typeof fields.persistent === 'boolean' ? fields.persistent : undefined,
    maxMessageBytes: typeof fields.maxMessageBytes === 'number' ? fields.maxMessageBytes : undefined,
  });
}
