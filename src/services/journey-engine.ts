import { templateDataOf, type TemplateData, type TemplateEvent } from '../domain/template-data.js';
import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { JourneysRepository } from '../db/repositories/journeys.js';
import type { DueEntrant, DueGroup, EntrantMove, JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import type { Database } from '../db/schema.js';
import { DomainError } from '../domain/errors.js';
import type { Filter } from '../domain/filters.js';
import { END, type JourneyDefinition, type JourneyStep, type MessageStep, type SendStep, type UpdateStep } from '../domain/journey.js';
import { arrival, delayEnd, lastDigest, splitPath, stepOf, stepReadsHistory, waitingEntry, wayOn } from '../domain/journey-run.js';
import { BEST_TIME_HISTORY_MS, zoneOf } from '../domain/best-time.js';
import { historyEntry, type HistoryEntry } from '../domain/journey-history.js';
import { admitAttributes, LIMITS, parseCustomAttributes } from '../domain/device-input.js';
import type { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import { messageRequestSchema } from '../domain/message-request.js';
import { notificationRequestSchema } from '../domain/notification-request.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { Counts, JourneyVersions } from './journey-counts.js';
import { exitArchived } from './journey-exits.js';
import { runGroupsInTurn } from './journey-turns.js';
import { callWebhooks, runDigest, withDigests, type JourneyWebhooks, type StepOutcome } from './journey-calls.js';
import type { ServiceDeps } from './deps.js';
import type { MessageService } from './messages.js';
import type { CreatedNotification, NotificationService } from './notifications.js';
import { resolveTemplate } from './templates.js';
import type { TemplatesRepository } from '../db/repositories/templates.js';

/** Groups of due entrants one poll looks at before it looks again. */
const GROUPS_AT_ONCE = 50;
/** Entrants' recorded events one transaction applies (JourneyService.takeEvents). */
const EVENTS_AT_ONCE = 100;
/** polls at which a row of recorded events failed on its own before it is dropped */
const EVENT_ATTEMPTS = 5;

export type JourneyEngineDeps = Pick<ServiceDeps, 'db' | 'repos' | 'clock'> & {
  notifications: NotificationService;
  messages: MessageService;
  log: Logger;
  /** entrants moved (and sent to, by one notification) per transaction */
  batchSize: number;
  /** what webhook steps send with (none: a webhook step fails its entrants) */
  webhooks?: JourneyWebhooks | null;
  /** applies the events requests recorded for journeys (JourneyService.takeEvents), before the steps due */
  intake?: JourneyIntake | null;
  /** how far past now a poll looks for the next entrant due (the poller's interval; none given: 0, it looks for none) */
  dueAheadMs?: number;
};

/** A row of recorded events that could not be applied on its own, and whether it was dropped for good. */
export interface FailedEvents {
  id: string;
  entrantKey: string;
  error: unknown;
  dropped: boolean;
}

/** Where recorded events enter, wake and convert entrants. */
export interface JourneyIntake {
  /** Applies up to `limit` entrants' recorded events; answers how many it took. */
  takeEvents(limit: number): Promise<number>;
  /** The same one row a transaction, after a batch failed: the rows that failed alone, dropped after `maxAttempts` polls. */
  takeEventsSingly(limit: number, maxAttempts: number): Promise<{ taken: number; failed: FailedEvents[] }>;
}

/** What the engine uses of its dependencies, by name. */
interface EngineParts {
  db: Db;
  journeys: JourneysRepository;
  entrants: JourneyEntrantsRepository;
  devices: DevicesRepository;
  journeyDevices: JourneyDevicesRepository;
  apps: AppsRepository;
  templates: TemplatesRepository;
  notifications: NotificationService;
  messages: MessageService;
  clock: Clock;
  log: Logger;
  batchSize: number;
  webhooks: JourneyWebhooks | null;
  intake: JourneyIntake | null;
  dueAheadMs: number;
}

/** What one step did to a batch: where each entrant goes, and the sends to release after the commit. */
interface StepResult {
  moves: EntrantMove[];
  created: CreatedNotification[];
}

/**
 * Runs journeys' steps for the entrants that are due, from the workers' poller: a batch of one journey version's
 * entrants at one step at a time, locked with SKIP LOCKED so workers share the work. A batch's transitions (one
 * conditional UPDATE) commit with what the step created (one notification or message for the batch), so a worker
 * killed anywhere leaves either both or neither: nothing is sent twice and no entrant is stuck.
 */
export class JourneyEngine {
  private readonly versions: JourneyVersions;
  private readonly deps: EngineParts;
  /** when the next entrant comes due, as the last round of the last poll read it */
  private nextDue: Date | null = null;

  constructor(deps: JourneyEngineDeps) {
    const { repos } = deps;
    const { journeys, journeyEntrants: entrants, devices, journeyDevices, apps, templates } = repos;
    this.deps = {
      ...deps,
      journeys,
      entrants,
      devices,
      journeyDevices,
      apps,
      templates,
      webhooks: deps.webhooks ?? null,
      intake: deps.intake ?? null,
      dueAheadMs: deps.dueAheadMs ?? 0,
    };
    this.versions = new JourneyVersions(repos.journeys);
  }

  /**
   * Exits a turn's worth of archived journeys' entrants, applies the events recorded, then runs every batch due now;
   * answers how many entrants moved.
   */
  async runDue(): Promise<number> {
    await exitArchived(this.deps, () => this.deps.clock.now());
    let total = 0;
    let fellBack = false;
    for (;;) {
      // a round takes fewer when the rest wait for another worker's (an entrant's events go in order)
      // a row that fails is tried alone once a poll, so its attempts count polls
      fellBack = (await this.applyRecordedEvents(!fellBack)) || fellBack;
      const now = this.deps.clock.now();
      const due = { now, aheadMs: this.deps.dueAheadMs, limit: GROUPS_AT_ONCE };
      const { groups, nextDue, cut } = await this.deps.entrants.dueGroups(this.deps.db, due);
      this.nextDue = nextDue;
      const runBatch = (group: DueGroup) => this.runGroup(group, now);
      const moved = await runGroupsInTurn(groups, { batchSize: this.deps.batchSize, cut, runBatch });
      total += moved;
      // nothing moved: nothing was due, or other workers hold it
      if (moved === 0) return total;
    }
  }

  /**
   * ms until the next entrant of an active journey comes due, by this engine's clock, as the last poll read it (none
   * within `dueAheadMs`: null).
   */
  msUntilNextDue(): number | null {
    return this.nextDue === null ? null : this.nextDue.getTime() - this.deps.clock.now().getTime();
  }

  /**
   * The events requests recorded, a batch at a time (a round takes fewer when the rest wait for another worker's: an
   * entrant's events go in order). A batch that fails is applied a row at a time, so that a row that cannot be
   * applied holds only its own entrant, and the steps due still run.
   */
  private async applyRecordedEvents(singly: boolean): Promise<boolean> {
    const intake = this.deps.intake;
    if (!intake) return false;
    try {
      while ((await intake.takeEvents(EVENTS_AT_ONCE)) === EVENTS_AT_ONCE);
      return false;
    } catch (err) {
      this.deps.log.warn({ err }, 'journey events: a batch failed; applying its rows one at a time');
      if (!singly) return false;
      const { failed } = await intake.takeEventsSingly(EVENTS_AT_ONCE, EVENT_ATTEMPTS);
      for (const f of failed)
        this.deps.log.error(
          { err: f.error, eventsId: f.id, entrant: f.entrantKey, dropped: f.dropped },
          f.dropped ? 'journey events dropped: they failed at every poll' : 'journey events failed; tried again next poll',
        );
      return true;
    }
  }

  /** One batch of a group; a step the request checks could not foresee failing (an expired send) fails the batch's entrants. */
  async runGroup(group: DueGroup, now: Date): Promise<number> {
    const definition = await this.versions.get(this.deps.db, group.journey_id, group.version);
    let result: { n: number; created: CreatedNotification[] };
    try {
      result = await this.deps.db.transaction().execute((trx) => this.runBatch(trx, group, definition, now, null));
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      this.deps.log.warn({ err: err.message, journeyId: group.journey_id, step: group.step_id }, 'journey step failed');
      result = await this.deps.db.transaction().execute((trx) => this.runBatch(trx, group, definition, now, err.message));
    }
    // all at once: each is marked as making progress from now until its batches have started (DirectDelivery)
    await this.deps.notifications.release(...result.created);
    return result.n;
  }

  private async runBatch(
    trx: Transaction<Database>,
    group: DueGroup,
    definition: JourneyDefinition,
    now: Date,
    failed: string | null,
  ): Promise<{ n: number; created: CreatedNotification[] }> {
    const step = stepOf(definition, group.step_id);
    // a webhook step's batch holds its rows (and an event for one of them) until its requests are answered: one round of them
    const calls = step?.type === 'webhook' && failed === null ? (this.deps.webhooks?.concurrency ?? 1) : Infinity;
    const limit = Math.min(calls, this.deps.batchSize);
    // a delay's end reads the device's time zone, when the entrants arrive at it (runStep)
    const zone = failed === null && group.phase === 'arrived' && step?.type === 'delay';
    const reads = { history: failed === null && stepReadsHistory(definition, step), zone };
    const due = await this.deps.entrants.lockDue(trx, { group, now, limit }, reads);
    if (due.length === 0) return { n: 0, created: [] };
    const counts = new Counts(group.journey_id);
    let result: StepResult;
    if (failed !== null) {
      const history = [historyEntry(now, group.step_id, 'failed', { err: failed })];
      result = { moves: due.map((e) => leaveMove(e, 'failed', history)), created: [] };
      counts.leave(group.step_id, 'failed', due.length);
    } else if (!step)
      // a way onward of "end" (a wait_for's on_event): the entrants leave
      result = { moves: due.map((e) => leaveMove(e, 'completed', [])), created: [] };
    // a webhook step's entrant waits to be called again; a digest's, for its window to end: the step runs again
    else if (group.phase === 'waiting' && step.type !== 'webhook' && step.type !== 'digest')
      result = this.afterWait(definition, step, due, counts, now);
    else result = await this.runStep(trx, { group, definition, step, due, counts, now });
    const moved = await this.deps.entrants.advance(trx, result.moves);
    // the rows were locked: a move that did not apply means another transition ran, and this one must not commit
    if (moved.size !== result.moves.length) throw new Error(`journey ${group.journey_id}: entrants moved under a lock`);
    await counts.write(trx, this.deps.journeys);
    return { n: due.length, created: result.created };
  }

  /** A delay ended or a wait_for timed out: the entrants pass on. */
  private afterWait(definition: JourneyDefinition, step: JourneyStep, due: DueEntrant[], counts: Counts, now: Date): StepResult {
    if (step.type !== 'wait_for')
      return { moves: due.map((e) => this.pass(definition, e, step.id, wayOn(definition, step.id, 'next'), counts, now)), created: [] };
    const to = wayOn(definition, step.id, 'on_timeout');
    const history = [historyEntry(now, step.id, 'timeout', { to })];
    return { moves: due.map((e) => this.pass(definition, e, step.id, to, counts, now, 'passed', history)), created: [] };
  }

  /** The entrants arrived at the step: it runs. */
  private async runStep(trx: Transaction<Database>, run: StepRun): Promise<StepResult> {
    const { group, definition, step, due, counts, now } = run;
    const next = wayOn(definition, step.id, 'next');
    const pass = (e: DueEntrant, to: string, history: HistoryEntry[], how: 'passed' | 'sent' = 'passed') =>
      this.pass(definition, e, step.id, to, counts, now, how, history);
    switch (step.type) {
      case 'delay': {
        const appZone = (await this.deps.apps.campaignSettingsOf(trx, [group.app_id])).get(group.app_id)?.default_time_zone ?? null;
        const zones = new Map(due.map((e) => [e.device_id, zoneOf(e.time_zone, appZone)]));
        const activity = step.until
          ? await this.deps.journeyDevices.activityHours(
              trx,
              [...zones].map(([id, zone]) => ({ id, zone })),
              new Date(now.getTime() - BEST_TIME_HISTORY_MS),
            )
          : new Map<string, number[]>();
        const moves = due.map((e) => {
          const until = delayEnd(step, now, zones.get(e.device_id)!, activity.get(e.device_id));
          return wait(e, until, [waitingEntry(now, { stepId: step.id, dueAt: until, waitEvent: null })]);
        });
        return { moves, created: [] };
      }
      case 'wait_for': {
        // an entrant that arrived before waits began on arrival (`arrival`) still has its wait begun here
        const a = arrival(definition, step.id, now);
        const moves = due.map((e) => ({ ...wait(e, a.dueAt, [waitingEntry(now, a)]), waitEvent: a.waitEvent, onEvent: a.onEvent }));
        return { moves, created: [] };
      }
      case 'branch': {
        const ids = due.map((e) => e.device_id);
        const filters = step.filters as Filter[];
        const matching = await this.deps.devices.matchingIds(trx, group.app_id, ids, filters, now);
        const read = await this.deps.journeyDevices.filterValues(trx, ids, filters);
        const [then, otherwise] = [wayOn(definition, step.id, 'then'), wayOn(definition, step.id, 'else')];
        const moves = due.map((e) => {
          const v = { ...read.get(e.device_id) };
          let matched = matching.has(e.device_id);
          if (step.digest_count) {
            v.digest_count = lastDigest(e.history)?.count ?? 0;
            matched &&= (v.digest_count as number) >= step.digest_count.at_least;
          }
          const to = matched ? then : otherwise;
          return pass(e, to, [historyEntry(now, step.id, 'branch', { to, matched, v })]);
        });
        return { moves, created: [] };
      }
      case 'send':
      case 'message': {
        const { created, sentTo } = await this.send(trx, run, step);
        const moves = due.map((e) => pass(e, next, [historyEntry(now, step.id, 'sent', sentTo(e))], 'sent'));
        return { moves, created };
      }
      case 'update': {
        const changed = await this.update(trx, group.app_id, step, due);
        return { moves: due.map((e) => pass(e, next, [historyEntry(now, step.id, 'updated', { c: changed(e) })])), created: [] };
      }
      case 'split': {
        const moves = due.map((e) => {
          const path = splitPath(step, e.id);
          const to = wayOn(definition, step.id, `paths.${path.name}`);
          counts.add(`${step.id}/${path.name}`, 'entered', 1);
          return pass(e, to, [historyEntry(now, step.id, 'split', { p: path.name, to })]);
        });
        return { moves, created: [] };
      }
      case 'webhook': {
        const [onSuccess, onFailure] = [wayOn(definition, step.id, 'on_success'), wayOn(definition, step.id, 'on_failure')];
        const site = { journeyId: group.journey_id, version: group.version, step, onSuccess, onFailure };
        const outcomes = await callWebhooks(trx, this.deps, site, due, now);
        return { moves: outcomes.map((o) => this.outcomeMove(definition, step.id, o, counts, now)), created: [] };
      }
      case 'digest': {
        const outcomes = runDigest({ step, next, waited: group.phase === 'waiting' }, due, now);
        return { moves: outcomes.map((o) => this.outcomeMove(definition, step.id, o, counts, now)), created: [] };
      }
    }
  }

  /** A webhook or digest step's outcome for an entrant as its move: on to a step, or waiting at this one. */
  private outcomeMove(definition: JourneyDefinition, from: string, o: StepOutcome, counts: Counts, now: Date): EntrantMove {
    if ('until' in o) return wait(o.entrant, o.until, o.history);
    return this.pass(definition, o.entrant, from, o.to, counts, now, 'passed', o.history);
  }

  /**
   * A send or message step: a notification (or message) to the batch's users by user_id and one to its other devices
   * by device_id; answers them and, for an entrant, the ids of those it was sent.
   */
  private async send(
    trx: Transaction<Database>,
    { group, step, due, now }: StepRun,
    sendStep: SendStep | MessageStep,
  ): Promise<{ created: CreatedNotification[]; sentTo: (e: DueEntrant) => { n?: string; m?: string } }> {
    const created: CreatedNotification[] = [];
    const made = new Map<'u' | 'd', { n?: string; m?: string }>();
    const journey = { id: group.journey_id, version: group.version, step: step.id };
    for (const { kind, to } of targetsOf(due)) {
      if (sendStep.type === 'send') {
        const { notification: input } = notificationRequestSchema.parse({ notification: { ...sendStep.notification, to } });
        const fields = await resolveTemplate(trx, this.deps.templates, group.app_id, input);
        const options = this.deps.notifications.checkedOptions(fields, now, `journey.steps.${step.id}.notification`);
        // no audience: the batch names its devices, cut with the notification unless it needs the fan-out
        const templateData = withDigests(withEvents(templateDataOf(fields), due), due);
        const c = await this.deps.notifications.insertForJourney(trx, group.app_id, fields, { now, options, journey, templateData });
        created.push(c);
        made.set(kind, { n: c.notification.id });
      } else {
        const { message } = messageRequestSchema.parse({ message: { ...sendStep.message, to } });
        const stored = await this.deps.messages.insertIn(trx, group.app_id, message, now, journey);
        if (stored.notification) created.push(stored.notification);
        made.set(kind, { m: stored.record.message.id, ...(stored.notification && { n: stored.notification.notification.id }) });
      }
    }
    return { created, sentTo: (e) => made.get(e.entrant_key.startsWith('u:') ? 'u' : 'd') ?? {} };
  }

  /**
   * An update step: the attributes and tags of the batch's entrants' devices (each user's every device); answers
   * how many of an entrant's devices it wrote.
   */
  private async update(trx: Transaction<Database>, appId: string, step: UpdateStep, due: DueEntrant[]): Promise<(e: DueEntrant) => number> {
    const deviceIds = due.filter((e) => e.entrant_key.startsWith('d:')).map((e) => e.device_id);
    const userIds = due.filter((e) => e.entrant_key.startsWith('u:')).map((e) => e.entrant_key.slice(2));
    const devices = await this.deps.journeyDevices.entrantDevices(trx, appId, deviceIds, userIds);
    const ids = devices.map((d) => d.id);
    const perUser = new Map<string, number>();
    for (const d of devices) if (d.user_id !== null) perUser.set(d.user_id, (perUser.get(d.user_id) ?? 0) + 1);
    const { custom } = parseCustomAttributes(step.custom ?? {}, 'custom');
    const held = custom.size ? await this.deps.journeyDevices.attributeNames(trx, ids) : new Map<string, string[]>();
    const changes = new Map(ids.map((id) => [id, admitAttributes(held.get(id) ?? [], custom).admitted]));
    const [addTags, removeTags] = [step.add_tags ?? [], step.remove_tags ?? []];
    await this.deps.journeyDevices.update(trx, appId, { changes, addTags, removeTags, maxTags: LIMITS.tags });
    const live = new Set(ids);
    return (e) => (e.entrant_key.startsWith('u:') ? (perUser.get(e.entrant_key.slice(2)) ?? 0) : live.has(e.device_id) ? 1 : 0);
  }

  /** The entrant leaves `from` (counted as `how`) for `to`: arriving there now, or out of the journey at "end". */
  private pass(
    definition: JourneyDefinition,
    e: DueEntrant,
    from: string,
    to: string,
    counts: Counts,
    now: Date,
    how: 'passed' | 'sent' = 'passed',
    history: HistoryEntry[] = [],
  ): EntrantMove {
    counts.leave(from, how);
    counts.arrive(to);
    if (to === END) return leaveMove(e, 'completed', history);
    const a = arrival(definition, to, now);
    const entries = a.phase === 'waiting' ? [...history, waitingEntry(now, a)] : history;
    return { ...moveOf(e), stepId: to, phase: a.phase, dueAt: a.dueAt, waitEvent: a.waitEvent, onEvent: a.onEvent, history: entries };
  }
}

/** What a step runs on: its batch of due entrants, at `now`. */
interface StepRun {
  group: DueGroup;
  definition: JourneyDefinition;
  step: JourneyStep;
  due: DueEntrant[];
  counts: Counts;
  now: Date;
}

/**
 * The sends of a batch: a user entrant's go to every device of the user (by user_id), a device entrant's to its
 * device; filters in one list are AND'ed, so the two are a notification each.
 */
function targetsOf(due: DueEntrant[]): { kind: 'u' | 'd'; to: { name: string; criteria: string[] }[] }[] {
  const users = [...new Set(due.filter((e) => e.entrant_key.startsWith('u:')).map((e) => e.entrant_key.slice(2)))];
  const devices = [...new Set(due.filter((e) => e.entrant_key.startsWith('d:')).map((e) => e.device_id))];
  return [
    ...(users.length ? [{ kind: 'u' as const, to: [{ name: 'user_id', criteria: users }] }] : []),
    ...(devices.length ? [{ kind: 'd' as const, to: [{ name: 'device_id', criteria: devices }] }] : []),
  ];
}

/** The send's data with each entrant's event, by its user id or device id (as `targetsOf` names them). */
function withEvents(data: TemplateData | null, due: DueEntrant[]): TemplateData | null {
  const users = new Map<string, TemplateEvent>();
  const devices = new Map<string, TemplateEvent>();
  for (const e of due) {
    if (!e.event) continue;
    if (e.entrant_key.startsWith('u:')) users.set(e.entrant_key.slice(2), e.event);
    else devices.set(e.device_id, e.event);
  }
  if (!users.size && !devices.size) return data;
  return { ...data, event_by: { user_id: Object.fromEntries(users), device_id: Object.fromEntries(devices) } };
}

function moveOf(e: DueEntrant): EntrantMove {
  return {
    id: e.id,
    enteredAt: e.entered_at,
    seq: e.seq,
    stepId: e.step_id,
    phase: e.phase,
    dueAt: e.due_at,
    waitEvent: null,
    onEvent: null,
    outcome: null,
    history: [],
  };
}

function wait(e: DueEntrant, until: Date, history: HistoryEntry[]): EntrantMove {
  return { ...moveOf(e), phase: 'waiting', dueAt: until, history };
}

function leaveMove(e: DueEntrant, outcome: 'completed' | 'failed', history: HistoryEntry[]): EntrantMove {
  return { ...moveOf(e), phase: 'done', dueAt: null, outcome, history };
}
