import type { JourneyDefinition, JourneyState } from '../../domain/journey.js';
import type { Sealed } from '../../domain/secrets.js';
import type { TemplateEvent } from '../../domain/template-data.js';
import type { Generated } from 'kysely';
import type { HistoryEntry } from '../../domain/journey-history.js';
import type { Counter, Json } from './columns.js';

/** A journey (migration 048): its current version's definition; earlier versions in journey_versions. */
export interface JourneysTable {
  id: Generated<string>;
  app_id: string;
  name: string;
  state: JourneyState;
  version: Generated<number>;
  definition: Json<JourneyDefinition>;
  trigger_event: string | null;
  listens: Generated<string[]>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  /** its webhook steps' signing secret (`whsec_…`), sealed (migration 061); null until a version has one */
  webhook_secret: Sealed | null;
  /** archived, and its entrants are still leaving: the workers exit them a batch at a time (migration 073) */
  exiting: Generated<boolean>;
}

export interface JourneyVersionsTable {
  journey_id: string;
  version: number;
  definition: Json<JourneyDefinition>;
  created_at: Generated<Date>;
}

/** A journey's counters per step ('' the trigger), sharded. */
export interface JourneyStepCountsTable {
  journey_id: string;
  step_id: string;
  shard: number;
  entered: Counter;
  waiting: Counter;
  passed: Counter;
  sent: Counter;
  failed: Counter;
  converted: Counter;
  exited: Counter;
  skipped: Counter;
  filtered: Counter;
}

/** One entrant of a journey version (partitioned by the UTC day it entered). */
export interface JourneyEntrantsTable {
  id: Generated<string>;
  journey_id: string;
  version: number;
  app_id: string;
  entrant_key: string;
  device_id: string;
  step_id: string;
  phase: 'arrived' | 'waiting' | 'done';
  seq: Generated<number>;
  due_at: Date | null;
  wait_event: string | null;
  on_event: string | null;
  outcome: 'completed' | 'converted' | 'exited' | 'failed' | null;
  entered_at: Date;
  left_at: Date | null;
  /** the event that moved it last, which its sends' templates read (migration 055) */
  event: Json<TemplateEvent> | null;
  /** its history's first row, shared by all who entered by the same start (migration 074); null: none or its own */
  start_id: string | null;
}

/** An entrant's history, one row a move that added entries, keyed by its seq after the move (migration 070). */
export interface JourneyEntrantHistoryTable {
  /** the entrant's id, or for the first row (seq 0) the start's its entrants name (migration 074) */
  entrant_id: string;
  entered_at: Date;
  seq: number;
  /** the entries in order (src/domain/journey-history.ts) */
  entries: HistoryEntry[];
}

/** Who entered which journey, kept past the entrants' retention for the re-entry rule (migration 058). */
export interface JourneyEnteredTable {
  journey_id: string;
  entrant_key: string;
  last_entered_at: Date;
}
