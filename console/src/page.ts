import type { Api, KeyInfo } from './api.js';
import { h } from './dom.js';

export interface Session {
  api: Api;
  key: KeyInfo;
}

/** A page renders into `main` and returns what stops its timers when the user leaves it. */
export type Page = (session: Session, main: HTMLElement, params: string[]) => Promise<(() => void) | void>;

export const errorBox = (err: unknown) => h('p', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err));

/** Repeats `fn` every `ms` until the returned stop is called (or `fn` answers false); one run at a time. */
export function every(ms: number, fn: () => Promise<boolean | void>): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    const again = await fn().catch(() => true);
    if (!stopped && again !== false) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
