import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { JourneysRepository } from '../db/repositories/journeys.js';
import type {
  DigestCount,
  EntryCandidate,
  EntryOutcome,
  EntryStart,
  JourneyEntrantsRepository,
} from '../db/repositories/journey-entrants.js';
import type { JourneyEventRow, JourneyEventsRepository } from '../db/repositories/journey-events.js';
import type { JourneyDevicesRepository, LiveDevice } from '../db/repositories/journey-devices.js';
import type { Database, Journey } from '../db/schema.js';
import type { TemplateEvent } from '../domain/template-data.js';
import { firstStep, reEntryRule, waitingArrivals, waitingEntry, type WaitingArrival } from '../domain/journey-run.js';
import { historyEntry } from '../domain/journey-history.js';
import type { Clock } from '../platform/clock.js';
import { Counts, JourneyVersions } from './journey-counts.js';
import type { FailedEvents, JourneyIntake } from './journey-engine.js';

/** What entering reads and writes. */
export interface EntryParts {
  entrants: JourneyEntrantsRepository;
  devices: DevicesRepository;
}

/** An entrant that may enter a journey: its key, its devices, and the events that brought it (none: the API). */
export interface Entry {
  journey: Journey;
  key: string;
  devices: LiveDevice[];
  events: Record<string, TemplateEvent>;
}

/**
 * Enters each entrant into its journey (at its first step) where the re-entry rule and entry filters let it,
 * counting them in `counts`: one statement for all of them, after one query for the entry filters of each journey
 * that has some. Answers the outcomes in the entries' order. The caller locked the entries (`lockEntrants`).
 */
export async function enterJourneys(
  trx: Transaction<Database>,
  parts: EntryParts,
  entries: Entry[],
  counts: Counts,
  now: Date,
): Promise<EntryOutcome[]> {
  if (entries.length === 0) return [];
  const devices = await entryDevices(trx, parts.devices, entries, now);
  // a journey's start is the same for each of its entrants: made once, one object the entering sends once
  const starts = new Map<Journey, EntryStart>();
  const candidates = entries.map(({ journey: j, key, events }, i): EntryCandidate => {
    let start = starts.get(j);
    if (!start) starts.set(j, (start = journeyStart(j, now)));
    return {
      start,
      entrantKey: key,
      deviceId: devices[i]?.id ?? null,
      event: j.trigger_event !== null && Object.hasOwn(events, j.trigger_event) ? events[j.trigger_event]! : null,
    };
  });
  const outcomes = await parts.entrants.enter(trx, { now, candidates });
  candidates.forEach(({ start }, i) => {
    const outcome = outcomes[i]!;
    counts.of(start.journeyId).add('', outcome === 'not_re_entered' ? 'skipped' : outcome, 1);
    if (outcome === 'entered') counts.of(start.journeyId).arrive(start.stepId);
  });
  return outcomes;
}

/** What every entrant of a journey entering at `now` starts with. */
function journeyStart(j: Journey, now: Date): EntryStart {
  const first = firstStep(j.definition, now);
  const history = [historyEntry(now, first.stepId, 'entered', j.trigger_event === null ? {} : { e: j.trigger_event })];
  if (first.phase === 'waiting') history.push(waitingEntry(now, first));
  return { ...first, ...reEntryRule(j.definition.re_entry), appId: j.app_id, journeyId: j.id, version: j.version, history };
}

/** The device each entry enters with: the first of its devices its journey's entry filters match (none: it does not enter). */
async function entryDevices(
  trx: Transaction<Database>,
  devices: DevicesRepository,
  entries: Entry[],
  now: Date,
): Promise<(LiveDevice | undefined)[]> {
  const filtered = new Map<Journey, Set<string>>();
  for (const e of entries) if (e.journey.definition.entry_filters?.length) filtered.set(e.journey, new Set());
  for (const e of entries) for (const d of e.devices) filtered.get(e.journey)?.add(d.id);
  const matching = new Map<Journey, Set<string>>();
  // one query a journey with filters, for every device of the entries into it
  for (const [j, ids] of filtered) matching.set(j, await devices.matchingIds(trx, j.app_id, [...ids], j.definition.entry_filters!, now));
  return entries.map((e) => {
    const match = matching.get(e.journey);
    return match ? e.devices.find((d) => match.has(d.id)) : e.devices[0];
  });
}

