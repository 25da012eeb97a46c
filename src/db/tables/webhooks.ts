import type { Sealed } from '../../domain/secrets.js';
import type { Generated } from 'kysely';
import type { Json } from './columns.js';

export interface WebhookEndpointsTable {
  id: Generated<string>;
  app_id: string;
  url: string;
  /** event types, or '*' (src/domain/webhooks.ts) */
  events: string[];
  description: Generated<string>;
  enabled: Generated<boolean>;
  disabled_reason: string | null;
  /** the signing secret (`whsec_…`), sealed; the replaced one still signs until previous_secret_until */
  secret: Sealed;
  previous_secret: Sealed | null;
  previous_secret_until: Date | null;
  failures: Generated<number>;
  failing_since: Date | null;
  next_attempt_at: Generated<Date>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface WebhookEventsTable {
  id: Generated<string>;
  created_at: Generated<Date>;
  endpoint_id: string;
  app_id: string;
  /** an event type, or 'batch' (a batch's outcomes: BatchOutcomes) */
  type: string;
  data: Json<Record<string, unknown>>;
  state: Generated<'pending' | 'sent' | 'failed'>;
  attempts: Generated<number>;
  due_at: Generated<Date>;
}

export interface WebhookAttemptsTable {
  id: Generated<string>;
  at: Generated<Date>;
  endpoint_id: string;
  events: number;
  status: number | null;
  latency_ms: number;
  error: string | null;
  snippet: string | null;
}
