/** What JourneyEntrantsRepository takes and answers about entries, exits and digest counts. */
import type { HistoryEntry } from '../../domain/journey-history.js';
import type { TemplateEvent } from '../../domain/template-data.js';

/** How every entrant of a journey version starts, at its first step, with its re-entry rule as `reEntryRule` gives it. */
export interface EntryStart {
  appId: string;
  journeyId: string;
  version: number;
  stepId: string;
  phase: 'arrived' | 'waiting';
  dueAt: Date;
  waitEvent: string | null;
  onEvent: string | null;
  afterExit: boolean;
  afterMs: number;
  /** its history's first entries */
  history: HistoryEntry[];
}

/** An entrant that may enter a journey: candidates of one journey share its start (one object, sent once). */
export interface EntryCandidate {
  start: EntryStart;
  entrantKey: string;
  /** the device it enters with: the first its entry filters match (null: none, it does not enter) */
  deviceId: string | null;
  /** the event that entered it, which its sends' templates read (null: entered through the API) */
  event: TemplateEvent | null;
}

/** What an entry did: entered, or not (the entry filters, or the re-entry rule). */
export type EntryOutcome = 'entered' | 'filtered' | 'not_re_entered';

/** Events of a digest step's name an entrant recorded, as many as `n`. */
export interface DigestCount {
  journeyId: string;
  version: number;
  stepId: string;
  n: number;
}

/** Entrants that left at once (an exit event, an archive), counted at the step they left. */
export interface LeftAt {
  journey_id: string;
  step_id: string;
  n: number;
}
