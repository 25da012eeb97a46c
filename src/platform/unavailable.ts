import { isDatabaseUnavailable } from '../domain/errors.js';

/**
 * Runs `work` again while it fails because the database cannot serve (isDatabaseUnavailable), every `everyMs` for up
 * to `withinMs`; any other error, or the last one, is thrown. Only for work that is safe to repeat: a write a
 * condition makes happen at most once, a read.
 */
export async function retryWhileUnavailable<T>(work: () => Promise<T>, withinMs: number, everyMs = 250): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return await work();
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() + everyMs > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }
}
