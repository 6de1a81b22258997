/** Destination templates: `{{ topic }}` and `{{ key }}` (white space inside the braces allowed). */

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/**
 * Renders a destination template with the row's topic and key; a missing key (`null`) and any other placeholder
 * render as the empty string. The configuration refuses templates with other placeholders before this runs.
 */
export function renderDestinationTemplate(
  template: string,
  values: { topic: string; key: string | null },
): string {
  return template.replace(PLACEHOLDER, (_whole, name: string) => {
    if (name === 'topic') return values.topic;
    if (name === 'key') return values.key ?? '';
    return '';
  });
}
