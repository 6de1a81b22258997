/// <reference path="./.sst/platform/config.d.ts" />

// QueueBox on AWS. This file only composes infra/ by concern; what exists is decided by infra/plan.ts (composing infra/*-plan.ts) from the
// validated queuebox.yaml (or the file named by QUEUEBOX_CONFIG). See infra/README.md.

export default $config({
  app(input) {
    const production = ['prod', 'production'].includes(input?.stage ?? '');
    return { name: 'queuebox', home: 'aws', removal: production ? 'retain' : 'remove', protect: production };
  },
  async run() {
    const root = $cli.paths.root;
    const { loadDeployConfig, planDeployment } = await import('./infra/config.ts');
    const plan = planDeployment(await loadDeployConfig({ root }), { app: $app.name, stage: $app.stage });
    for (const warning of plan.warnings) console.warn(`QueueBox: ${warning}`);
    const { formatIdleCost } = await import('./infra/cost-plan.ts');
    console.log(formatIdleCost(plan.idleCost));

    const { createNetwork } = await import('./infra/network.ts');
    const { createDatabase } = await import('./infra/database.ts');
    const { createSecrets } = await import('./infra/secrets.ts');
    const { createDeferredTickScheduling, allowSchedulerToInvoke, createWakeOutboxPolicy } = await import(
      './infra/wake-ups.ts'
    );
    const { createFunctions, eachFunction } = await import('./infra/functions.ts');
    const { createFunctionPolicies } = await import('./infra/permissions.ts');
    const { createApi } = await import('./infra/api.ts');
    const { createMigrationRun, deployedMigrationsHash } = await import('./infra/migrations.ts');
    const { createSchedules } = await import('./infra/schedules.ts');
    const { createBrokerTriggers } = await import('./infra/brokers.ts');
    const { createAlarms } = await import('./infra/alarms.ts');
    const { createDashboard, dashboardUrl } = await import('./infra/dashboard.ts');

    const account = {
      partition: aws.getPartitionOutput().partition,
      region: aws.getRegionOutput().region,
      accountId: aws.getCallerIdentityOutput().accountId,
    };
    const network = createNetwork(plan.network);
    // A retaining stage keeps the URL secret with the cluster (infra/secret-copies.ts createDatabaseUrlSecret).
    const database = createDatabase(plan, network, { retain: $app.removal !== 'remove' });
    const secrets = createSecrets(plan.secrets);
    const deferredTicks =
      plan.deferredTicks.length > 0
        ? createDeferredTickScheduling({ groupName: `${plan.service}-ticks`, accountId: account.accountId })
        : undefined;
    const functions = createFunctions(plan, { root, network, database, secrets, deferredTicks });
    const arns = eachFunction(functions, (fn) => fn.arn);
    const names = eachFunction(functions, (fn) => fn.name);
    if (deferredTicks)
      allowSchedulerToInvoke(
        deferredTicks.role,
        plan.deferredTicks.flatMap((fn) => arns[fn] ?? []),
      );
    const policies = createFunctionPolicies(
      plan,
      eachFunction(functions, (fn) => fn.nodes.role.name),
      $output({
        account,
        functionArns: arns,
        managedSecretArns: secrets.arns,
        databaseSecretArn: database.secretArn,
        ...(database.clusterArn === undefined ? {} : { databaseClusterArn: database.clusterArn }),
        ...(deferredTicks
          ? { scheduleGroupName: deferredTicks.group.name, schedulerRoleArn: deferredTicks.role.arn }
          : {}),
      }),
    );

    const api = createApi(plan, functions);
    const migrate = functions.migrate;
    // A replaced cluster has a new resource id: the migration runs again on the empty database.
    const cluster = database.aurora?.nodes.cluster?.clusterResourceId;
    const migration = migrate
      ? createMigrationRun({
          functionName: migrate.name,
          hash: await deployedMigrationsHash(plan.database.provider),
          database: plan.database,
          ...(cluster ? { cluster } : {}),
          opts: { dependsOn: [...database.ready, ...Object.values(policies)] },
        })
      : undefined;
    createSchedules(plan, functions, { dependsOn: migration ? [migration] : [] });
    createBrokerTriggers(
      plan.brokerTriggers,
      {
        functionArns: arns,
        privateSubnetIds: network.privateSubnetIds,
        securityGroupIds: network.securityGroupIds,
      },
      { dependsOn: [...Object.values(policies), ...(migration ? [migration] : [])] },
    );
    // After the migration, which publishes the first gauges: gauges-missing treats missing data as breaching.
    const alarms = createAlarms(plan.alarms, names, { dependsOn: migration ? [migration] : [] });
    const dashboardName = plan.service;
    if (plan.dashboard) {
      createDashboard({
        name: dashboardName,
        region: account.region,
        service: plan.service,
        functionNames: names,
        apiId: api.api.nodes.api.id,
      });
    }
    // What an application needs to wake outbox-tick after its commit (@queuebox/client createOutboxWaker).
    const wakeOutbox = createWakeOutboxPolicy(plan.service, arns['outbox-tick']);

    return {
      api: api.url,
      ...api.webhooks,
      database: plan.database.kind === 'aurora' ? 'Aurora Serverless v2 PostgreSQL' : plan.database.secretArn,
      alarmTopic: alarms.topic.arn,
      ...(plan.dashboard
        ? { dashboard: account.region.apply((region) => dashboardUrl(region, dashboardName)) }
        : {}),
      ...(wakeOutbox
        ? { outboxTickFunction: names['outbox-tick'], wakeOutboxPolicyArn: wakeOutbox.arn }
        : {}),
    };
  },
});
