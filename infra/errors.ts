import { QueueBoxError } from '@queuebox/core';

/** A planning invariant was broken (a bug, or a configuration that validation should have refused). */
export class InfraPlanError extends QueueBoxError {}
