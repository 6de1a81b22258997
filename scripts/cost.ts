/**
 * `npm run cost [-- --stage <stage>] [-- --config <file>]`: prints the itemized monthly idle cost of the install
 * `sst deploy` would create from the configuration (queuebox.yaml, or QUEUEBOX_CONFIG / --config), without AWS
 * credentials and without deploying. Its last line is `idle total: $X.XX/month`. The stage (default `dev`) only
 * matters for the checks a production stage makes (the shipped demo configuration is refused there).
 */
import { parseArgs } from 'node:util';
import { loadDeployConfig, planDeployment } from '../infra/config.ts';
import { formatIdleCost } from '../infra/cost-plan.ts';

const { values } = parseArgs({
  options: { stage: { type: 'string', default: 'dev' }, config: { type: 'string' } },
  allowPositionals: false,
});
try {
  const loaded = await loadDeployConfig(values.config === undefined ? {} : { file: values.config });
  const plan = planDeployment(loaded, { app: 'queuebox', stage: values.stage ?? 'dev' });
  console.log(formatIdleCost(plan.idleCost));
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