/** A row of recorded events with what applying it reads: its live devices, its entrant's key and every key it is held under. */
interface Recorded {
  row: JourneyEventRow;
  devices: LiveDevice[];
  key: string;
  entrantKeys: string[];
}

export type IntakeParts = EntryParts & {
  db: Db;
  journeys: JourneysRepository;
  journeyEvents: JourneyEventsRepository;
  journeyDevices: JourneyDevicesRepository;
  clock: Clock;
};

/**
 * The journey workers' side of recorded events (journey_events): entrants enter, wake and convert from them, a batch
 * of rows a transaction, set-wise where the rows are many: one lookup of the journeys, one statement of locks and one
 * of entries for the rows of different entrants, however many.
 */
export class JourneyEventIntake implements JourneyIntake {
  private readonly versions: JourneyVersions;

  constructor(private readonly deps: IntakeParts) {
    this.versions = new JourneyVersions(deps.journeys);
  }

  /**
   * Applies up to `limit` entrants' recorded events, oldest first, in one transaction that deletes their rows (a
   * worker killed meanwhile leaves them for the next); answers how many rows it took.
   */
  async takeEvents(limit: number): Promise<number> {
    return this.deps.db.transaction().execute(async (trx) => this.applyTaken(trx, await this.deps.journeyEvents.take(trx, limit)));
  }

  /**
   * After a batch failed: up to `limit` rows, each in its own transaction, so that one row that cannot be applied
   * holds only its own entrant; such a row is tried again at the next polls and dropped after `maxAttempts`.
   */
  async takeEventsSingly(limit: number, maxAttempts: number): Promise<{ taken: number; failed: FailedEvents[] }> {
    const failed: FailedEvents[] = [];
    const skipKeys: string[] = [];
    let taken = 0;
    while (taken + failed.length < limit) {
      let row: JourneyEventRow | undefined;
      try {
        const n = await this.deps.db.transaction().execute(async (trx) => {
          row = await this.deps.journeyEvents.takeOne(trx, skipKeys);
          return this.applyTaken(trx, row ? [row] : []);
        });
        if (n === 0) break;
        taken += n;
      } catch (err) {
        if (!row) throw err;
        const dropped = await this.deps.journeyEvents.failed(this.deps.db, row.id, maxAttempts);
        failed.push({ id: row.id, entrantKey: row.entrant_key, error: err, dropped });
        skipKeys.push(...row.entrant_keys);
      }
    }
    return { taken, failed };
  }

  private async applyTaken(trx: Transaction<Database>, rows: JourneyEventRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const live = await this.deps.journeyDevices.liveDevices(trx, [...new Set(rows.flatMap((r) => r.device_ids))]);
    const recorded: Recorded[] = [];
    for (const row of rows) {
      const devices = row.device_ids.flatMap((id) => (live.has(id) ? [live.get(id)!] : []));
      // every device erased since: nothing of it moves any more
      if (devices.length === 0) continue;
      const owner = row.user_id ?? devices[0]!.user_id ?? null;
      const key = owner !== null ? `u:${owner}` : `d:${devices[0]!.id}`;
      // the journeys a device entered before it had a user still hold it under its own key
      recorded.push({ row, devices, key, entrantKeys: [...new Set([key, ...devices.map((d) => `d:${d.id}`)])] });
    }
    const journeys = recorded.length
      ? await this.deps.journeys.listening(
          trx,
          [...new Set(recorded.map((r) => r.row.app_id))],
          [...new Set(recorded.flatMap((r) => r.row.keys))],
        )
      : [];
    // the counters of the whole batch, written once: one update of each counter row, not one an event
    const counts = new Counts('');
    if (journeys.length > 0) for (const wave of waves(recorded)) await this.applyWave(trx, wave, journeys, counts);
    await counts.write(trx, this.deps.journeys);
    return rows.length;
  }

