/** The console's only way out: the public HTTP API, with the signed-in key as a Basic credential. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface KeyInfo {
  role: 'read' | 'write';
  app: { id: string; bundle_id: string; name: string };
}

export interface NotificationRecord {
  id: string;
  created_at: string;
  state: 'scheduled' | 'sending' | 'sent' | 'failed' | 'canceled';
  /** the audience it went to; null for a transactional send, which names its device or user instead */
  to: { id: string | null };
  /** as submitted: `to` is "*", {audience}, filters, or a transactional send's {field, value} with its extra filters */
  notification: {
    to: unknown;
    payload?: Record<string, unknown>;
    extra_filters?: unknown[];
    /** an A/B test's variants, as submitted (it has no payload of its own) */
    variants?: { payload: Record<string, unknown> }[];
    quiet_hours?: { start: string; end: string; then: 'hold' | 'drop' } | false;
    cap?: boolean;
  };
  group: string | null;
  devices_targeted: number;
  /** matched but not sent a visible push: their notifications are Disabled */
  devices_not_allowed?: number;
  pushes_succeeded: number;
  pushes_failed: number;
  tokens_invalidated: number;
  /** not sent: the device was at one of the app's frequency caps */
  pushes_capped: number;
  /** not sent: inside quiet hours that drop */
  skipped_quiet_hours: number;
  published_at: string | null;
  finished_at: string | null;
  failure_reason: string | null;
  send_at: string | null;
  local_time: boolean;
  skipped_past_local_time: number;
  throttle: { per_minute: number } | null;
  canceled_at: string | null;
  estimated_finish_at: string | null;
}

export interface Audience {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export class Api {
  constructor(private readonly key: string) {}

  async call<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
    const res = await fetch(path, {
      method,
      headers: {
        authorization: `Basic ${btoa(`:${this.key}`)}`,
        // no Basic challenge back, so a wrong key is the console's message rather than the browser's dialog
        'x-requested-with': 'XMLHttpRequest',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json().catch(() => ({}))) as { error?: string };
    if (!res.ok) throw new ApiError(res.status, json.error ?? `HTTP ${res.status}`);
    return json as T;
  }

  get = <T>(path: string) => this.call<T>('GET', path);
  post = <T>(path: string, body: unknown) => this.call<T>('POST', path, body);
  patch = <T>(path: string, body: unknown) => this.call<T>('PATCH', path, body);
  delete = <T>(path: string) => this.call<T>('DELETE', path);
}
