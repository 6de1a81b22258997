import * as pulumi from '@pulumi/pulumi';
import { type WebhookPlan, webhookUrl } from './api-plan.ts';

/**
 * One stack output per HTTP source: its output name (`webhook-<source>`) → the full webhook URL on the API.
 * `sst deploy` prints them; `sst output` / `.sst/outputs.json` keep them.
 */
export function webhookOutputs(
  apiUrl: pulumi.Input<string>,
  webhooks: readonly WebhookPlan[],
): Record<string, pulumi.Output<string>> {
  return Object.fromEntries(
    webhooks.map((w) => [w.output, pulumi.output(apiUrl).apply((url) => webhookUrl(url, w.path))]),
  );
}
