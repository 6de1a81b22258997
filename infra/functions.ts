import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FUNCTION_ENV, type FunctionName } from '@queuebox/deploy-contract';
import type { Database } from './database.ts';
import { functionArgs } from './functions-plan.ts';
import type { Network } from './network.ts';
import type { DeployPlan } from './plan.ts';
import type { Secrets } from './secrets.ts';
import type { DeferredTickScheduling } from './wake-ups.ts';

// The Lambda functions, named by handler path only (functions/<name>.handler). Each package carries the shipped
// queuebox.yaml; loadConfig() reads it through QUEUEBOX_CONFIG and resolves its secret:// references.

/** The created functions by name (only those the plan needs). */
export type Functions = Partial<Record<FunctionName, sst.aws.Function>>;

/** Writes the shipped configuration under `.queuebox/deploy/<stage>/` (git-ignored); returns its relative path. */
export function writeFunctionConfig(root: string, stage: string, text: string): string {
  const relative = join('.queuebox', 'deploy', stage, 'queuebox.yaml');
  const file = join(root, relative);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  return relative;
}

/** Creates every planned function, wake-up targets first so their names can be passed on. */
export function createFunctions(
  plan: DeployPlan,
  deps: {
    readonly root: string;
    readonly network: Network;
    readonly database: Database;
    readonly secrets: Secrets;
    readonly deferredTicks?: DeferredTickScheduling;
  },
): Functions {
  const configFile = writeFunctionConfig(deps.root, plan.stage, plan.functionConfig);
  const ready = [...deps.database.ready, ...deps.secrets.copies.map((c) => c.version)];
  const created: Functions = {};
  for (const fn of plan.functions) {
    const environment: Record<string, $util.Input<string>> = { ...plan.environment };
    if (deps.database.clusterArn !== undefined) {
      environment[FUNCTION_ENV.databaseClusterArn] = deps.database.clusterArn;
      environment[FUNCTION_ENV.databaseSecretArn] = deps.database.secretArn;
    }
    for (const wakeup of plan.wakeups.filter((w) => w.from === fn.name)) {
      const target = created[wakeup.to];
      if (target) environment[wakeup.env] = target.name;
    }
    if (fn.name === 'source-check' && plan.sourceCheck !== undefined) {
      // The broker source functions are created first (FUNCTION_NAMES order): their names, and the mappings
      // created disabled.
      for (const target of plan.sourceCheck.targets) {
        const source = created[target.function];
        if (source) environment[target.env] = source.name;
      }
      environment[FUNCTION_ENV.disabledSourceMappings] = plan.sourceCheck.disabledMappings;
    }
    if (deps.deferredTicks && plan.deferredTicks.includes(fn.name)) {
      environment[FUNCTION_ENV.wakeScheduleGroup] = deps.deferredTicks.group.name;
      environment[FUNCTION_ENV.wakeSchedulerRoleArn] = deps.deferredTicks.role.arn;
    }
    created[fn.name] = new sst.aws.Function(
      fn.id,
      {
        ...functionArgs(plan, fn, configFile),
        ...(deps.network.functionVpc === undefined ? {} : { vpc: deps.network.functionVpc }),
        environment,
      },
      { dependsOn: ready },
    );
  }
  return created;
}

/** One attribute of every created function, by function name (ARNs, names, role names). */
export function eachFunction<T>(
  functions: Functions,
  pick: (fn: sst.aws.Function) => T,
): Partial<Record<FunctionName, T>> {
  return Object.fromEntries(
    Object.entries(functions).flatMap(([name, fn]) => (fn ? [[name, pick(fn)]] : [])),
  ) as Partial<Record<FunctionName, T>>;
}
