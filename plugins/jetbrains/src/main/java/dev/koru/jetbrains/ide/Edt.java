// Runs IDE work on the Event Dispatch Thread from the plugin's own threads and waits for it with a limit, so Swing is only touched on the EDT and the socket threads never block it.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.application.ApplicationManager;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

final class Edt {
    private Edt() {}

    /** Calls {@code work} on the EDT and waits up to {@code timeoutMs} for its result; must not be called on the EDT. */
    static <T> T call(Callable<T> work, long timeoutMs) throws Exception {
        if (ApplicationManager.getApplication().isDispatchThread()) {
            throw new IllegalStateException("Edt.call must not run on the EDT (it would wait for itself)");
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        ApplicationManager.getApplication().invokeLater(() -> {
            try {
                result.complete(work.call());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        try {
            return result.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) throw (Exception) cause;
            throw e;
        } catch (TimeoutException e) {
            throw new TimeoutException("the IDE did not run the step within " + timeoutMs + " ms (a modal dialog open?)");
        }
    }

    /** Posts {@code work} to the EDT without waiting. */
    static void later(Runnable work) {
        ApplicationManager.getApplication().invokeLater(work);
    }
}
