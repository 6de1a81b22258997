// infra/ and functions/ share one module of names (@queuebox/deploy-contract). This checks that they also agree on
// its use: every metric the dashboard or an alarm reads is emitted by a function and every emitted metric is read
// (issue 14 found DeliveryLatency graphed but never emitted, and Stale emitted but never listed); every variable a
// function reads is set by infra; and no file spells a shared name as a literal instead of importing it.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { DESTINATION_DIMENSION, FUNCTION_ENV, METRIC_NAMESPACE, METRICS } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { dashboardBody } from '../../infra/dashboard.ts';
import { planDeployment } from '../../infra/plan.ts';
import {
  aConfigInput,
  aDeployConfig,
  aKafkaSource,
  anAmqpSource,
  anHttpSource,
  MQ_ARN,
  MQ_SECRET,
} from './fixtures.ts';

const ROOT = join(import.meta.dirname, '..', '..');

function sources(dir: string): { file: string; text: string }[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts') && !name.includes('node_modules'))
    .map((name) => ({
      file: relative(ROOT, join(ROOT, dir, name)),
      text: readFileSync(join(ROOT, dir, name), 'utf8'),
    }));
}

/** The keys of `object` that `files` reference as `<object>.<key>`. */
function referenced(files: readonly { text: string }[], object: string): Set<string> {
  const found = new Set<string>();
  for (const { text } of files) {
    for (const match of text.matchAll(new RegExp(`\\b${object}\\.(\\w+)`, 'g')))
      if (match[1]) found.add(match[1]);
  }
  return found;
}

const functions = sources('functions');
const infra = sources('infra');

/** The files of `files` that reference `identifier` (not as part of a longer one). */
function referencing(files: readonly { file: string; text: string }[], identifier: string): string[] {
  return files.filter(({ text }) => new RegExp(`\\b${identifier}\\b`).test(text)).map(({ file }) => file);
}

/** A full plan: every function exists (HTTP, Kafka, push sources), so every variable and alarm is planned. */
function aFullPlan() {
  return planDeployment(
    aDeployConfig(
      aConfigInput({
        sources: { stripe: anHttpSource(), clicks: aKafkaSource(), orders: anAmqpSource() },
        aws: { sources: { orders: { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET } } } },
      }),
    ),
    { app: 'queuebox', stage: 'prod', env: {} },
  );
}

describe('the deploy contract between infra/ and functions/', () => {
  it('graphs or alarms on exactly the metrics the functions emit, and those are all of METRICS', () => {
    // Prepare
    const plan = planDeployment(aDeployConfig(), { app: 'queuebox', stage: 'prod', env: {} });
    const body = dashboardBody({
      name: 'd',
      region: 'eu-west-1',
      service: 'queuebox-prod',
      functionNames: {},
    });

    // Act
    const graphed = new Set(
      body.widgets.flatMap((w) =>
        ((w.properties.metrics as unknown[][] | undefined) ?? [])
          .filter((m) => m[0] === METRIC_NAMESPACE)
          .map((m) => String(m[1])),
      ),
    );
    for (const alarm of plan.alarms.alarms)
      if (alarm.namespace === METRIC_NAMESPACE) graphed.add(alarm.metricName);
    const emitted = new Set<string>(
      [...referenced(functions, 'METRICS')].map((key) => METRICS[key as keyof typeof METRICS]),
    );

    // Assess
    const all = [...Object.values(METRICS)].sort();
    expect([...emitted].sort()).toEqual(all);
    expect([...graphed].sort()).toEqual(all);
  });

  it('sets every variable a function reads, and the functions read every one infra sets (or a library does)', () => {
    // Prepare
    const plan = aFullPlan();
    const readByLibraries: Record<string, string> = {
      [FUNCTION_ENV.config]: 'loadConfig() of @queuebox/config',
      [FUNCTION_ENV.serviceName]: 'Powertools Logger and Metrics',
      [FUNCTION_ENV.logLevel]: 'Powertools Logger',
      [FUNCTION_ENV.extraCaCerts]: 'Node.js at start-up',
      // The shipped configuration's database.dataApi refers to them as env://: loadConfig resolves them.
      [FUNCTION_ENV.databaseClusterArn]: 'loadConfig() (env:// in database.dataApi)',
      [FUNCTION_ENV.databaseSecretArn]: 'loadConfig() (env:// in database.dataApi)',
    };

    // Act
    const set = new Set([
      ...Object.keys(plan.environment),
      ...plan.wakeups.map((w) => w.env),
      ...(plan.deferredTicks.length > 0
        ? [FUNCTION_ENV.wakeScheduleGroup, FUNCTION_ENV.wakeSchedulerRoleArn]
        : []),
      // infra/functions.ts gives source-check the broker source functions' names and the mappings created disabled.
      ...(plan.sourceCheck
        ? [...plan.sourceCheck.targets.map((t) => t.env), FUNCTION_ENV.disabledSourceMappings]
        : []),
      // infra/functions.ts sets the cluster's ARNs when the functions use the Data API (the default layout); the
      // shipped configuration must name exactly those variables.
      ...(plan.database.kind === 'aurora' && plan.database.access === 'data-api'
        ? [FUNCTION_ENV.databaseClusterArn, FUNCTION_ENV.databaseSecretArn].filter((name) =>
            plan.functionConfig.includes(`env://${name}`),
          )
        : []),
    ]);
    const read = [...referenced(functions, 'FUNCTION_ENV')].map(
      (key) => FUNCTION_ENV[key as keyof typeof FUNCTION_ENV],
    );

    // Assess
    for (const name of read)
      expect(set, `${name} is read by a function but never set by infra`).toContain(name);
    for (const name of set) {
      expect(
        (read as string[]).includes(name) || name in readByLibraries,
        `${name} is set by infra but read by nothing`,
      ).toBe(true);
    }
    expect(Object.values(FUNCTION_ENV).filter((name) => !set.has(name))).toEqual([]);
  });

  it('spells no shared name as a literal in infra/ or functions/', () => {
    // Prepare
    const names = [
      ...Object.values(METRICS),
      ...Object.values(FUNCTION_ENV),
      METRIC_NAMESPACE,
      DESTINATION_DIMENSION,
    ];

    // Act
    const literals = [...functions, ...infra].flatMap(({ file, text }) =>
      names
        .filter((name) => text.includes(`'${name}'`) || text.includes(`"${name}"`))
        .map((name) => `${file}: ${name}`),
    );

    // Assess
    expect(literals).toEqual([]);
  });

  it('emits the per-destination counters from outbox-tick, and the dashboard reads them', () => {
    expect(referencing(functions, 'DESTINATION_DIMENSION')).toEqual(['functions/outbox-tick.ts']);
    expect(referencing(infra, 'DESTINATION_DIMENSION')).toContain('infra/dashboard.ts');
  });
});
