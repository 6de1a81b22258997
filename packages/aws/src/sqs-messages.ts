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
  /** SQS's message id: the default idempotency key. */
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

/**
 * The inbox message of an SQS message. Body = the message body (UTF-8); headers = its message attributes as text
 * (`String` and `Number` values as they are, `Binary` values base64) plus `sqs-message-group-id` on a FIFO queue;
 * key = SQS's `MessageId`, unique per message and the same on every redelivery. A source picks an attribute with
 * `idempotencyKey: { header: <attribute> }`: `message-id`, which QueueBox's publishers set to the message id, makes
 * a row published again minutes later a duplicate, when only one QueueBox database publishes to the queue (outbox
 * ids are per database).
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
    defaultIdempotencyKey: fields.messageId,
  };
}
