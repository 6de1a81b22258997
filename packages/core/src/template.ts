/**
 * Topic templates: text with `{{ name }}` placeholders (white space inside the braces is allowed). A source's
 * `topic` renders `{{ source }}` and `{{ eventType }}` (the relay); a destination's routing key, Kafka topic or
 * NATS subject renders `{{ topic }}` and `{{ key }}` (the publishers). The configuration validates templates with
 * `templateProblems` and the workers render them with `renderTemplate`, so both read one syntax.
 */

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** Placeholders a source topic template may use. */
export const SOURCE_TEMPLATE_PLACEHOLDERS = ['source', 'eventType'] as const;

/** Placeholders a destination template (routing key, Kafka topic, NATS subject) may use. */
export const DESTINATION_TEMPLATE_PLACEHOLDERS = ['topic', 'key'] as const;

/**
 * The topic template of a source that sets none: `{{ eventType }}` for an HTTP source, `{{ source }}` for a broker
 * source (the specification: an AMQP message carries no event type of its own).
 */
export function defaultSourceTopicTemplate(type: string): string {
  return type === 'http' ? '{{ eventType }}' : '{{ source }}';
}

/** The placeholder names a template uses, each once, in order of first appearance: `a.{{ x }}.{{x}}` → `['x']`. */
export function templatePlaceholders(template: string): string[] {
  const names: string[] = [];
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1] ?? '';
    if (!names.includes(name)) names.push(name);
  }
  return names;
}

/** Whether a template uses the placeholder `name` (with any spacing inside the braces). */
export function templateUses(template: string, name: string): boolean {
  return templatePlaceholders(template).includes(name);
}

/**
 * What is wrong with a template, given the placeholders it may use; empty when it is usable. Messages never quote
 * the template itself, only the offending placeholder, so callers prefix them with the template's path.
 */
export function templateProblems(template: string, allowed: readonly string[]): string[] {
  const problems: string[] = [];
  const rest = template.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) problems.push('has an unmatched "{{" or "}}"');
  for (const name of templatePlaceholders(template)) {
    if (name === '') {
      problems.push('has an empty placeholder "{{ }}"');
    } else if (!allowed.includes(name)) {
      const choices = allowed.map((a) => `{{ ${a} }}`).join(' or ');
      problems.push(`uses {{ ${name} }}, which is not available here; use ${choices}`);
    }
  }
  return problems;
}

/**
 * Renders a template. A placeholder whose value is missing, `null` or `undefined` renders as the empty string: a
 * row without a key renders `{{ key }}` empty, and a source topic that renders empty makes the relay dead-letter
 * the row, as the specification says.
 */
export function renderTemplate(
  template: string,
  values: Readonly<Record<string, string | null | undefined>>,
): string {
  return template.replace(PLACEHOLDER, (_whole, name: string) =>
    Object.hasOwn(values, name) ? (values[name] ?? '') : '',
  );
}
