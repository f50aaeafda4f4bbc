// Runs the steps of a `drive` in order — the daemon decides, the plugin executes — acking each proven stage, stopping at the first failure with a classified blocker, restoring the clipboard whatever happens, and refusing commands outside the allow-list (as plugins/vscode/src/executor.ts).
package dev.koru.jetbrains.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/** The executor's control flow, free of IDE code: the IDE glue supplies a {@link Host}. */
public final class StepExecutor {
    private StepExecutor() {}

    /** Built-in step: activate a tool window by id ({@code args: [id]}) through ToolWindowManager. */
    public static final String ACTIVATE_TOOL_WINDOW = "koru.activateToolWindow";
    /** Built-in step: move focus to the text input inside a tool window ({@code args: [id]}). */
    public static final String FOCUS_INPUT = "koru.focusInput";
    /** Built-in step: paste the prompt into the focused input; the executor puts the prompt on the clipboard around it. */
    public static final String PASTE = "koru.paste";
    /** Built-in step: submit the focused input (Enter), optionally checking it is inside tool window {@code args[0]}. */
    public static final String SUBMIT = "koru.submit";
    /** Every built-in step; any other command is an IDE action id run through ActionManager. */
    public static final Set<String> BUILT_IN = Set.of(ACTIVATE_TOOL_WINDOW, FOCUS_INPUT, PASTE, SUBMIT);

    /** The side effects the executor needs, so tests can use fakes (the plugin wires the IDE's). */
    public interface Host {
        /** Runs one step's command; throws when it fails or does not exist ({@link StepFailure} to classify). */
        void executeCommand(String command, List<JsonElement> args) throws Exception;

        /** The clipboard's text, or {@code null} when it holds no text. */
        String readClipboard() throws Exception;

        /** Puts text on the clipboard ({@code null}: restore "no text"). */
        void writeClipboard(String text) throws Exception;
    }

    /** A step failure with a classified blocker code ({@code focus_mismatch}, {@code capability_missing}, …). */
    public static final class StepFailure extends Exception {
        public final String code;

        public StepFailure(String code, String detail) {
            super(detail);
            this.code = code;
        }
    }

    /** One {@code ack} to send. */
    public static final class StageAck {
        public final String stage;
        public final Messages.Blocker blocker;
        /** With {@code submitted}: what proves it ({@link Messages.SubmitEvidence}). */
        public final String evidence;

        public StageAck(String stage, Messages.Blocker blocker) {
            this(stage, blocker, null);
        }

        public StageAck(String stage, Messages.Blocker blocker, String evidence) {
            this.stage = stage;
            this.blocker = blocker;
            this.evidence = evidence;
        }

        /**
         * The ack for a step that proved {@code stage}. A step proving {@code submitted} is an
         * Enter key press posted to the IDE's event queue ({@link #SUBMIT}) or an IDE action
         * run through ActionManager: it proves only that the key press was posted or the action
         * returned, not that the chat took the prompt, so it says {@code command_returned}.
         */
        static StageAck of(String stage) {
            return "submitted".equals(stage)
                    ? new StageAck(stage, null, Messages.SubmitEvidence.COMMAND_RETURNED)
                    : new StageAck(stage, null);
        }

        static StageAck failed(String code, String detail) {
            return new StageAck("failed", new Messages.Blocker(code, detail));
        }

        @Override
        public String toString() {
            if (blocker != null) return stage + " (" + blocker + ")";
            return evidence == null ? stage : stage + " [" + evidence + "]";
        }
    }

