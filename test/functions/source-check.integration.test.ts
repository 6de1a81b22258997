/**
 * source-check end to end: the handler lists the event source mappings of kafka-source and amqp-source with the
 * real `@aws-sdk/client-lambda`, pointed at a local server that answers ListEventSourceMappings as the Lambda API
 * does (REST JSON, `GET /2015-03-31/event-source-mappings/`, two pages for kafka-source), and reports the mappings
 * that cannot poll: one ERROR line each and one EMF document with `SourceProblems`; nothing when all are healthy.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger, Metrics } from '../../functions/lambda-shell/lambda.ts';
import { createMappingLister } from '../../functions/lambda-shell/source-mappings.ts';
import { createHandler } from '../../functions/source-check.ts';
import { aLambdaContext, aTickEvent, captureOutput } from './support.ts';

const AWS = { region: 'eu-west-1', credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' } };
const MSK = 'arn:aws:kafka:eu-west-1:123456789012:cluster/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3';
const MQ = 'arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1234abcd-56ef-78ab-90cd-1234567890ab';
const KAFKA_FN = 'queuebox-prod-KafkaSource';
const AMQP_FN = 'queuebox-prod-AmqpSource';

type Pages = Record<string, Record<string, unknown>[][]>;

/** A Lambda API stand-in on a port of 47400–47499: each function's mappings, in pages linked by NextMarker. */
async function aLambdaApi(): Promise<{
  url: string;
  pages: Pages;
  requests: string[];
  close: () => Promise<void>;
}> {
  const pages: Pages = {};
  const requests: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    requests.push(`${req.method} ${url.pathname}${url.search}`);
    if (req.method !== 'GET' || !url.pathname.startsWith('/2015-03-31/event-source-mappings')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"Message":"not found"}');
      return;
    }
    const fn = url.searchParams.get('FunctionName') ?? '';
    const index = Number(url.searchParams.get('Marker') ?? '0');
    const list = pages[fn] ?? [[]];
    const body = {
      EventSourceMappings: list[index] ?? [],
      ...(index + 1 < list.length ? { NextMarker: String(index + 1) } : {}),
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  const port = await listenInRange(server, 47400, 47499);
  return {
    url: `http://127.0.0.1:${port}`,
    pages,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function listenInRange(server: Server, from: number, to: number): Promise<number> {
  const start = from + Math.floor(Math.random() * (to - from + 1));
  for (let i = 0; i <= to - from; i += 1) {
    const port = from + ((start - from + i) % (to - from + 1));
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (bound) return port;
  }
  throw new Error(`no free port in ${from}-${to}`);
}

const mapping = (fields: Record<string, unknown>) => ({
  BatchSize: 100,
  FunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${KAFKA_FN}`,
  LastModified: 1_764_547_200,
  State: 'Enabled',
  StateTransitionReason: 'USER_INITIATED',
  ...fields,
});

describe('source-check', () => {
  let api: Awaited<ReturnType<typeof aLambdaApi>>;

  beforeAll(async () => {
    api = await aLambdaApi();
  });

  afterAll(async () => {
    await api.close();
  });

  const handlerOver = () =>
    createHandler({
      logger: new Logger({ serviceName: 'queuebox-prod', logLevel: 'INFO' }),
      metrics: new Metrics({ namespace: 'QueueBox', serviceName: 'queuebox-prod' }),
      lister: createMappingLister({ ...AWS, endpoint: api.url }),
      env: {
        [FUNCTION_ENV.kafkaSourceFunction]: KAFKA_FN,
        [FUNCTION_ENV.amqpSourceFunction]: AMQP_FN,
        [FUNCTION_ENV.disabledSourceMappings]: JSON.stringify({ 'kafka-source': ['legacy'] }),
      },
    });

  it('logs one ERROR per mapping that cannot poll, across pages, and counts them in one SourceProblems document', async () => {
    // Prepare
    api.pages[KAFKA_FN] = [
      [
        mapping({ UUID: 'k-ok', EventSourceArn: MSK, Topics: ['clicks'], LastProcessingResult: 'OK' }),
        mapping({
          UUID: 'k-sasl',
          EventSourceArn: MSK,
          Topics: ['views'],
          LastProcessingResult: 'PROBLEM: SASL authentication failed',
        }),
      ],
      [
        mapping({ UUID: 'k-off', EventSourceArn: MSK, Topics: ['legacy'], State: 'Disabled' }),
        mapping({ UUID: 'k-new', EventSourceArn: MSK, Topics: ['audit'], State: 'Creating' }),
      ],
    ];
    api.pages[AMQP_FN] = [
      [
        mapping({
          UUID: 'mq-authn',
          EventSourceArn: MQ,
          Queues: ['orders.in'],
          State: 'Disabled',
          StateTransitionReason: 'EVENT_SOURCE_AUTHN_ERROR',
          LastProcessingResult: 'No records processed',
        }),
      ],
    ];
    const handler = handlerOver();
    api.requests.length = 0;

    // Act
    const { result, lines } = await captureOutput(() =>
      handler(aTickEvent(), aLambdaContext({ functionName: 'queuebox-prod-SourceCheck' })),
    );

    // Assess
    expect(result).toEqual({ checked: 5, problems: 2 });
    expect(api.requests).toEqual([
      `GET /2015-03-31/event-source-mappings?FunctionName=${KAFKA_FN}`,
      `GET /2015-03-31/event-source-mappings?FunctionName=${KAFKA_FN}&Marker=1`,
      `GET /2015-03-31/event-source-mappings?FunctionName=${AMQP_FN}`,
    ]);
    const json = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const errors = json.filter((line) => line.level === 'ERROR');
    expect(errors).toEqual([
      expect.objectContaining({
        uuid: 'k-sasl',
        sourceKind: 'msk',
        function: KAFKA_FN,
        state: 'Enabled',
        stateTransitionReason: 'USER_INITIATED',
        lastProcessingResult: 'PROBLEM: SASL authentication failed',
        eventSourceArn: MSK,
      }),
      expect.objectContaining({
        uuid: 'mq-authn',
        sourceKind: 'amazon-mq',
        function: AMQP_FN,
        state: 'Disabled',
        stateTransitionReason: 'EVENT_SOURCE_AUTHN_ERROR',
        lastProcessingResult: 'No records processed',
        eventSourceArn: MQ,
      }),
    ]);
    const emf = json.filter((line) => '_aws' in line);
    expect(emf).toHaveLength(1);
    expect(emf[0]).toMatchObject({
      SourceProblems: 2,
      service: 'queuebox-prod',
      _aws: { CloudWatchMetrics: [{ Namespace: 'QueueBox', Dimensions: [['service']] }] },
    });
  });

  it('writes no metric document when every mapping is healthy', async () => {
    // Prepare
    api.pages[KAFKA_FN] = [
      [
        mapping({
          UUID: 'k-idle',
          EventSourceArn: MSK,
          Topics: ['clicks'],
          LastProcessingResult: 'No records processed',
        }),
      ],
      [mapping({ UUID: 'k-off', EventSourceArn: MSK, Topics: ['legacy'], State: 'Disabled' })],
    ];
    api.pages[AMQP_FN] = [
      [mapping({ UUID: 'mq-ok', EventSourceArn: MQ, Queues: ['orders.in'], LastProcessingResult: 'OK' })],
    ];
    const handler = handlerOver();

    // Act
    const { result, lines } = await captureOutput(() =>
      handler(aTickEvent(), aLambdaContext({ functionName: 'queuebox-prod-SourceCheck' })),
    );

    // Assess
    expect(result).toEqual({ checked: 3, problems: 0 });
    const json = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(json.filter((line) => '_aws' in line)).toEqual([]);
    expect(json.filter((line) => line.level === 'ERROR')).toEqual([]);
    expect(json).toEqual([
      expect.objectContaining({ level: 'INFO', message: 'source check', checked: 3, problems: 0 }),
    ]);
  });
});
