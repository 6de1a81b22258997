export * from './amazon-mq.ts';
export * from './amqp-headers.ts';
export * from './connection.ts';
export * from './consumer.ts';
export * from './ingest-port.ts';
export * from './publisher.ts';
export * from './template.ts';
