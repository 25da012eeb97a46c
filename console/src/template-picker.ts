import type { Api } from './api.js';
import { h } from './dom.js';

/** A stored template as the pickers list it. */
export interface StoredTemplate {
  id: string;
  name: string;
  version: number;
}

/** The app's stored templates, for a picker (none when the key cannot read them). */
export async function storedTemplates(api: Api): Promise<StoredTemplate[]> {
  return (await api.get<{ templates: StoredTemplate[] }>('/v6/templates?per=1000')).templates;
}

/** A select of the stored templates, its first option "none" (the fields written instead); calls back with the id. */
export function templateSelect(
  templates: StoredTemplate[],
  selected: string,
  onChange: (id: string) => void,
  attrs: Record<string, string>,
): HTMLSelectElement {
  return h(
    'select',
    { ...attrs, onchange: (e: Event) => onChange((e.target as HTMLSelectElement).value) },
    h('option', { value: '' }, '(none: the text written here)'),
    ...templates.map((t) => h('option', { value: t.id, selected: t.id === selected }, `${t.name} (v${t.version})`)),
  );
}
