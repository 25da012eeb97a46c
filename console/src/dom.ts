/** A few lines instead of a framework: build elements, replace contents, format numbers. */
type Child = Node | string | number | null | undefined | false;
type Props = Record<string, unknown>;

function apply(el: Element, props: Props): void {
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value as EventListener);
    else if (key === 'text') el.textContent = String(value);
    // through the CSSOM: the content security policy refuses style attributes
    else if (key === 'style' && typeof value === 'object') Object.assign((el as HTMLElement).style, value);
    else if (key === 'value' && 'value' in el) (el as HTMLInputElement).value = String(value);
    else if (key === 'checked' && 'checked' in el) (el as HTMLInputElement).checked = Boolean(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

function append(el: Element, children: Child[]): void {
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === 'number' ? String(c) : c);
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
export function s(tag: string, props: Props = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  apply(el, props);
  append(el, children);
  return el;
}

/** A panel of a page: a section under its heading. */
export const panel = (title: string, ...children: Child[]): HTMLElement =>
  h('section', { class: 'panel' }, h('h2', {}, title), ...children);

/** A radio button and its label, inline; `onPick` runs when the user picks it. */
export const radioChoice = (name: string, value: string, label: string, checked: boolean, onPick: () => void): HTMLLabelElement =>
  h('label', { class: 'inline' }, h('input', { type: 'radio', name, value, checked, onchange: onPick }), ` ${label}`);

/** An empty slot under a field for the API's message about `path`, filed in `slots` by that path. */
export function errorSlot(slots: Map<string, HTMLElement>, path: string): HTMLDivElement {
  const el = h('div', { class: 'field-error', 'data-error': path });
  slots.set(path, el);
  return el;
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

export const fmt = (n: number): string => n.toLocaleString('en-US');

/** A previewed request as the console shows it: its headers, its body, then its size. */
export const requestPreview = (headers: unknown, body: unknown, size: string): string =>
  `${JSON.stringify(headers, null, 2)}\n${JSON.stringify(body, null, 2)}\n\n${size}`;
export const pct = (part: number, whole: number): string => (whole === 0 ? '0 %' : `${Math.round((part / whole) * 1000) / 10} %`);
export const when = (iso: string | null): string => (iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : '—');

/** Runs `fn` once the calls stop for `ms`. */
export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number): (...args: A) => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
