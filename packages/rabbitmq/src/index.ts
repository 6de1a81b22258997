export * from './amazon-mq.ts';
export * from './amqp-headers.ts';
export {
  amqpStringText,
  installLosslessDecoding,
  isLosslessProperties,
  LosslessDecodingUnavailableError,
} from './amqp-lossless.ts';
export * from './connection.ts';
export * from './consumer.ts';
export * from './publisher.ts';
