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
import { END, parseJourneyDuration, type JourneyDefinition, type JourneyStep } from '../domain/journey.js';
import { delayEnd, stepOf, wayOn, zoneOf } from '../domain/journey-run.js';
import { messageRequestSchema } from '../domain/message-request.js';
import { notificationRequestSchema } from '../domain/notification-request.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { Counts, JourneyVersions } from './journey-counts.js';
import type { ServiceDeps } from './deps.js';
import type { MessageService } from './messages.js';
import type { CreatedNotification, NotificationService } from './notifications.js';

/** Groups of due entrants one poll looks at before it looks again. */
const GROUPS_AT_ONCE = 50;
/** Batches of one group a round runs before the others' turn. */
const BATCHES_A_GROUP = 20;
/** Batches of one group run at once: one waits on PostgreSQL while the other's sends are cut and released. */
const BATCHES_AT_ONCE = 2;

export type JourneyEngineDeps = Pick<ServiceDeps, 'db' | 'repos' | 'clock'> & {
  notifications: NotificationService;
  messages: MessageService;
  log: Logger;
  /** entrants moved (and sent to, by one notification) per transaction */
  batchSize: number;
};

/** What the engine uses of its dependencies, by name. */
interface EngineParts {
  db: Db;
  journeys: JourneysRepository;
  entrants: JourneyEntrantsRepository;
  devices: DevicesRepository;
  apps: AppsRepository;
  notifications: NotificationService;
  messages: MessageService;
  clock: Clock;
  log: Logger;
  batchSize: number;
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

  constructor(deps: JourneyEngineDeps) {
    const { repos } = deps;
    this.deps = { ...deps, journeys: repos.journeys, entrants: repos.journeyEntrants, devices: repos.devices, apps: repos.apps };
    this.versions = new JourneyVersions(repos.journeys);
  }

