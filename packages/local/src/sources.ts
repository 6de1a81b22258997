// Moved to @queuebox/use-cases, which both shells share; re-exported so @queuebox/local keeps its API.
export { inboxSources } from '@queuebox/use-cases';
