import type { AuditRepository } from '../db/repositories/audit.js';
import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { JourneysRepository, RetiredStep, StepCounts } from '../db/repositories/journeys.js';
import type { EntrantWithHistory, JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import type { JourneyEventsRepository } from '../db/repositories/journey-events.js';
import type { FailedEvents } from './journey-engine.js';
import type { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import type { Database, Device, Journey } from '../db/schema.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import { ConflictError, NotFoundError, ValidationError } from '../domain/errors.js';
import {
  eventKeys,
  eventsByKey,
  listenedEvents,
  quickSendingCycle,
  type JourneyDefinition,
  type JourneyFields,
} from '../domain/journey.js';
import type { EventInput } from '../domain/device-input.js';
import { deliveryOutcome, type DeliveryOutcome } from '../domain/journey-history.js';
import type { Clock } from '../platform/clock.js';
import { exitSomeOf } from './journey-exits.js';
import { Counts } from './journey-counts.js';
import { enterJourneys, JourneyEventIntake } from './journey-intake.js';
import type { ServiceDeps } from './deps.js';
import { CLI_ACTOR, type Actor } from '../domain/audit.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import { newWebhookSecret, webhookTargetProblem } from '../domain/webhooks.js';
import { holdJourneyTemplates } from './templates.js';
import type { TemplatesRepository } from '../db/repositories/templates.js';

/** A journey as the API answers it: the row and its counters per step ('' the trigger). */
export interface JourneyRecord {
  journey: Journey;
  counts: Map<string, StepCounts>;
  /** steps of earlier versions the current one no longer has, whose entrants are counted still */
  retired: RetiredStep[];
  /** its webhook steps' signing secret, answered once: by the create or update that made it */
  webhookSecret?: string;
}

/** Who an API entry names: a device, or a user (all of whose devices get the sends). */
export type ApiEntrant = { device_id: string } | { user_id: string };
export type EntryOutcome = 'entered' | 'filtered' | 'not_re_entered' | 'paused';

/** Splits a definition from the journey's own fields (name, state). */
export function definitionOf(fields: JourneyFields): JourneyDefinition {
  const { name: _name, state: _state, ...definition } = fields;
  return definition;
}

/** A span as the journeys' durations are written: `0s`, `90s`, `10m`, `1.5h`. */
const spoken = (ms: number): string =>
  ms < 60_000 ? `${Math.round(ms / 1000)}s` : ms < 3_600_000 ? `${Math.round(ms / 6000) / 10}m` : `${Math.round(ms / 360_000) / 10}h`;

/**
 * Journeys, their side the API and the events see: definitions and their life cycle, and entering, waking and
 * converting entrants as events are recorded (in the event's own transaction). The steps themselves are run by
 * `JourneyEngine` (journey-engine.ts), from the workers' poller.
 */
export class JourneyService {
  private readonly intake: JourneyEventIntake;

  private readonly deps: {
    db: Db;
    readDb: Db;
    journeys: JourneysRepository;
    entrants: JourneyEntrantsRepository;
    journeyEvents: JourneyEventsRepository;
    journeyDevices: JourneyDevicesRepository;
    devices: DevicesRepository;
    notifications: NotificationsRepository;
    templates: TemplatesRepository;
    audit: AuditRepository;
    clock: Clock;
    /** JOURNEY_MIN_CYCLE: the least time round a cycle that sends */
    minCycleMs: number;
    /** seals the journeys' webhook secrets (none: a journey with a webhook step is refused) */
    keyring: SecretsKeyring | null;
    /** WEBHOOK_ALLOWED_ORIGINS: a webhook step may name these whatever they resolve to */
    webhookOrigins: readonly string[];
  };

  constructor(
    deps: Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock'> & {
      minCycleMs: number;
      keyring?: SecretsKeyring | null;
      webhookOrigins?: readonly string[];
    },
  ) {
    const { repos } = deps;
    const { journeys, journeyEntrants: entrants, journeyEvents, journeyDevices, devices, notifications, templates } = repos;
    this.deps = {
      ...deps,
      journeys,
      entrants,
      journeyEvents,
      journeyDevices,
      devices,
      notifications,
      templates,
      audit: repos.audit,
      keyring: deps.keyring ?? null,
      webhookOrigins: deps.webhookOrigins ?? [],
    };
    this.intake = new JourneyEventIntake(this.deps);
  }

  async create(appId: string, fields: JourneyFields, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    const definition = this.checkedDefinition(fields);
    const secret = this.newSecret(definition, false);
    const journey = await this.deps.db.transaction().execute(async (trx) => {
      await holdJourneyTemplates(trx, this.deps.templates, appId, fields.steps);
      const made = await this.deps.journeys.insert(trx, {
        ...(secret && { webhookSecret: secret.sealed }),
        appId,
        name: fields.name,
        state: fields.state,
        definition,
        triggerEvent: 'event' in definition.trigger ? definition.trigger.event : null,
        listens: listenedEvents(definition),
      });
      await this.deps.audit.recordChange(trx, actor, appId, 'journey.created', { journey_id: made.id, name: made.name });
      return made;
    });
    return { journey, counts: new Map(), retired: [], ...(secret && { webhookSecret: secret.plain }) };
  }

  /** A new webhook secret when the definition has a webhook step and the journey none yet (`has`), plain and sealed. */
  private newSecret(definition: JourneyDefinition, has: boolean) {
    if (has || !definition.steps.some((s) => s.type === 'webhook')) return null;
    const plain = newWebhookSecret();
    return { plain, sealed: this.deps.keyring!.seal(plain, 'journeys.webhook_secret') };
  }

  /** The app's journeys, newest first, with their counters. */
  async list(appId: string, page: { per: number; page: number }): Promise<JourneyRecord[]> {
    const rows = await this.deps.journeys.list(this.deps.readDb, appId, page.per, (page.page - 1) * page.per);
    const ids = rows.map((j) => j.id);
    const [counts, retired] = await Promise.all([
      this.deps.journeys.counts(this.deps.readDb, ids),
      this.deps.journeys.retiredSteps(this.deps.readDb, ids),
    ]);
    return rows.map((journey) => ({ journey, counts: counts.get(journey.id) ?? new Map(), retired: retired.get(journey.id) ?? [] }));
  }

  async get(appId: string, id: string): Promise<JourneyRecord> {
    const journey = await this.deps.journeys.findForApp(this.deps.db, appId, id);
    if (!journey) throw new NotFoundError('journey');
    const [counts, retired] = await Promise.all([
      this.deps.journeys.counts(this.deps.db, [id]),
      this.deps.journeys.retiredSteps(this.deps.db, [id]),
    ]);
    return { journey, counts: counts.get(id) ?? new Map(), retired: retired.get(id) ?? [] };
  }

  /** PUT: a new version; entrants inside finish the version they entered, new ones take this one. */
  async update(appId: string, id: string, fields: JourneyFields, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    const definition = this.checkedDefinition(fields);
    const plain = await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, 'changed');
      await holdJourneyTemplates(trx, this.deps.templates, appId, fields.steps);
      const secret = this.newSecret(definition, journey.webhook_secret !== null);
      const changed = await this.deps.journeys.newVersion(trx, journey.id, {
        ...(secret && { webhookSecret: secret.sealed }),
        name: fields.name,
        definition,
        triggerEvent: 'event' in definition.trigger ? definition.trigger.event : null,
        listens: listenedEvents(definition),
      });
      await this.deps.audit.recordChange(trx, actor, appId, 'journey.updated', { journey_id: journey.id, version: changed.version });
      return secret?.plain;
    });
    return { ...(await this.get(appId, id)), ...(plain && { webhookSecret: plain }) };
  }

  /** Pause (nothing moves, triggers are skipped) or resume. */
  async setActive(appId: string, id: string, active: boolean, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, active ? 'resumed' : 'paused');
      await this.deps.journeys.setState(trx, journey.id, active ? 'active' : 'paused');
      await this.deps.audit.recordChange(trx, actor, appId, active ? 'journey.resumed' : 'journey.paused', { journey_id: journey.id });
    });
    return this.get(appId, id);
  }

  /**
   * Archive: the journey stops for good and every entrant still inside leaves, counted as exited: up to
   * EXITS_AT_ONCE with the archive, the rest by the workers' journey polls (`exiting` until they have).
   */
  async archive(appId: string, id: string, actor: Actor = CLI_ACTOR): Promise<JourneyRecord> {
    await this.deps.db.transaction().execute(async (trx) => {
      const journey = await this.lockLive(trx, appId, id, 'archived');
      await this.deps.journeys.setState(trx, journey.id, 'archived');
      await this.deps.audit.recordChange(trx, actor, appId, 'journey.archived', { journey_id: journey.id });
      await exitSomeOf(trx, this.deps, journey.id, this.deps.clock.now());
    });
    return this.get(appId, id);
  }

  /** A journey's definition, refused when an entrant could be sent to round a cycle sooner than JOURNEY_MIN_CYCLE. */
  private checkedDefinition(fields: JourneyFields): JourneyDefinition {
    for (const [i, step] of fields.steps.entries()) {
      if (step.type !== 'webhook') continue;
      if (!this.deps.keyring) throw new ValidationError(`journey.steps[${i}]: webhook steps cannot be signed in this process`);
      const problem = webhookTargetProblem(step.url, this.deps.webhookOrigins);
      if (problem) throw new ValidationError(`journey.steps[${i}].url: ${problem}`);
    }
    const quick = quickSendingCycle(fields.steps, this.deps.minCycleMs);
    if (quick)
      throw new ValidationError(
        `journey.steps[${quick.at}]: an entrant could come back to this step round a cycle after ${spoken(quick.ms)}; ` +
          `a cycle that sends must take at least ${spoken(this.deps.minCycleMs)} (JOURNEY_MIN_CYCLE): lengthen its delays or ` +
          'wait for an event on it (wait_for)',
      );
    return definitionOf(fields);
  }

  /** POST /journeys/:id/entries: a device or user enters a journey triggered through the API. */
  async enterByApi(appId: string, id: string, who: ApiEntrant, actor: Actor): Promise<EntryOutcome> {
    return this.deps.db.transaction().execute(async (trx) => {
      const outcome = await this.enterOne(trx, appId, id, who);
      await this.deps.audit.recordChange(trx, actor, appId, 'journey.entered', { journey_id: id, outcome });
      return outcome;
    });
  }

  private async enterOne(trx: Transaction<Database>, appId: string, id: string, who: ApiEntrant): Promise<EntryOutcome> {
    const journey = await this.deps.journeys.lock(trx, appId, id, 'share');
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
    await this.deps.entrants.lockEntrants(trx, [key]);
    const [outcome] = await enterJourneys(trx, this.deps, [{ journey, key, devices, events: {} }], counts, this.deps.clock.now());
    await counts.write(trx, this.deps.journeys);
    return outcome!;
  }

  /**
   * An entrant's entries into the journey, newest first, each with its history; a `sent` entry has what became of
   * each of the entrant's devices (the user's, for a user) in that notification, read now. A device's entries are its
   * own and, when it has a user, its user's.
   */
  async entrantHistory(appId: string, id: string, who: ApiEntrant): Promise<EntrantHistory[]> {
    const db = this.deps.db;
    const journey = await this.deps.journeys.findForApp(db, appId, id);
    if (!journey) throw new NotFoundError('journey');
    const keys = ['user_id' in who ? `u:${who.user_id}` : `d:${who.device_id}`];
    const device = 'device_id' in who ? await this.deps.devices.findForApp(db, appId, who.device_id) : undefined;
    if (device?.user_id) keys.push(`u:${device.user_id}`);
    const entries = await this.deps.entrants.entriesOf(db, appId, journey.id, keys);
    const sent = [...new Set(entries.flatMap((e) => e.history.flatMap((h) => (h.n ? [h.n] : []))))];
    const users = [...new Set(entries.flatMap((e) => (e.entrant_key.startsWith('u:') ? [e.entrant_key.slice(2)] : [])))];
    const devices = new Set(entries.map((e) => e.device_id));
    for (const user of users) for (const d of await this.deps.devices.userDeviceIds(db, appId, user)) devices.add(d);
    const outcomes = await this.deps.notifications.deviceOutcomes(db, sent, [...devices]);
    const byNotification = new Map<string, DeliveryOutcome[]>();
    for (const row of outcomes)
      byNotification.set(row.notification_id, [...(byNotification.get(row.notification_id) ?? []), deliveryOutcome(row)]);
    return entries.map((e) => ({ entrant: e, deliveries: byNotification }));
  }

  /**
   * Events recorded for an entrant (one device, or every device of a user), in the transaction that records them:
   * when a journey of the app listens for one of them, one row for the journey workers (`takeEvents`), which enter,
   * wake and convert the entrant from it; the request does no more.
   */
  async onEvents(
    trx: Transaction<Database>,
    appId: string,
    devices: Device[],
    userId: string | null,
    events: readonly EventInput[],
  ): Promise<void> {
    const owner = userId ?? devices[0]?.user_id ?? null;
    const entrantKey = owner !== null ? `u:${owner}` : `d:${devices[0]!.id}`;
    const keys = eventKeys(events);
    await this.deps.journeyEvents.add(trx, {
      appId,
      entrantKey,
      // the journeys a device entered before it had a user still hold it under its own key
      entrantKeys: [...new Set([entrantKey, ...devices.map((d) => `d:${d.id}`)])],
      deviceIds: devices.map((d) => d.id),
      userId,
      keys,
      counts: keys.map((k) => events.filter((e) => eventKeys([e]).includes(k)).length),
      events: eventsByKey(events),
    });
  }

  /** Applies up to `limit` entrants' recorded events (JourneyEventIntake.takeEvents); answers how many rows it took. */
  takeEvents(limit: number): Promise<number> {
    return this.intake.takeEvents(limit);
  }

  /** After a batch failed: the rows one a transaction (JourneyEventIntake.takeEventsSingly). */
  takeEventsSingly(limit: number, maxAttempts: number): Promise<{ taken: number; failed: FailedEvents[] }> {
    return this.intake.takeEventsSingly(limit, maxAttempts);
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
    const journey = await this.deps.journeys.lock(trx, appId, id, 'update');
    if (!journey) throw new NotFoundError('journey');
    if (journey.state === 'archived') throw new ConflictError(`journey: it is archived and cannot be ${doing}`);
    return journey;
  }
}

/** An entry into a journey with its history, and the deliveries of the notifications its history names. */
export interface EntrantHistory {
  entrant: EntrantWithHistory;
  deliveries: Map<string, DeliveryOutcome[]>;
}
