import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database } from '../db/schema.js';
import type { JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import type { JourneysRepository } from '../db/repositories/journeys.js';
import type { Logger } from '../platform/logger.js';
import { Counts } from './journey-counts.js';

/**
 * Entrants of an archived journey one transaction exits: a million in one statement took 17.8 s, longer than a
 * client waits for its answer and a transaction that long holds back vacuum; 20,000 take about half a second.
 */
export const EXITS_AT_ONCE = 20_000;
/** How long a journey poll exits entrants before the steps due take their turn. */
const EXIT_TURN_MS = 1000;

interface ExitParts {
  db: Db;
  journeys: JourneysRepository;
  entrants: JourneyEntrantsRepository;
}

/**
 * Up to EXITS_AT_ONCE entrants still inside the archived journey leave it, counted as exited at their step; once
 * none is left, the journey is no longer `exiting`. Answers whether some may still be inside.
 */
export async function exitSomeOf(trx: Transaction<Database>, parts: ExitParts, journeyId: string, now: Date): Promise<boolean> {
  const { left, more } = await parts.entrants.exitSome(trx, { journeyId, now, limit: EXITS_AT_ONCE });
  const counts = new Counts(journeyId);
  for (const l of left) counts.leave(l.step_id, 'exited', l.n);
  await counts.write(trx, parts.journeys);
  if (!more) await parts.journeys.doneExiting(trx, journeyId);
  return more;
}

/**
 * The entrants archived journeys still hold leave, a batch a transaction, for at most EXIT_TURN_MS (the next poll
 * goes on); a journey another worker is exiting is left to it. A journey whose batch fails is logged and tried again
 * next poll: the other journeys' exits and steps go on.
 */
export async function exitArchived(parts: ExitParts & { log: Logger }, now: () => Date): Promise<void> {
  const until = Date.now() + EXIT_TURN_MS;
  for (const id of await parts.journeys.exitingIds(parts.db)) {
    let more = true;
    try {
      while (more && Date.now() < until)
        more = await parts.db
          .transaction()
          .execute(async (trx) => (await parts.journeys.lockExiting(trx, id)) && exitSomeOf(trx, parts, id, now()));
    } catch (err) {
      parts.log.error({ err, journeyId: id }, 'archived journey: a batch of its entrants could not leave; tried again next poll');
    }
  }
}
