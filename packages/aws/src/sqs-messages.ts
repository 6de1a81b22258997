import type { BrokerMessage } from '@queuebox/core';

/** The header under which an inbox row keeps the FIFO message group of an SQS message (`aggregateIdHeader` can read it). */
export const SQS_GROUP_ID_HEADER = 'sqs-message-group-id';

/** One message attribute as either SQS shape gives it (Lambda event: `stringValue`; SDK: `StringValue`). */
export interface SqsAttributeValue {
  readonly dataType?: string;
  readonly DataType?: string;
  readonly stringValue?: string;
  readonly StringValue?: string;
  readonly binaryValue?: string | Uint8Array;
  readonly BinaryValue?: Uint8Array;
}

/** What the inbox needs of one SQS message, from a Lambda event record or a `ReceiveMessage` answer. */
export interface SqsMessageFields {
  /** SQS's message id: the default idempotency key when the message has no `message-id` attribute. */
  readonly messageId: string;
  readonly body: string;
  /** FIFO: `MessageGroupId`, kept as the header `sqs-message-group-id`. */
  readonly groupId?: string;
  readonly attributes?: Readonly<Record<string, SqsAttributeValue>>;
}

function attributeText(value: SqsAttributeValue): string | undefined {
  const type = value.dataType ?? value.DataType ?? 'String';
  if (type.startsWith('Binary')) {
    const binary = value.binaryValue ?? value.BinaryValue;
    if (binary === undefined) return undefined;
    // The Lambda event already gives base64; the SDK gives bytes.
    return typeof binary === 'string' ? binary : Buffer.from(binary).toString('base64');
  }
  return value.stringValue ?? value.StringValue;
}

/** The message attribute that names a message: QueueBox's publishers set it to the outbox id. */
export const SQS_MESSAGE_ID_ATTRIBUTE = 'message-id';

/**
 * The inbox message of an SQS message. Body = the message body (UTF-8); headers = its message attributes as text
 * (`String` and `Number` values as they are, `Binary` values base64) plus `sqs-message-group-id` on a FIFO queue;
 * message id = the `message-id` attribute, so a row QueueBox's publisher sent again (after a lost settle, minutes
 * later) keeps its outbox id as key; default key = SQS's `MessageId`, the same on every redelivery. A source picks
 * another attribute with `idempotencyKey: { header: <attribute> }`.
 *
 * FIFO's `MessageDeduplicationId` is not a key: SQS deduplicates on it for 5 minutes only, and with content-based
 * deduplication it is the SHA-256 of the body, so two messages with the same body sent 10 minutes apart, both
 * delivered by SQS, would have been one row and the second message acknowledged and lost.
 */
export function sqsInboxMessage(fields: SqsMessageFields): BrokerMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields.attributes ?? {})) {
    if (name === '__proto__') continue;
    const text = attributeText(value);
    if (text !== undefined) headers[name] = text;
  }
  if (fields.groupId) headers[SQS_GROUP_ID_HEADER] = fields.groupId;
  return {
    body: Buffer.from(fields.body, 'utf8'),
    headers,
    messageId: headers[SQS_MESSAGE_ID_ATTRIBUTE] || undefined,
    defaultIdempotencyKey: fields.messageId,
  };
}
