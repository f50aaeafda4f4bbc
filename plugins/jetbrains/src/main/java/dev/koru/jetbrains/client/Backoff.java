// Reconnect delays: capped exponential backoff with full jitter, so that many IDE windows do not reconnect in lockstep after a daemon restart (as plugins/vscode/src/backoff.ts).
package dev.koru.jetbrains.client;

import java.util.function.DoubleSupplier;

/** The delay before each reconnect attempt. */
public final class Backoff {
    /** The first delay's ceiling in milliseconds. */
    public final long initialMs;
    /** No delay exceeds this. */
    public final long maxMs;

    public static final Backoff DEFAULT = new Backoff(250, 30_000);

    public Backoff(long initialMs, long maxMs) {
        if (initialMs <= 0 || maxMs < initialMs) throw new IllegalArgumentException("need 0 < initialMs <= maxMs");
        this.initialMs = initialMs;
        this.maxMs = maxMs;
    }

    /** The ceiling for attempt {@code attempt} (0-based): doubles each attempt up to {@link #maxMs}. */
    public long ceiling(int attempt) {
        int exponent = Math.max(0, Math.min(attempt, 30));
        return Math.min(maxMs, initialMs * (1L << exponent));
    }

    /**
     * The delay before reconnect attempt {@code attempt} (0-based): a uniformly random value in
     * [ceiling / 2, ceiling]. {@code random} returns a number in [0, 1) and is injectable for tests.
     */
    public long delay(int attempt, DoubleSupplier random) {
        double ceiling = ceiling(attempt);
        return Math.round(ceiling / 2 + random.getAsDouble() * (ceiling / 2));
    }
}
