// Moved to @queuebox/services, which both shells share; re-exported so @queuebox/local keeps its API.
export { inboxSources } from '@queuebox/services';
