/** Which kafkajs errors of a heartbeat or commit end the consumer's batch so that kafkajs rejoins the group. */
import kafkajs from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { kafkaRejoinError } from '../src/consumer.ts';

const { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } = kafkajs;

/** A broker error as kafkajs decodes it from a response (`createErrorFromCode`). */
const brokerError = (type: string, code: number) =>
  new KafkaJSProtocolError({ message: `broker said ${type}`, type, code, retriable: false } as never);

describe('kafkaRejoinError', () => {
  it.each([
    ['REBALANCE_IN_PROGRESS', 27],
    ['ILLEGAL_GENERATION', 22],
    ['UNKNOWN_MEMBER_ID', 25],
    ['NOT_COORDINATOR_FOR_GROUP', 16],
  ])('finds %s, also behind a retry that gave up', (type, code) => {
    // Prepare
    const error = brokerError(type, code);
    const wrapped = new KafkaJSNumberOfRetriesExceeded(error, { retryCount: 2, retryTime: 100 });
    // Act
    const direct = kafkaRejoinError(error);
    const behind = kafkaRejoinError(wrapped);
    // Assess
    expect(direct).toBe(error);
    expect(behind).toBe(error);
  });

  it('ignores other failures: an unreachable broker, another broker error, a bug', () => {
    // Act
    const found = [
      new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:9092'),
      brokerError('COORDINATOR_NOT_AVAILABLE', 15),
      new TypeError('a bug'),
      'not an error',
    ].map((error) => kafkaRejoinError(error));
    // Assess
    expect(found).toEqual([undefined, undefined, undefined, undefined]);
  });
});