  /**
   * Rows of different entrants, applied: entrants waiting at a wait_for for one of their events move on, those whose
   * version exits on one leave converted (an entrant at a time: only journeys that listen for the events have such),
   * and the journeys the events trigger are entered, all of the rows' entries by one statement. Nothing of a paused
   * journey moves; its triggers are counted skipped.
   */
  private async applyWave(trx: Transaction<Database>, wave: Recorded[], journeys: Journey[], counts: Counts): Promise<void> {
    const now = this.deps.clock.now();
    const theirs = wave.map((r) => ({
      r,
      journeys: journeys.filter(
        (j) =>
          j.app_id === r.row.app_id &&
          ((j.trigger_event !== null && r.row.keys.includes(j.trigger_event)) || j.listens.some((e) => r.row.keys.includes(e))),
      ),
    }));
    const entries: Entry[] = [];
    for (const { r, journeys: js } of theirs)
      for (const j of js) {
        if (j.trigger_event === null || !r.row.keys.includes(j.trigger_event)) continue;
        if (j.state === 'paused') counts.of(j.id).add('', 'skipped', 1);
        else if (j.state === 'active') entries.push({ journey: j, key: r.key, devices: r.devices, events: r.row.events });
      }
    // the entries serialized with any other entry of the same entrant (a user's other device's worker, the API)
    await this.deps.entrants.lockEntrants(
      trx,
      entries.map((e) => e.key),
    );
    for (const { r, journeys: js } of theirs) {
      const waking = js.filter((j) => j.state === 'active' && j.listens.some((e) => r.row.keys.includes(e)));
      if (waking.length > 0) await this.wakeAndConvert(trx, r, waking, counts, now);
    }
    await enterJourneys(trx, this.deps, entries, counts, now);
  }

  /** An entrant's events wake its entrants waiting for them, count into its digests, and convert it where they exit. */
  private async wakeAndConvert(trx: Transaction<Database>, r: Recorded, waking: Journey[], counts: Counts, now: Date): Promise<void> {
    const { app_id: appId, keys, events: byKey } = r.row;
    const { entrantKeys } = r;
    const exits: { journeyId: string; version: number; event: string; splits: boolean }[] = [];
    const arrivals: WaitingArrival[] = [];
    const digests: DigestCount[] = [];
    for (const j of waking)
      for (let version = 1; version <= j.version; version++) {
        const definition = await this.versions.get(trx, j.id, version);
        const event = definition.exit_on.find((e) => keys.includes(e));
        if (event !== undefined) exits.push({ journeyId: j.id, version, event, splits: definition.steps.some((s) => s.type === 'split') });
        arrivals.push(...waitingArrivals(j.id, version, definition));
        for (const s of definition.steps)
          if (s.type === 'digest' && keys.includes(s.event))
            digests.push({ journeyId: j.id, version, stepId: s.id, n: r.row.counts[keys.indexOf(s.event)]! });
      }
    // entrants in a digest's window count the events once, however many of the user's devices recorded them
    await this.deps.entrants.countDigests(trx, { appId, entrantKeys, digests });
    for (const left of await this.deps.entrants.convert(trx, appId, entrantKeys, exits, now)) {
      // a split path's conversions: its experiment's result
      if (left.path) counts.of(left.journey_id).add(left.step_id, 'converted', left.n);
      else {
        counts.of(left.journey_id).leave(left.step_id, 'converted', left.n);
        counts.of(left.journey_id).add('', 'converted', left.n);
      }
    }
    const journeyIds = waking.map((j) => j.id);
    const woken = await this.deps.entrants.wake(trx, { appId, entrantKeys, journeyIds, events: byKey, arrivals }, now);
    for (const w of woken) counts.of(w.journey_id).move(w.left_step, w.arrived_step);
  }
}

/**
 * The rows in waves that each hold at most one row of an entrant (by every key it is held under), in their order: a
 * wave's rows are applied together, an entrant's rows one wave after another.
 */
function waves(recorded: Recorded[]): Recorded[][] {
  const out: Recorded[][] = [];
  const lastWave = new Map<string, number>();
  for (const r of recorded) {
    const keys = [...r.entrantKeys, ...r.row.entrant_keys];
    const w = Math.max(-1, ...keys.map((k) => lastWave.get(k) ?? -1)) + 1;
    for (const k of keys) lastWave.set(k, w);
    (out[w] ??= []).push(r);
  }
  return out;
}
