import type { QueueBoxConfig } from '@queuebox/config';
import {
  type FunctionName,
  METRIC_NAMESPACE,
  METRICS,
  SERVICE_DIMENSION,
  TABLE_DIMENSION,
  TABLES,
} from '@queuebox/deploy-contract';
import { componentId, type FunctionPlan } from './functions-plan.ts';

// The CloudWatch alarms and their topic. Pure.

/** A CloudWatch alarm to create. */
export interface AlarmPlan {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly namespace: string;
  readonly metricName: string;
  /** Fixed dimensions; `FunctionName` is added from {@link function} when set. */
  readonly dimensions: Readonly<Record<string, string>>;
  readonly function?: FunctionName;
  readonly statistic: 'Maximum' | 'Sum' | 'SampleCount';
  readonly periodSeconds: number;
  readonly evaluationPeriods: number;
  readonly threshold: number;
  readonly comparisonOperator: 'GreaterThanThreshold' | 'LessThanThreshold';
  /**
   * `ignore` keeps the alarm's state while no datapoint arrives (a gauge published once per run);
   * `notBreaching` for function errors and ingest failures (no datapoint, no failure); `breaching` for the heartbeat.
   */
  readonly treatMissingData: 'ignore' | 'notBreaching' | 'breaching';
}

/** An SQS source whose event source mapping is enabled: its queue's age is watched (`planAlarms`). */
export interface SqsQueueWatch {
  readonly source: string;
  readonly queueArn: string;
}

/** Maintenance runs that may pass without a gauge before the heartbeat alarm fires. */
export const GAUGE_HEARTBEAT_RUNS = 3;

/** Alarms plus the notification topic's email subscribers. */
export interface AlarmsPlan {
  readonly topicName: string;
  readonly emails: readonly string[];
  readonly alarms: readonly AlarmPlan[];
}

/**
 * Period of the dead-row and oldest-pending alarms: the gauges come with the changes and with the ticks' samples
 * (the oldest pending age before each drain), not on a timer of their own.
 */
export const GAUGE_ALARM_PERIOD_SECONDS = 300;

/** The functions that answer their ingest failures instead of throwing, and count them as `IngestFailures`. */
export const INGEST_FAILURE_FUNCTIONS: readonly FunctionName[] = ['inbox-http', 'sqs-source'];

/**
 * Dead rows > 0 and oldest pending age over `aws.alarms.oldestPendingAgeSeconds`, per table, from the gauges the
 * functions publish when they change the tables (the oldest pending age also before every outbox-tick and
 * relay-tick drain) and maintenance-tick publishes as a daily heartbeat (period {@link GAUGE_ALARM_PERIOD_SECONDS}),
 * keeping their state between datapoints; a heartbeat alarm when no gauge arrives for {@link GAUGE_HEARTBEAT_RUNS}
 * maintenance periods; any `Dead` (rows that went dead) in 5 minutes, which pages for each new batch while the
 * DeadRows alarms stay latched in ALARM; any `IngestFailures` in 5 minutes (inbox-http's 5xx answers and sqs-source's handed-back
 * records, which Lambda's `Errors` never counts) when either function exists; any `AdminFailures` in 5 minutes
 * (admin-http's 5xx answers, which `Errors` never counts either) when admin-http exists; the age of the oldest
 * message of each `sqsQueues` queue over `aws.alarms.oldestPendingAgeSeconds`; any `SourceProblems` in 5 minutes (Kafka /
 * Amazon MQ mappings that cannot poll) when source-check exists; errors of each function but migrate (a
 * failing migration fails the deploy instead).
 */