    /** Replaces every string {@code "$prompt"} inside step arguments with the prompt. */
    public static JsonElement substitutePrompt(JsonElement value, String prompt) {
        if (value == null || value.isJsonNull()) return value;
        if (value.isJsonPrimitive()) {
            JsonPrimitive primitive = value.getAsJsonPrimitive();
            return primitive.isString() && primitive.getAsString().equals("$prompt") ? new JsonPrimitive(prompt) : value;
        }
        if (value.isJsonArray()) {
            JsonArray out = new JsonArray();
            for (JsonElement element : value.getAsJsonArray()) out.add(substitutePrompt(element, prompt));
            return out;
        }
        JsonObject out = new JsonObject();
        for (Map.Entry<String, JsonElement> entry : value.getAsJsonObject().entrySet()) {
            out.add(entry.getKey(), substitutePrompt(entry.getValue(), prompt));
        }
        return out;
    }

    /**
     * Executes {@code steps} for {@code prompt}, calling {@code ack} for {@code received}, each
     * step's proven stage, and {@code failed} with a blocker on the first failure (nothing runs
     * after it). Commands not in {@code allowed} are refused with {@code command_not_allowed}
     * before anything runs. A drive that must submit whose steps stop short of
     * {@code submitted} fails with {@code capability_missing}. Once {@code cancelled} says true,
     * no step starts. The clipboard the paste step replaced is restored even when a step throws.
     */
    public static void execute(List<Messages.DriveStep> steps, String prompt, Host host, Set<String> allowed,
                               Consumer<StageAck> ack, boolean submit, BooleanSupplier cancelled) {
        List<Messages.DriveStep> plan = steps == null ? List.of() : steps;
        for (Messages.DriveStep step : plan) {
            if (step.command == null || !allowed.contains(step.command)) {
                ack.accept(StageAck.failed("command_not_allowed",
                        step.command + " is not on this plugin's allow-list (Settings → Tools → Koru → Allowed commands)"));
                return;
            }
        }
        if (plan.isEmpty()) {
            ack.accept(StageAck.failed("capability_missing", "the drive names no steps to run"));
            return;
        }
        ack.accept(StageAck.of("received"));
        boolean savedClipboard = false;
        String previousClipboard = null;
        try {
            for (Messages.DriveStep step : plan) {
                if (cancelled.getAsBoolean()) return;
                List<JsonElement> args = new ArrayList<>();
                if (step.args != null) for (JsonElement arg : step.args) args.add(substitutePrompt(arg, prompt));
                try {
                    if (PASTE.equals(step.command)) {
                        if (!savedClipboard) {
                            previousClipboard = readClipboard(host);
                            savedClipboard = true;
                        }
                        writeClipboard(host, prompt);
                    }
                    host.executeCommand(step.command, args);
                } catch (StepFailure failure) {
                    ack.accept(StageAck.failed(failure.code, step.command + " failed: " + failure.getMessage()));
                    return;
                } catch (Exception | LinkageError error) {
                    ack.accept(StageAck.failed("capability_missing", step.command + " failed: " + describe(error)));
                    return;
                }
                if (cancelled.getAsBoolean()) return;
                ack.accept(StageAck.of(step.proves));
            }
            String last = plan.get(plan.size() - 1).proves;
            if (submit && !"submitted".equals(last) && !cancelled.getAsBoolean()) {
                ack.accept(StageAck.failed("capability_missing",
                        "the route's steps stop at `" + last + "` and none submits: the prompt is in the chat input, unsent"));
            }
        } finally {
            if (savedClipboard) {
                try {
                    host.writeClipboard(previousClipboard);
                } catch (Exception ignored) {
                    // Nothing more to do: the drive's outcome is already acked.
                }
            }
        }
    }

    private static String readClipboard(Host host) throws StepFailure {
        try {
            return host.readClipboard();
        } catch (Exception e) {
            throw new StepFailure("clipboard_unavailable", "could not read the clipboard: " + describe(e));
        }
    }

    private static void writeClipboard(Host host, String text) throws StepFailure {
        try {
            host.writeClipboard(text);
        } catch (Exception e) {
            throw new StepFailure("clipboard_unavailable", "could not write the clipboard: " + describe(e));
        }
    }

    private static String describe(Throwable error) {
        String message = error.getMessage();
        return message == null || message.isEmpty() ? error.getClass().getSimpleName() : message;
    }
}
