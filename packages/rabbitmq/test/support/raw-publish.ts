import type { Channel, Options } from 'amqplib';

/**
 * A string that {@link sendRaw} has amqplib write as these raw bytes (a message-id, a type, a header name or value):
 * how a producer puts bytes that are not UTF-8 in an AMQP string, which RabbitMQ passes on as they are.
 */
export const raw = (bytes: Buffer) => `<<RAW:${bytes.toString('hex')}>>`;
const RAW = /^<<RAW:([0-9a-f]*)>>$/;

/**
 * `channel.sendToQueue`, with the strings made by {@link raw} written as their bytes: amqplib measures strings with
 * `Buffer.byteLength` and writes them with `Buffer#write`, both wrapped for this synchronous call only.
 */
export function sendRaw(channel: Channel, queue: string, content: object, properties: Options.Publish): void {
  const byteLength = Buffer.byteLength;
  const write = Buffer.prototype.write;
  const bytesOf = (s: unknown) => (typeof s === 'string' ? RAW.exec(s)?.[1] : undefined);
  Buffer.byteLength = ((s: unknown, encoding?: BufferEncoding) => {
    const hex = bytesOf(s);
    return hex === undefined ? byteLength(s as string, encoding) : hex.length / 2;
  }) as typeof Buffer.byteLength;
  Buffer.prototype.write = function (this: Buffer, s: string, ...rest: unknown[]) {
    const hex = bytesOf(s);
    if (hex === undefined) return (write as (...a: unknown[]) => number).call(this, s, ...rest);
    return Buffer.from(hex, 'hex').copy(this, typeof rest[0] === 'number' ? rest[0] : 0);
  } as typeof Buffer.prototype.write;
  try {
    channel.sendToQueue(queue, Buffer.from(JSON.stringify(content)), properties);
  } finally {
    Buffer.byteLength = byteLength;
    Buffer.prototype.write = write;
  }
}
