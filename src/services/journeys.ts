import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { JourneysRepository, StepCounts } from '../db/repositories/journeys.js';
import type { EntryCandidate, JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import type { Database, Device, Journey } from '../db/schema.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import { eventKeys, eventsByKey, listenedEvents, type JourneyDefinition, type JourneyFields } from '../domain/journey.js';
import type { EventInput } from '../domain/device-input.js';
import type { TemplateEvent } from '../domain/template-data.js';
import { firstStep, reEntryRule } from '../domain/journey-run.js';
import type { Clock } from '../platform/clock.js';
import { Counts, JourneyVersions } from './journey-counts.js';
import type { ServiceDeps } from './deps.js';
import { CLI_ACTOR, type Actor } from '../domain/audit.js';
import { recordAudit } from './audit.js';

/** A journey as the API answers it: the row and its counters per step ('' the trigger). */
export interface JourneyRecord {
  journey: Journey;
  counts: Map<string, StepCounts>;
}

/** Who an API entry names: a device, or a user (all of whose devices get the sends). */
export type ApiEntrant = { device_id: string } | { user_id: string };
export type EntryOutcome = 'entered' | 'filtered' | 'not_re_entered' | 'paused';

/** Splits a definition from the journey's own fields (name, state). */
export function definitionOf(fields: JourneyFields): JourneyDefinition {
  const { name: _name, state: _state, ...definition } = fields;
  return definition;
}

/**
 * Journeys, their side the API and the events see: definitions and their life cycle, and entering, waking and
 * converting entrants as events are recorded (in the event's own transaction). The steps themselves are run by
 * `JourneyEngine` (journey-engine.ts), from the workers' poller.
 */
export class JourneyService {
  private readonly versions: JourneyVersions;

  private readonly deps: {
    db: Db;
    readDb: Db;
    journeys: JourneysRepository;
    entrants: JourneyEntrantsRepository;
    devices: DevicesRepository;
    clock: Clock;
  };

  constructor(deps: Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock'>) {
    const { repos } = deps;
    this.deps = { ...deps, journeys: repos.journeys, entrants: repos.journeyEntrants, devices: repos.devices };
    this.versions = new JourneyVersions(repos.journeys);
  }

  async create(appId: string, fields: JourneyFields, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    const definition = definitionOf(fields);
    const journey = await this.deps.db.transaction().execute(async (trx) => {
      const made = await this.deps.journeys.insert(trx, {
        appId,
        name: fields.name,
        state: fields.state,
        definition,
        triggerEvent: 'event' in definition.trigger ? definition.trigger.event : null,
        listens: listenedEvents(definition),
      });
      await recordAudit(trx, actor, appId, 'journey.created', { journey_id: made.id, name: made.name });
      return made;
    });
    return { journey, counts: new Map() };
  }

  /** The app's journeys, newest first, with their counters. */
  async list(appId: string, page: { per: number; page: number }): Promise<JourneyRecord[]> {
    const rows = await this.deps.journeys.list(this.deps.readDb, appId, page.per, (page.page - 1) * page.per);
    const counts = await this.deps.journeys.counts(
      this.deps.readDb,
      rows.map((j) => j.id),
    );
    return rows.map((journey) => ({ journey, counts: counts.get(journey.id) ?? new Map() }));
  }

  async get(appId: string, id: string): Promise<JourneyRecord> {
    const journey = await this.deps.journeys.findForApp(this.deps.db, appId, id);
    if (!journey) throw new NotFoundError('journey');
    const counts = await this.deps.journeys.counts(this.deps.db, [id]);
    return { journey, counts: counts.get(id) ?? new Map() };
  }

  /** PUT: a new version; entrants inside finish the version they entered, new ones take this one. */
  async update(appId: string, id: string, fields: JourneyFields, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    const definition = definitionOf(fields);
    await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, 'changed');
      const changed = await this.deps.journeys.newVersion(trx, journey.id, {
        name: fields.name,
        definition,
        triggerEvent: 'event' in definition.trigger ? definition.trigger.event : null,
        listens: listenedEvents(definition),
      });
      await recordAudit(trx, actor, appId, 'journey.updated', { journey_id: journey.id, version: changed.version });
    });
    return this.get(appId, id);
  }

  /** Pause (nothing moves, triggers are skipped) or resume. */
  async setActive(appId: string, id: string, active: boolean, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, active ? 'resumed' : 'paused');
      await this.deps.journeys.setState(trx, journey.id, active ? 'active' : 'paused');
      await recordAudit(trx, actor, appId, active ? 'journey.resumed' : 'journey.paused', { journey_id: journey.id });
    });
    return this.get(appId, id);
  }

  /** Archive: the journey stops for good and every entrant still inside leaves, counted as exited. */
  async archive(appId: string, id: string, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, 'archived');
      await this.deps.journeys.setState(trx, journey.id, 'archived');
      await recordAudit(trx, actor, appId, 'journey.archived', { journey_id: journey.id });
      const counts = new Counts(journey.id);
      for (const left of await this.deps.entrants.exitAll(trx, journey.id, this.deps.clock.now()))
        counts.leave(left.step_id, 'exited', left.n);
      await counts.write(trx, this.deps.journeys);
    });
    return this.get(appId, id);
  }

  /** POST /journeys/:id/entries: a device or user enters a journey triggered through the API. */
  async enterByApi(appId: string, id: string, who: ApiEntrant): Promise<EntryOutcome> {
    return this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.deps.journeys.findForApp(trx, appId, id);
      if (!journey) throw new NotFoundError('journey');
      if (journey.trigger_event !== null)
        throw new ConflictError(`journey: it is entered by the event "${journey.trigger_event}", not through the API`);
      if (journey.state === 'archived') throw new ConflictError('journey: it is archived');
      const { devices, key } = await this.entrantOf(trx, appId, who);
      const counts = new Counts(journey.id);
      if (journey.state === 'paused') {
        counts.add('', 'skipped', 1);
        await counts.write(trx, this.deps.journeys);
        return 'paused';
      }
      await this.deps.entrants.lockEntrant(trx, [journey.id], key);
      return (await this.enter(trx, [journey], key, devices, counts)).get(journey.id)!;
    });
  }

  /**
   * Events recorded for an entrant (one device, or every device of a user), in the transaction that records them:
   * entrants waiting at a wait_for for one of them move on, those whose version exits on one leave converted, and
   * journeys they trigger are entered. Nothing of a paused journey moves; its triggers are counted skipped.
   */
  async onEvents(
    trx: Transaction<Database>,
    appId: string,
    devices: Device[],
    userId: string | null,
    events: readonly EventInput[],
  ): Promise<void> {
    const keys = eventKeys(events);
    const byKey = eventsByKey(events);
    const owner = userId ?? devices[0]?.user_id ?? null;
    const key = owner !== null ? `u:${owner}` : `d:${devices[0]!.id}`;
    // the entrant's entries into the journeys it triggers are locked by the same statement
    const journeys = await this.deps.journeys.listening(trx, appId, keys, key);
    if (journeys.length === 0) return;
    const now = this.deps.clock.now();
    const active = journeys.filter((j) => j.state === 'active');
    const counts = new Counts('');
    // only journeys that wait for or exit on one of the events can have entrants it wakes or converts
    const waking = active.filter((j) => j.listens.some((e) => keys.includes(e)));
    const exits: { journeyId: string; version: number }[] = [];
    for (const j of waking)
      for (let version = 1; version <= j.version; version++) {
        const definition = await this.versions.get(trx, j.id, version);
        if (definition.exit_on.some((e) => keys.includes(e))) exits.push({ journeyId: j.id, version });
      }
    for (const left of await this.deps.entrants.convert(trx, appId, key, exits, now)) {
      counts.of(left.journey_id).leave(left.step_id, 'converted', left.n);
      counts.of(left.journey_id).add('', 'converted', left.n);
    }
    const woken = await this.deps.entrants.wake(
      trx,
      appId,
      key,
      waking.map((j) => j.id),
      byKey,
      now,
    );
    for (const w of woken) counts.of(w.journey_id).move(w.left_step, w.arrived_step);
    const triggered = journeys.filter((j) => j.trigger_event !== null && keys.includes(j.trigger_event));
    for (const j of triggered) if (j.state === 'paused') counts.of(j.id).add('', 'skipped', 1);
    await this.enter(
      trx,
      triggered.filter((j) => j.state === 'active'),
      key,
      devices,
      counts,
      byKey,
    );
  }

  /**
   * Enters the entrant into each journey (at its first step) whose re-entry rule and entry filters let it, and writes
   * the transaction's counters: one statement for all of them, whatever their number, after a query for the entry
   * filters of those that have some. The caller locked the entrant's entries into the journeys (`lockEntrant`).
   */
  private async enter(
    trx: Transaction<Database>,
    journeys: Journey[],
    key: string,
    devices: Device[],
    counts: Counts,
    /** the events that entered it, by key (none: entered through the API) */
    events: Record<string, TemplateEvent> = {},
  ): Promise<Map<string, EntryOutcome>> {
    if (journeys.length === 0) {
      await counts.write(trx, this.deps.journeys);
      return new Map();
    }
    const now = this.deps.clock.now();
    const candidates: EntryCandidate[] = [];
    for (const j of journeys) {
      const device = await this.entryDevice(trx, j, devices, now);
      candidates.push({
        ...firstStep(j.definition, now),
        ...reEntryRule(j.definition.re_entry),
        journeyId: j.id,
        version: j.version,
        deviceId: device?.id ?? null,
        event: j.trigger_event !== null && Object.hasOwn(events, j.trigger_event) ? events[j.trigger_event]! : null,
      });
    }
    return this.deps.entrants.enter(trx, { appId: journeys[0]!.app_id, entrantKey: key, now, candidates, counts: [...counts.changes] });
  }

  /** The device the entrant enters with: the first of its devices the entry filters match (none: it does not enter). */
  private async entryDevice(trx: Transaction<Database>, j: Journey, devices: Device[], now: Date): Promise<Device | undefined> {
    const filters = j.definition.entry_filters;
    if (!filters?.length) return devices[0];
    const matching = await this.deps.devices.matchingIds(
      trx,
      j.app_id,
      devices.map((d) => d.id),
      filters,
      now,
    );
    return devices.find((d) => matching.has(d.id));
  }

  private async entrantOf(trx: Transaction<Database>, appId: string, who: ApiEntrant): Promise<{ devices: Device[]; key: string }> {
    if ('user_id' in who) {
      const devices = (await this.deps.devices.lockUserDevices(trx, appId, who.user_id, 'share')).filter((d) => !d.erased_at);
      if (devices.length === 0) throw new NotFoundError('user');
      return { devices, key: `u:${who.user_id}` };
    }
    const device = await this.deps.devices.lock(trx, appId, who.device_id, 'share');
    if (!device || device.erased_at) throw new NotFoundError('device');
    return { devices: [device], key: device.user_id !== null ? `u:${device.user_id}` : `d:${device.id}` };
  }

  /** The journey, locked, unless it is archived (409: nothing of it changes any more). */
  private async lockLive(trx: Transaction<Database>, appId: string, id: string, doing: string): Promise<Journey> {
    const journey = await this.deps.journeys.lock(trx, appId, id);
    if (!journey) throw new NotFoundError('journey');
    if (journey.state === 'archived') throw new ConflictError(`journey: it is archived and cannot be ${doing}`);
    return journey;
  }
}
