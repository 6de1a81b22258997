import { createHash } from 'node:crypto';
import type { Headers, OutgoingMessage } from '@queuebox/core';
import { brokerPublishHeaders, MESSAGE_ID_HEADER } from '@queuebox/core';

/** Most message attributes SQS accepts on one message (SNS delivers at most as many to SQS subscribers). */
export const MAX_MESSAGE_ATTRIBUTES = 10;

/** Longest attribute name SQS and SNS accept. */
export const MAX_ATTRIBUTE_NAME_LENGTH = 256;

/** The data type every mapped attribute carries: header values are text. */
export const ATTRIBUTE_DATA_TYPE = 'String';

const NAME_CHARACTER = /[A-Za-z0-9_.-]/;
const RESERVED_PREFIX = /^(aws|amazon)\./i;
// The characters SQS and SNS accept in message bodies and attribute values (the XML 1.0 character set).
const XML_TEXT = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u;

/** Whether SQS / SNS accept `text` as a body or an attribute value: only characters of the XML 1.0 set. */
export function isServiceText(text: string): boolean {
  return XML_TEXT.test(text);
}

/** Length of `text` in UTF-8 bytes: what the services' size limits count. */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * A header name as an SQS / SNS message attribute name, or undefined when it cannot be one. Characters outside
 * `A-Z a-z 0-9 _ - .` become `_`; dots at either end are removed and runs of dots become one (the services refuse
 * both); a name that is then empty, longer than 256 characters, or starts with `AWS.` / `Amazon.` (any letter
 * case: reserved) has no attribute name.
 */
export function attributeName(header: string): string | undefined {
  let name = '';
  for (const ch of header) name += NAME_CHARACTER.test(ch) ? ch : '_';
  name = name.replace(/\.{2,}/g, '.').replace(/^\.+|\.+$/g, '');
  if (name === '' || name.length > MAX_ATTRIBUTE_NAME_LENGTH || RESERVED_PREFIX.test(name)) return undefined;
  return name;
}

/** Headers as message attributes, and what was left out. */
export interface MappedAttributes {
  /** Attribute name → text value, in the order they were taken. */
  readonly attributes: Readonly<Record<string, string>>;
  /** Header names that have no attribute (their reason in `attributeName` / {@link messageAttributes}). */
  readonly dropped: readonly string[];
  /** What the attributes add to the message size: name + data type + value, in UTF-8 bytes, summed. */
  readonly bytes: number;
}

/**
 * The message attributes of a publish to SQS or SNS, from headers that already hold `message-id` (the message id,
 * see `brokerPublishHeaders`): `message-id` first, then the other headers in their order, each under
 * {@link attributeName} as a `String` attribute. A header is dropped when its name has no attribute name, when its
 * value is empty (the services refuse empty values) or holds characters outside the XML character set, when its
 * attribute name was already taken by an earlier header, and once {@link MAX_MESSAGE_ATTRIBUTES} are taken.
 */
export function messageAttributes(
  headers: Headers,
  firstName: string,
  limit = MAX_MESSAGE_ATTRIBUTES,
): MappedAttributes {
  const attributes: Record<string, string> = {};
  const dropped: string[] = [];
  let bytes = 0;
  const names = Object.keys(headers);
  const ordered = names.includes(firstName) ? [firstName, ...names.filter((n) => n !== firstName)] : names;
  for (const header of ordered) {
    const value = headers[header] ?? '';
    const name = attributeName(header);
    if (
      name === undefined ||
      value === '' ||
      !isServiceText(value) ||
      Object.hasOwn(attributes, name) ||
      Object.keys(attributes).length >= limit
    ) {
      dropped.push(header);
      continue;
    }
    attributes[name] = value;
    bytes += utf8Length(name) + utf8Length(ATTRIBUTE_DATA_TYPE) + utf8Length(value);
  }
  return { attributes, dropped, bytes };
}

/** An outgoing row as an SQS message or SNS notification, before it gets its batch entry id. */
export interface AttributedMessage {
  readonly body: string;
  /** Attribute name → `{ DataType: 'String', StringValue }`, the shape both SDK clients take. */
  readonly attributes: Record<string, { DataType: string; StringValue: string }>;
  /** Body + attributes in UTF-8 bytes, as the services count them. */
  readonly bytes: number;
  /** FIFO only: `MessageGroupId` and `MessageDeduplicationId`. */
  readonly fifo?: { readonly MessageGroupId: string; readonly MessageDeduplicationId: string };
}

/**
 * The body, attributes, size and FIFO ids of a row for SQS or SNS, or why the service can never take it: a body
 * with characters outside XML 1.0, or body + attributes over `maxMessageBytes`.
 */
export function attributedMessage(
  message: Pick<OutgoingMessage, 'id' | 'key' | 'payload' | 'headers'>,
  target: {
    readonly service: 'SQS' | 'SNS';
    readonly name: string;
    readonly maxMessageBytes: number;
    /** The group of rows without a key, when the queue or topic is FIFO. */
    readonly fifoDefaultGroup?: string;
  },
): AttributedMessage | { readonly dead: string } {
  const { service, name, maxMessageBytes } = target;
  const body = JSON.stringify(message.payload);
  if (!isServiceText(body)) {
    return {
      dead: `the payload holds characters ${service} refuses (outside the XML 1.0 set, e.g. U+FFFE, U+FFFF); destination "${name}" can never accept it`,
    };
  }
  const mapped = messageAttributes(brokerPublishHeaders(message), MESSAGE_ID_HEADER);
  const bytes = utf8Length(body) + mapped.bytes;
  if (bytes > maxMessageBytes) {
    return {
      dead: `the message is ${bytes} bytes (payload ${utf8Length(body)} + attributes ${mapped.bytes}); ${service} destination "${name}" accepts at most ${maxMessageBytes} bytes per message, so it can never be sent`,
    };
  }
  const attributes = Object.fromEntries(
    Object.entries(mapped.attributes).map(([key, value]) => [
      key,
      { DataType: ATTRIBUTE_DATA_TYPE, StringValue: value },
    ]),
  );
  const group = target.fifoDefaultGroup;
  return {
    body,
    attributes,
    bytes,
    ...(group === undefined
      ? {}
      : {
          fifo: {
            MessageGroupId: message.key === null ? group : messageGroupIdOf(message.key),
            MessageDeduplicationId: message.id,
          },
        }),
  };
}

// MessageGroupId / MessageDeduplicationId: 1–128 characters, alphanumerics and punctuation.
const GROUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

/** Whether SQS / SNS accept `id` as a `MessageGroupId` (1–128 letters, digits or punctuation). */
export function isMessageGroupId(id: string): boolean {
  return GROUP_ID.test(id);
}

/**
 * The `MessageGroupId` of a row key: the key itself when SQS accepts it (1–128 alphanumerics and punctuation),
 * else `sha256:` + its hex digest — the same key always gets the same group, so per-key order holds either way.
 */
export function messageGroupIdOf(key: string): string {
  return GROUP_ID.test(key) ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}
