// Small factories for configuration input: each returns a valid fragment that a test then breaks or extends.

type Input = Record<string, unknown>;

export function anHttpSource(overrides: Input = {}): Input {
  return {
    type: 'http',
    auth: { scheme: 'stripe', secrets: ['whsec_test'] },
    idempotencyKey: { path: '$.id' },
    eventTypePath: '$.type',
    ...overrides,
  };
}

export function anAmqpSource(overrides: Input = {}): Input {
  return { type: 'amqp', url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'orders.in', ...overrides };
}

export function aKafkaSource(overrides: Input = {}): Input {
  return { type: 'kafka', brokers: ['127.0.0.1:9092'], topics: ['orders'], ...overrides };
}

export function aNatsSource(overrides: Input = {}): Input {
  return { type: 'nats', servers: ['nats://127.0.0.1:4222'], stream: 'ORDERS', ...overrides };
}

export function anHttpDestination(overrides: Input = {}): Input {
  return { type: 'http', url: 'https://billing.example/hooks', ...overrides };
}

export function aRoute(overrides: Input = {}): Input {
  return { match: 'stripe.#', destination: 'billing', ...overrides };
}

/** A whole configuration input with one source, one destination and one route. */
export function aConfigInput(overrides: Input = {}): Input {
  return {
    sources: { stripe: anHttpSource() },
    destinations: { billing: anHttpDestination() },
    routes: [aRoute()],
    ...overrides,
  };
}
