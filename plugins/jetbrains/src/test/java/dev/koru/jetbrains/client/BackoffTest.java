// Reconnect schedule tests: the ceiling doubles from 250 ms to the 30 s cap, every delay lies in [ceiling/2, ceiling], and the jitter spreads windows apart.
package dev.koru.jetbrains.client;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Random;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BackoffTest {
    @Test
    void theCeilingDoublesUpToTheCap() {
        long[] expected = {250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000};
        for (int attempt = 0; attempt < expected.length; attempt++) {
            assertEquals(expected[attempt], Backoff.DEFAULT.ceiling(attempt), "attempt " + attempt);
        }
        assertEquals(30000, Backoff.DEFAULT.ceiling(1000), "huge attempts do not overflow");
    }

    @Test
    void delaysLieBetweenHalfTheCeilingAndTheCeiling() {
        assertEquals(125, Backoff.DEFAULT.delay(0, () -> 0.0));
        assertEquals(250, Backoff.DEFAULT.delay(0, () -> 0.999999));
        assertEquals(15000, Backoff.DEFAULT.delay(12, () -> 0.0));
        assertEquals(30000, Backoff.DEFAULT.delay(12, () -> 0.9999999));
        Random random = new Random(7);
        for (int attempt = 0; attempt < 40; attempt++) {
            long ceiling = Backoff.DEFAULT.ceiling(attempt);
            long delay = Backoff.DEFAULT.delay(attempt, random::nextDouble);
            assertTrue(delay >= ceiling / 2 && delay <= ceiling, attempt + ": " + delay);
        }
    }

    @Test
    void jitterSpreadsReconnects() {
        Random random = new Random(1);
        Set<Long> delays = new HashSet<>();
        for (int i = 0; i < 50; i++) delays.add(Backoff.DEFAULT.delay(6, random::nextDouble));
        assertTrue(delays.size() > 40, "50 windows should not reconnect at the same moment: " + delays.size());
    }

    @Test
    void badSettingsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Backoff(0, 10));
        assertThrows(IllegalArgumentException.class, () -> new Backoff(100, 10));
    }
}
