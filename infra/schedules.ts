import { SCHEDULED_TICK_EVENT } from '@queuebox/deploy-contract';
import { InfraPlanError } from './errors.ts';
import type { Functions } from './functions.ts';
import type { DeployPlan } from './plan.ts';

// The periodic safety ticks (EventBridge rules; one minute is the finest rate). Wake-ups and one-shot deferred
// ticks do the prompt work; these only bound the delay when a wake-up was lost. Their rates decide whether a
// pausable Aurora ever pauses: see infra/README.md "Idle cost".

/** Creates one sst.aws.Cron per planned schedule. */
export function createSchedules(
  plan: Pick<DeployPlan, 'schedules'>,
  functions: Functions,
  opts: $util.ComponentResourceOptions = {},
): sst.aws.Cron[] {
  return plan.schedules.map((schedule) => {
    const fn = functions[schedule.function];
    if (!fn)
      throw new InfraPlanError(
        `the schedule ${schedule.id} needs ${schedule.function}, which was not created`,
      );
    return new sst.aws.Cron(
      schedule.id,
      { function: fn.arn, schedule: schedule.expression, event: SCHEDULED_TICK_EVENT },
      opts,
    );
  });
}