  /** Runs every batch due now; answers how many entrants moved. */
  async runDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const now = this.deps.clock.now();
      const groups = await this.deps.entrants.dueGroups(this.deps.db, now, GROUPS_AT_ONCE);
      let moved = 0;
      // a group runs batch after batch while it has full ones (the due query groups every due entrant: once a round);
      // after a first full one, BATCHES_AT_ONCE at a time, each its own transaction (SKIP LOCKED parts them)
      for (const group of groups) {
        let last = [await this.runGroup(group, now)];
        moved += last[0]!;
        for (let batches = 1; batches < BATCHES_A_GROUP && last.every((n) => n === this.deps.batchSize); batches += last.length) {
          last = await Promise.all(Array.from({ length: BATCHES_AT_ONCE }, () => this.runGroup(group, now)));
          for (const n of last) moved += n;
        }
      }
      total += moved;
      // nothing moved: nothing was due, or other workers hold it
      if (moved === 0) return total;
    }
  }

  /** One batch of a group; a step the request checks could not foresee failing (an expired send) fails the batch's entrants. */
  async runGroup(group: DueGroup, now: Date): Promise<number> {
    const definition = await this.versions.get(this.deps.db, group.journey_id, group.version);
    let result: { n: number; created: CreatedNotification[] };
    try {
      result = await this.deps.db.transaction().execute((trx) => this.runBatch(trx, group, definition, now, false));
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      this.deps.log.warn({ err: err.message, journeyId: group.journey_id, step: group.step_id }, 'journey step failed');
      result = await this.deps.db.transaction().execute((trx) => this.runBatch(trx, group, definition, now, true));
    }
    for (const c of result.created) await this.deps.notifications.release(c);
    return result.n;
  }

  private async runBatch(
    trx: Transaction<Database>,
    group: DueGroup,
    definition: JourneyDefinition,
    now: Date,
    failed: boolean,
  ): Promise<{ n: number; created: CreatedNotification[] }> {
    const due = await this.deps.entrants.lockDue(trx, group, now, this.deps.batchSize);
    if (due.length === 0) return { n: 0, created: [] };
    const counts = new Counts(group.journey_id);
    const step = stepOf(definition, group.step_id);
    let result: StepResult;
    if (!step || failed)
      // a way onward of "end" (a wait_for's on_event), or a step that failed: the entrants leave
      result = { moves: due.map((e) => leaveMove(e, failed ? 'failed' : 'completed')), created: [] };
    else if (group.phase === 'waiting') result = this.afterWait(definition, step, due, counts, now);
    else result = await this.runStep(trx, group, definition, step, due, counts, now);
    if (failed) counts.leave(group.step_id, 'failed', due.length);
    const moved = await this.deps.entrants.advance(trx, result.moves);
    // the rows were locked: a move that did not apply means another transition ran, and this one must not commit
    if (moved.size !== result.moves.length) throw new Error(`journey ${group.journey_id}: entrants moved under a lock`);
    await counts.write(trx, this.deps.journeys);
    return { n: due.length, created: result.created };
  }

  /** A delay ended or a wait_for timed out: the entrants pass on. */
  private afterWait(definition: JourneyDefinition, step: JourneyStep, due: DueEntrant[], counts: Counts, now: Date): StepResult {
    const to = wayOn(definition, step.id, step.type === 'wait_for' ? 'on_timeout' : 'next');
    return { moves: due.map((e) => this.pass(e, step.id, to, counts, now)), created: [] };
  }

  /** The entrants arrived at the step: it runs. */
  private async runStep(
    trx: Transaction<Database>,
    group: DueGroup,
    definition: JourneyDefinition,
    step: JourneyStep,
    due: DueEntrant[],
    counts: Counts,
    now: Date,
  ): Promise<StepResult> {
    const next = wayOn(definition, step.id, 'next');
    switch (step.type) {
      case 'delay': {
        const appZone = (await this.deps.apps.campaignSettingsOf(trx, [group.app_id])).get(group.app_id)?.default_time_zone ?? null;
        const moves = due.map((e) => wait(e, delayEnd(step, now, zoneOf(e.time_zone, appZone))));
        return { moves, created: [] };
      }
      case 'wait_for': {
        const end = new Date(now.getTime() + parseJourneyDuration(step.timeout)!);
        const onEvent = wayOn(definition, step.id, 'on_event');
        return { moves: due.map((e) => ({ ...wait(e, end), waitEvent: step.event, onEvent })), created: [] };
      }
      case 'branch': {
        const ids = due.map((e) => e.device_id);
        const matching = await this.deps.devices.matchingIds(trx, group.app_id, ids, step.filters as Filter[], now);
        const then = wayOn(definition, step.id, 'then');
        const otherwise = wayOn(definition, step.id, 'else');
        return { moves: due.map((e) => this.pass(e, step.id, matching.has(e.device_id) ? then : otherwise, counts, now)), created: [] };
      }
      case 'send': {
        const created = [];
        for (const to of targetsOf(due)) {
          const { notification: fields } = notificationRequestSchema.parse({ notification: { ...step.notification, to } });
          const options = this.deps.notifications.checkedOptions(fields, now, `journey.steps.${step.id}.notification`);
          const journey = { id: group.journey_id, version: group.version, step: step.id };
          // no audience: the batch names its devices, cut with the notification unless it needs the fan-out
          const templateData = withEvents(templateDataOf(fields), due);
          created.push(await this.deps.notifications.insert(trx, group.app_id, fields, { now, options, journey, templateData }));
        }
        return { moves: due.map((e) => this.pass(e, step.id, next, counts, now, 'sent')), created };
      }
      case 'message': {
        const created = [];
        for (const to of targetsOf(due)) {
          const { message } = messageRequestSchema.parse({ message: { ...step.message, to } });
          const journey = { id: group.journey_id, version: group.version, step: step.id };
          const stored = await this.deps.messages.insertIn(trx, group.app_id, message, now, journey);
          if (stored.notification) created.push(stored.notification);
        }
        return { moves: due.map((e) => this.pass(e, step.id, next, counts, now, 'sent')), created };
      }
    }
  }

  /** The entrant leaves `from` (counted as `how`) for `to`: due there now, or out of the journey at "end". */
  private pass(e: DueEntrant, from: string, to: string, counts: Counts, now: Date, how: 'passed' | 'sent' = 'passed'): EntrantMove {
    counts.leave(from, how);
    counts.arrive(to);
    if (to === END) return leaveMove(e, 'completed');
    return { ...moveOf(e), stepId: to, phase: 'arrived', dueAt: now };
  }
}

/**
 * The sends of a batch: a user entrant's go to every device of the user (by user_id), a device entrant's to its
 * device; filters in one list are AND'ed, so the two are a notification each.
 */
function targetsOf(due: DueEntrant[]): { name: string; criteria: string[] }[][] {
  const users = [...new Set(due.filter((e) => e.entrant_key.startsWith('u:')).map((e) => e.entrant_key.slice(2)))];
  const devices = [...new Set(due.filter((e) => e.entrant_key.startsWith('d:')).map((e) => e.device_id))];
  return [
    ...(users.length ? [[{ name: 'user_id', criteria: users }]] : []),
    ...(devices.length ? [[{ name: 'device_id', criteria: devices }]] : []),
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
  };
}

function wait(e: DueEntrant, until: Date): EntrantMove {
  return { ...moveOf(e), phase: 'waiting', dueAt: until };
}

function leaveMove(e: DueEntrant, outcome: 'completed' | 'failed'): EntrantMove {
  return { ...moveOf(e), phase: 'done', dueAt: null, outcome };
}
