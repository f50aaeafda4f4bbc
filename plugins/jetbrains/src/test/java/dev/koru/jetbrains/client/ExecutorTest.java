// Executor control-flow tests with fake steps: order and $prompt substitution, acks per stage, stop at the first failure with a classified blocker, the clipboard restored even when a step throws, the allow-list, cancellation, and a route that stops short of submitting.
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;

class ExecutorTest {
    /** A host that records what it was asked and fails or throws on command. */
    static final class FakeHost implements StepExecutor.Host {
        final List<String> calls = new ArrayList<>();
        String clipboard = "what the user had";
        String failOn;
        String failCode;
        String throwOn;
        boolean clipboardBroken;

        @Override
        public void executeCommand(String command, List<JsonElement> args) throws Exception {
            calls.add(command + args);
            if (command.equals(failOn)) throw new StepExecutor.StepFailure(failCode, "no such thing");
            if (command.equals(throwOn)) throw new IllegalStateException("boom");
            if (command.equals(StepExecutor.PASTE)) calls.add("pasted:" + clipboard);
        }

        @Override
        public String readClipboard() throws Exception {
            if (clipboardBroken) throw new java.io.IOException("no clipboard owner");
            return clipboard;
        }

        @Override
        public void writeClipboard(String text) {
            clipboard = text;
        }
    }

    static Messages.DriveStep step(String command, String proves, String... args) {
        List<JsonElement> list = new ArrayList<>();
        for (String arg : args) list.add(new JsonPrimitive(arg));
        return new Messages.DriveStep(command, list, proves);
    }

    static final List<Messages.DriveStep> AI_ASSISTANT = List.of(
            step(StepExecutor.ACTIVATE_TOOL_WINDOW, "focused", "AIAssistant"),
            step(StepExecutor.FOCUS_INPUT, "focused", "AIAssistant"),
            step(StepExecutor.PASTE, "pasted", "$prompt"),
            step(StepExecutor.SUBMIT, "submitted", "AIAssistant"));

    static final Set<String> ALLOWED = Set.copyOf(Catalog.COMMANDS);

    static List<String> run(List<Messages.DriveStep> steps, FakeHost host, boolean submit) {
        List<String> acks = new ArrayList<>();
        StepExecutor.execute(steps, "Fix the bug", host, ALLOWED, ack -> acks.add(ack.toString()), submit, () -> false);
        return acks;
    }

    @Test
    void stepsRunInOrderWithThePromptSubstitutedAndEveryStageAcked() {
        FakeHost host = new FakeHost();
        List<String> acks = run(AI_ASSISTANT, host, true);
        assertEquals(List.of("received", "focused", "focused", "pasted", "submitted [command_returned]"), acks);
        assertEquals(List.of("koru.activateToolWindow[\"AIAssistant\"]", "koru.focusInput[\"AIAssistant\"]",
                "koru.paste[\"Fix the bug\"]", "pasted:Fix the bug", "koru.submit[\"AIAssistant\"]"), host.calls);
        assertEquals("what the user had", host.clipboard, "the clipboard is restored");
    }

    @Test
    void onlyTheSubmittedAckCarriesEvidenceAndItIsCommandReturned() {
        // The submit step posts an Enter key press (or runs an action): that proves the key
        // press or action returned, not that the chat took the prompt.
        List<StepExecutor.StageAck> acks = new ArrayList<>();
        List<Messages.DriveStep> actionSubmit = new ArrayList<>(AI_ASSISTANT.subList(0, 3));
        actionSubmit.add(step("copilot.chat.show", "submitted"));
        for (List<Messages.DriveStep> steps : List.of(AI_ASSISTANT, actionSubmit)) {
            acks.clear();
            StepExecutor.execute(steps, "p", new FakeHost(), ALLOWED, acks::add, true, () -> false);
            StepExecutor.StageAck last = acks.get(acks.size() - 1);
            assertEquals("submitted", last.stage);
            assertEquals(Messages.SubmitEvidence.COMMAND_RETURNED, last.evidence);
            assertEquals(List.of(), acks.subList(0, acks.size() - 1).stream().filter(a -> a.evidence != null).collect(Collectors.toList()),
                    "no other stage carries evidence");
        }
        assertEquals(JsonParser.parseString("{\"v\":1,\"type\":\"ack\",\"drive_id\":\"d_1\",\"stage\":\"submitted\",\"evidence\":\"command_returned\"}"),
                JsonParser.parseString(new String(Codec.encodeLine(new Messages.Ack("d_1", "submitted", null, Messages.SubmitEvidence.COMMAND_RETURNED)),
                        java.nio.charset.StandardCharsets.UTF_8)));
    }