export function planAlarms(
  config: QueueBoxConfig,
  functions: readonly FunctionPlan[],
  names: { readonly prefix: string; readonly service: string },
  sqsQueues: readonly SqsQueueWatch[] = [],
): AlarmsPlan {
  const gaugePeriod = Math.min(86_400, config.aws.functions.maintenanceTick.rateMinutes * 60);
  // The gauges arrive when a function changed the tables, the oldest pending age with every outbox-tick and
  // relay-tick (sampled before the drain), and daily from maintenance as a heartbeat: a short period lets a dead row
  // or a late backlog alarm within minutes of the tick that sees it; `ignore` keeps the state through the periods
  // without data.
  const changePeriod = Math.min(gaugePeriod, GAUGE_ALARM_PERIOD_SECONDS);
  const alarms: AlarmPlan[] = [];
  for (const table of TABLES) {
    const gauge = (metricName: string, threshold: number) => ({
      namespace: METRIC_NAMESPACE,
      metricName,
      dimensions: { [SERVICE_DIMENSION]: names.service, [TABLE_DIMENSION]: table },
      statistic: 'Maximum' as const,
      periodSeconds: changePeriod,
      evaluationPeriods: 1,
      threshold,
      comparisonOperator: 'GreaterThanThreshold' as const,
      // Between changes the gauges arrive once per tick or maintenance run. `missing` with one evaluation period
      // moved an alarm to INSUFFICIENT_DATA whenever a run was late, and back to ALARM on the next: `ignore` keeps
      // the state; the heartbeat below says when the gauges stop altogether.
      treatMissingData: 'ignore' as const,
    });
    alarms.push({
      id: `DeadRows${componentId(table)}Alarm`,
      name: `${names.prefix}-dead-rows-${table}`,
      description: `QueueBox ${names.service}: ${table} has dead rows (they need a requeue or a look).`,
      ...gauge(METRICS.deadRows, 0),
    });
    alarms.push({
      id: `OldestPending${componentId(table)}Alarm`,
      name: `${names.prefix}-oldest-pending-${table}`,
      description: `QueueBox ${names.service}: the oldest due pending ${table} row is older than ${config.aws.alarms.oldestPendingAgeSeconds} s.`,
      ...gauge(METRICS.oldestPendingAge, config.aws.alarms.oldestPendingAgeSeconds),
    });
  }
  // A QueueBox counter (never sent at 0) above 0 in 5 minutes: no datapoint means nothing happened.
  const counter = (metricName: string) => ({
    namespace: METRIC_NAMESPACE,
    metricName,
    dimensions: { [SERVICE_DIMENSION]: names.service },
    statistic: 'Sum' as const,
    periodSeconds: 300,
    evaluationPeriods: 1,
    threshold: 0,
    comparisonOperator: 'GreaterThanThreshold' as const,
    treatMissingData: 'notBreaching' as const,
  });
  // DeadRows > 0 is a level: it stays in ALARM while any dead row is left (until a requeue, a purge or retention), and
  // CloudWatch notifies on state changes only, so a second incident's dead rows paged nobody (an outside audit: 1 → 4
  // dead rows, no notification). The `Dead` counter the functions send as rows go dead pages for each new batch.
  alarms.push({
    id: 'NewDeadRowsAlarm',
    name: `${names.prefix}-new-dead-rows`,
    description: `QueueBox ${names.service}: rows went dead in the last 5 minutes (outbox rows out of attempts or with no route, inbox messages a broker source or the relay dead-lettered). The dead-rows alarms stay in ALARM while any dead row is left; this one fires again for each new batch. A pull worker's give-ups, in your process, are not counted here.`,
    ...counter(METRICS.dead),
  });
  alarms.push({
    id: 'GaugesHeartbeatAlarm',
    name: `${names.prefix}-gauges-missing`,
    description: `QueueBox ${names.service}: no ${METRICS.deadRows} gauge of the outbox for ${GAUGE_HEARTBEAT_RUNS} maintenance periods: neither outbox-tick (every safety tick) nor maintenance-tick (daily) has published one, so they are not running or not publishing, and the dead-row and oldest-pending alarms see nothing.`,
    namespace: METRIC_NAMESPACE,
    metricName: METRICS.deadRows,
    dimensions: { [SERVICE_DIMENSION]: names.service, [TABLE_DIMENSION]: 'outbox' },
    statistic: 'SampleCount',
    // Period × evaluations stays within CloudWatch's limits: ≤ 1 day below an hour's period, ≤ 7 days above.
    periodSeconds: gaugePeriod,
    evaluationPeriods: GAUGE_HEARTBEAT_RUNS,
    threshold: 1,
    comparisonOperator: 'LessThanThreshold',
    treatMissingData: 'breaching',
  });
  const answering = functions.filter((fn) => INGEST_FAILURE_FUNCTIONS.includes(fn.name)).map((fn) => fn.name);
  if (answering.length > 0) {
    alarms.push({
      id: 'IngestFailuresAlarm',
      name: `${names.prefix}-ingest-failures`,
      description: `QueueBox ${names.service}: ${answering.join(' / ')} handed inbound messages back unstored (a 5xx answer, an SQS record returned) in the last 5 minutes; their senders retry. The function's ERROR lines say why.`,
      ...counter(METRICS.ingestFailures),
    });
  }
  if (functions.some((fn) => fn.name === 'admin-http')) {
    // Not folded into ingest-failures (an operator's request is no inbound message, and its senders do not retry)
    // nor into errors-admin-http: alarms are priced per alarm metric (prices.ts), and that metric-math alarm would
    // read two, no cheaper than this one.
    alarms.push({
      id: 'AdminFailuresAlarm',
      name: `${names.prefix}-admin-failures`,
      description: `QueueBox ${names.service}: admin-http answered 5xx in the last 5 minutes (503: the database was unavailable or silent; 500: an unexpected error or a configuration that does not load). Its ERROR and WARN lines say why.`,
      ...counter(METRICS.adminFailures),
    });
  }
  if (functions.some((fn) => fn.name === 'source-check')) {
    // A Kafka or Amazon MQ mapping that cannot poll (a rotated SASL/SCRAM secret, brokers out of reach, a deleted
    // topic, an MQ authentication failure) invokes nothing: no QueueBox metric and no Errors move. source-check reads
    // the mappings' state and counts those.
    alarms.push({
      id: 'SourceProblemsAlarm',
      name: `${names.prefix}-source-problems`,
      description: `QueueBox ${names.service}: source-check found Kafka or Amazon MQ event source mappings of kafka-source / amqp-source that cannot poll (LastProcessingResult "PROBLEM: …", Disabled though created enabled, or an Amazon MQ failure in StateTransitionReason); their messages wait in the broker. source-check's ERROR lines name each mapping and what Lambda reports.`,
      ...counter(METRICS.sourceProblems),
      // One check per period: with 5 minutes and a check every 15, a mapping that stays broken went ALARM, OK, ALARM
      // at every check (an outside review). CloudWatch takes a period of at most a day.
      periodSeconds: Math.min(86_400, config.aws.functions.sourceCheck.rateMinutes * 60),
    });
  }
  for (const queue of sqsQueues) {
    // A mapping that cannot poll (its permissions, a KMS key the role may not use, a deleted queue) invokes nothing:
    // no QueueBox metric and no Errors move (an outside audit). The queue's own age metric does, and SQS publishes it
    // free of charge; an idle queue sends nothing or 0 (notBreaching).
    const queueName = queue.queueArn.slice(queue.queueArn.lastIndexOf(':') + 1);
    alarms.push({
      id: `${componentId(queue.source)}QueueAgeAlarm`,
      name: `${names.prefix}-sqs-oldest-${queue.source}`,
      description: `QueueBox ${names.service}: the oldest message of SQS queue ${queueName} (source ${queue.source}) is older than ${config.aws.alarms.oldestPendingAgeSeconds} s: sqs-source is not taking it (the event source mapping disabled or failing: its role's permissions, the queue's KMS key, a throttled function) or hands it back at each try. The mapping's state and sqs-source's ERROR lines say which. SQS leaves out of this metric a message received 3 times or more without being deleted.`,
      namespace: 'AWS/SQS',
      metricName: 'ApproximateAgeOfOldestMessage',
      dimensions: { QueueName: queueName },
      statistic: 'Maximum',
      periodSeconds: GAUGE_ALARM_PERIOD_SECONDS,
      evaluationPeriods: 1,
      threshold: config.aws.alarms.oldestPendingAgeSeconds,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    });
  }
  for (const fn of functions) {
    if (fn.name === 'migrate') continue;
    alarms.push({
      id: `${fn.id}ErrorsAlarm`,
      name: `${names.prefix}-errors-${fn.name}`,
      description: `QueueBox ${names.service}: ${fn.name} failed.`,
      namespace: 'AWS/Lambda',
      metricName: 'Errors',
      dimensions: {},
      function: fn.name,
      statistic: 'Sum',
      periodSeconds: 300,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: 'GreaterThanThreshold',
      treatMissingData: 'notBreaching',
    });
  }
  return { topicName: `${names.prefix}-alarms`, emails: config.aws.alarms.email, alarms };
}
