import * as aws from '@pulumi/aws';
import * as pulumi from '@pulumi/pulumi';
import {
  DESTINATION_DIMENSION,
  type FunctionName,
  METRIC_NAMESPACE,
  METRICS,
  SERVICE_DIMENSION,
  TABLE_DIMENSION,
  TABLES,
} from '@queuebox/deploy-contract';

// One CloudWatch dashboard per install: the gauges the alarms watch, QueueBox's counters, and the Lambda and API
// Gateway metrics AWS publishes anyway.

/** What the dashboard shows. */
export interface DashboardInput {
  readonly name: string;
  readonly region: string;
  /** The metrics' `service` dimension (`<app>-<stage>`). */
  readonly service: string;
  readonly functionNames: Readonly<Partial<Record<FunctionName, string>>>;
  /** API Gateway HTTP API id, for request and error counts. */
  readonly apiId?: string;
}

type Metric = (string | Record<string, string>)[];

interface Widget {
  readonly type: 'metric' | 'text';
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
  readonly properties: Record<string, unknown>;
}

/** The dashboard body (CloudWatch's JSON shape, as an object). Pure. */
export function dashboardBody(input: DashboardInput): { widgets: Widget[] } {
  const widgets: Widget[] = [];
  let slot = 0;
  const add = (title: string, metrics: Metric[], extra: Record<string, unknown> = {}) => {
    widgets.push({
      type: 'metric',
      x: (slot % 2) * 12,
      y: 2 + Math.floor(slot / 2) * 6,
      width: 12,
      height: 6,
      properties: { title, region: input.region, view: 'timeSeries', period: 300, metrics, ...extra },
    });
    slot += 1;
  };
  widgets.push({
    type: 'text',
    x: 0,
    y: 0,
    width: 24,
    height: 2,
    properties: {
      markdown: `# QueueBox ${input.service}\nThe oldest pending age is sampled by outbox-tick (outbox; the inbox too where no relay-tick runs) and relay-tick (inbox) before every drain; both gauges also come from the functions that change the tables and daily from maintenance-tick. Alarms fire on dead rows > 0, rows that went dead in the last 5 minutes, an oldest pending age over its threshold, ingest failures > 0, admin failures (admin-http's 5xx answers) > 0 and function errors. The outbox counters by destination show which destination fails.`,
    },
  });
  const gauge = (name: string) =>
    TABLES.map((table) => [
      METRIC_NAMESPACE,
      name,
      SERVICE_DIMENSION,
      input.service,
      TABLE_DIMENSION,
      table,
      { stat: 'Maximum', label: table },
    ]);
  const counters = (names: string[]) =>
    names.map((name) => [
      METRIC_NAMESPACE,
      name,
      SERVICE_DIMENSION,
      input.service,
      { stat: 'Sum', label: name },
    ]);
  add('Dead rows', gauge(METRICS.deadRows));
  add('Oldest pending age (s)', gauge(METRICS.oldestPendingAge));
  add(
    'Inbox',
    counters([
      METRICS.accepted,
      METRICS.duplicate,
      METRICS.rejected,
      METRICS.ingestFailures,
      METRICS.forwarded,
      METRICS.sourceProblems,
    ]),
  );
  add('Outbox', counters([METRICS.sent, METRICS.retried, METRICS.dead, METRICS.stale]));
  // One line per destination that moved: outbox-tick sends these with { service, Destination } only when not 0.
  const byDestination = (name: string, id: string) => [
    {
      expression: `SEARCH('{${METRIC_NAMESPACE},${DESTINATION_DIMENSION},${SERVICE_DIMENSION}} MetricName="${name}" ${SERVICE_DIMENSION}="${input.service}"', 'Sum', 300)`,
      label: `${name} \${PROP('Dim.${DESTINATION_DIMENSION}')}`,
      id,
    },
  ];
  add('Outbox by destination', [
    byDestination(METRICS.retried, 'retried'),
    byDestination(METRICS.dead, 'dead'),
    byDestination(METRICS.sent, 'sent'),
  ]);
  add('Admin API failures (5xx)', counters([METRICS.adminFailures]));
  add('Delivery latency (ms)', [
    [
      METRIC_NAMESPACE,
      METRICS.deliveryLatency,
      SERVICE_DIMENSION,
      input.service,
      { stat: 'p50', label: 'p50' },
    ],
    [
      METRIC_NAMESPACE,
      METRICS.deliveryLatency,
      SERVICE_DIMENSION,
      input.service,
      { stat: 'p99', label: 'p99' },
    ],
  ]);
  const functions = Object.entries(input.functionNames).filter((e): e is [FunctionName, string] => !!e[1]);
  const perFunction = (metric: string, stat: string) =>
    functions.map(([fn, name]) => ['AWS/Lambda', metric, 'FunctionName', name, { stat, label: fn }]);
  add('Function errors', perFunction('Errors', 'Sum'));
  add('Function invocations', perFunction('Invocations', 'Sum'));
  add('Function duration p99 (ms)', perFunction('Duration', 'p99'));
  add('Function throttles', perFunction('Throttles', 'Sum'));
  if (input.apiId !== undefined) {
    add(
      'API requests',
      ['Count', '4xx', '5xx'].map((m) => [
        'AWS/ApiGateway',
        m,
        'ApiId',
        input.apiId ?? '',
        { stat: 'Sum', label: m },
      ]),
    );
  }
  return { widgets };
}

/** Creates the dashboard once names, region and API id are known. */
export function createDashboard(
  input: pulumi.Input<{
    readonly name: pulumi.Input<string>;
    readonly region: pulumi.Input<string>;
    readonly service: string;
    readonly functionNames: Readonly<Partial<Record<FunctionName, pulumi.Input<string>>>>;
    readonly apiId?: pulumi.Input<string>;
  }>,
  opts: pulumi.CustomResourceOptions = {},
): aws.cloudwatch.Dashboard {
  const resolved = pulumi.output(input);
  return new aws.cloudwatch.Dashboard(
    'Dashboard',
    {
      dashboardName: resolved.name,
      dashboardBody: resolved.apply((i) => JSON.stringify(dashboardBody(i as DashboardInput))),
    },
    opts,
  );
}

/** The console URL of a dashboard. */
export function dashboardUrl(region: string, name: string): string {
  return `https://${region}.console.aws.amazon.com/cloudwatch/home?region=${region}#dashboards/dashboard/${encodeURIComponent(name)}`;
}