    @Test
    void theFirstFailureStopsTheDriveWithItsClassifiedBlocker() {
        FakeHost host = new FakeHost();
        host.failOn = StepExecutor.FOCUS_INPUT;
        host.failCode = "focus_mismatch";
        List<String> acks = run(AI_ASSISTANT, host, true);
        assertEquals(List.of("received", "focused", "failed (focus_mismatch: koru.focusInput failed: no such thing)"), acks);
        assertEquals(2, host.calls.size(), "nothing runs after the failing step");
    }

    @Test
    void theClipboardIsRestoredWhenAStepThrows() {
        FakeHost host = new FakeHost();
        host.throwOn = StepExecutor.SUBMIT;
        List<String> acks = run(AI_ASSISTANT, host, true);
        assertEquals("failed (capability_missing: koru.submit failed: boom)", acks.get(acks.size() - 1));
        assertEquals("what the user had", host.clipboard);
    }

    @Test
    void aBrokenClipboardIsClassified() {
        FakeHost host = new FakeHost();
        host.clipboardBroken = true;
        List<String> acks = run(AI_ASSISTANT, host, true);
        assertEquals("failed (clipboard_unavailable: koru.paste failed: could not read the clipboard: no clipboard owner)",
                acks.get(acks.size() - 1));
    }

    @Test
    void commandsOutsideTheAllowListAreRefusedBeforeAnythingRuns() {
        FakeHost host = new FakeHost();
        List<Messages.DriveStep> steps = new ArrayList<>(AI_ASSISTANT);
        steps.add(1, step("$ShowSettings", "focused"));
        List<String> acks = run(steps, host, true);
        assertEquals(1, acks.size());
        assertEquals("failed", acks.get(0).split(" ")[0]);
        assertEquals(true, acks.get(0).contains("command_not_allowed"));
        assertEquals(List.of(), host.calls);
    }

    @Test
    void noStepsIsCapabilityMissing() {
        assertEquals(List.of("failed (capability_missing: the drive names no steps to run)"), run(List.of(), new FakeHost(), true));
    }

    @Test
    void aRouteThatStopsShortOfSubmittingFailsWhenTheDriveMustSubmit() {
        List<Messages.DriveStep> noSubmit = AI_ASSISTANT.subList(0, 3);
        List<String> acks = run(noSubmit, new FakeHost(), true);
        assertEquals("pasted", acks.get(acks.size() - 2));
        assertEquals(true, acks.get(acks.size() - 1).startsWith("failed (capability_missing"));
        assertEquals(List.of("received", "focused", "focused", "pasted"), run(noSubmit, new FakeHost(), false));
    }

    @Test
    void aCancelledDriveStartsNoFurtherStep() {
        FakeHost host = new FakeHost();
        AtomicBoolean cancelled = new AtomicBoolean();
        List<String> acks = new ArrayList<>();
        StepExecutor.execute(AI_ASSISTANT, "p", host, ALLOWED, ack -> {
            acks.add(ack.stage);
            if (acks.size() == 2) cancelled.set(true);
        }, true, cancelled::get);
        assertEquals(List.of("received", "focused"), acks);
        assertEquals(1, host.calls.size());
        assertEquals("what the user had", host.clipboard);
    }

    @Test
    void promptSubstitutionReachesNestedArguments() {
        JsonElement args = JsonParser.parseString("[{\"query\":\"$prompt\",\"list\":[\"$prompt\",\"$promptx\",3]},null]");
        assertEquals(JsonParser.parseString("[{\"query\":\"P\",\"list\":[\"P\",\"$promptx\",3]},null]"),
                StepExecutor.substitutePrompt(args, "P"));
    }

    @Test
    void theCatalogAllowsItsOwnStepsAndNamesItsToolWindows() {
        assertEquals(true, Catalog.COMMANDS.containsAll(StepExecutor.BUILT_IN));
        assertEquals(true, Catalog.TOOL_WINDOWS.contains("AIAssistant"));
        assertEquals(List.of(), Catalog.ACTION_IDS.stream().filter(StepExecutor.BUILT_IN::contains).collect(Collectors.toList()));
    }
}
