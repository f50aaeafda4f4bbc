/** Reconnect delays: capped exponential backoff with full jitter, so that many windows do not reconnect in lockstep after a daemon restart. */

export interface BackoffOptions {
  /** The first delay's ceiling in milliseconds. */
  initialMs: number;
  /** No delay exceeds this. */
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 250, maxMs: 30_000 };

/**
 * The delay before reconnect attempt `attempt` (0-based): a uniformly random value in
 * [ceiling / 2, ceiling], where the ceiling doubles each attempt up to `maxMs`.
 * `random` returns a number in [0, 1) and is injectable for tests.
 */
export function reconnectDelay(
  attempt: number,
  options: BackoffOptions = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
