/**
 * Topic templates: text with `{{ name }}` placeholders (whitespace inside the braces is allowed). Sources render
 * `{{ source }}` and `{{ eventType }}`; destinations render `{{ topic }}` and `{{ key }}`.
 */

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** Placeholders a source topic template may use. */
export const SOURCE_TEMPLATE_PLACEHOLDERS = ['source', 'eventType'] as const;

/** Placeholders a destination template (routing key, Kafka topic, NATS subject) may use. */
export const DESTINATION_TEMPLATE_PLACEHOLDERS = ['topic', 'key'] as const;

/** The placeholder names a template uses, each once, in order of first appearance: `a.{{ x }}.{{x}}` → `['x']`. */
export function templatePlaceholders(template: string): string[] {
  const names: string[] = [];
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1] ?? '';
    if (!names.includes(name)) names.push(name);
  }
  return names;
}

/** Whether a template uses the placeholder `name`. */
export function templateUses(template: string, name: string): boolean {
  return templatePlaceholders(template).includes(name);
}

/**
 * What is wrong with a template, given the placeholders it may use; empty when it is usable.
 * Messages never quote the template itself, only the offending placeholder.
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
 * Renders a template. A placeholder whose value is missing, `null` or `undefined` renders as the empty string
 * (the relay then sees an empty or shortened topic and dead-letters the row as the specification says).
 */
export function renderTemplate(
  template: string,
  values: Readonly<Record<string, string | null | undefined>>,
): string {
  return template.replace(PLACEHOLDER, (_whole, name: string) =>
    Object.hasOwn(values, name) ? (values[name] ?? '') : '',
  );
}
