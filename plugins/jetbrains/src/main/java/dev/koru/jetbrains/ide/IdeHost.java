// The executor's host inside the IDE: runs a step's command — an action by id through ActionManager, or one of Koru's built-in steps (activate a tool window through ToolWindowManager, focus its input through IdeFocusManager, paste, press Enter) — and reads/writes the clipboard through CopyPasteManager, always on the EDT.
package dev.koru.jetbrains.ide;

import com.google.gson.JsonElement;
import com.intellij.openapi.actionSystem.ActionManager;
import com.intellij.openapi.actionSystem.AnAction;
import com.intellij.openapi.ide.CopyPasteManager;
import com.intellij.openapi.project.Project;
import com.intellij.openapi.util.ActionCallback;
import com.intellij.openapi.wm.IdeFocusManager;
import com.intellij.openapi.wm.ToolWindow;
import com.intellij.openapi.wm.ToolWindowManager;
import dev.koru.jetbrains.client.StepExecutor;
import dev.koru.jetbrains.client.StepExecutor.StepFailure;

import javax.swing.JComponent;
import javax.swing.SwingUtilities;
import javax.swing.text.JTextComponent;
import java.awt.Component;
import java.awt.Container;
import java.awt.KeyboardFocusManager;
import java.awt.Toolkit;
import java.awt.datatransfer.DataFlavor;
import java.awt.datatransfer.StringSelection;
import java.awt.datatransfer.Transferable;
import java.awt.event.KeyEvent;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** Called on the plugin's drive thread; every IDE call hops to the EDT through {@link Edt}. */
final class IdeHost implements StepExecutor.Host {
    /** The IDE's paste action (IdeActions.ACTION_PASTE), for inputs that are editors rather than Swing text fields. */
    static final String PASTE_ACTION = "$Paste";
    private static final long STEP_TIMEOUT_MS = 10_000;
    private static final long FOCUS_WAIT_MS = 2_000;

    private final Project project;
    /** What the clipboard held before the paste step, restored as it was (not only its text). */
    private Transferable saved;
    private String savedText;

    IdeHost(Project project) {
        this.project = project;
    }

    @Override
    public void executeCommand(String command, List<JsonElement> args) throws Exception {
        switch (command) {
            case StepExecutor.ACTIVATE_TOOL_WINDOW:
                activateToolWindow(stringArg(args, 0, command));
                break;
            case StepExecutor.FOCUS_INPUT:
                focusInput(stringArg(args, 0, command));
                break;
            case StepExecutor.PASTE:
                paste();
                break;
            case StepExecutor.SUBMIT:
                submit(args.isEmpty() ? null : args.get(0).getAsString());
                break;
            default:
                runAction(command);
        }
    }

    @Override
    public String readClipboard() throws Exception {
        return Edt.call(() -> {
            saved = CopyPasteManager.getInstance().getContents();
            String text = CopyPasteManager.getInstance().getContents(DataFlavor.stringFlavor);
            savedText = text;
            return text;
        }, STEP_TIMEOUT_MS);
    }

    @Override
    public void writeClipboard(String text) throws Exception {
        Edt.call(() -> {
            // The executor restores with exactly the text readClipboard returned: put back the whole Transferable.
            boolean restoring = saved != null && text == savedText;
            CopyPasteManager.getInstance().setContents(restoring ? saved : new StringSelection(text == null ? "" : text));
            if (restoring) {
                saved = null;
                savedText = null;
            }
            return null;
        }, STEP_TIMEOUT_MS);
    }

    private static String stringArg(List<JsonElement> args, int index, String command) throws StepFailure {
        if (args.size() <= index || !args.get(index).isJsonPrimitive()) {
            throw new StepFailure("capability_missing", command + " needs a tool window id as argument " + (index + 1));
        }
        return args.get(index).getAsString();
    }

    private ToolWindow toolWindow(String id) throws StepFailure {
        ToolWindow window = ToolWindowManager.getInstance(project).getToolWindow(id);
        if (window == null) {
            throw new StepFailure("capability_missing", "this IDE has no tool window `" + id + "` (is its plugin installed and enabled?)");
        }
        if (!window.isAvailable()) throw new StepFailure("capability_missing", "the tool window `" + id + "` is not available now");
        return window;
    }

    private void activateToolWindow(String id) throws Exception {
        CountDownLatch activated = new CountDownLatch(1);
        Edt.call(() -> {
            toolWindow(id).activate(activated::countDown, true);
            return null;
        }, STEP_TIMEOUT_MS);
        if (!activated.await(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new StepFailure("focus_mismatch", "the tool window `" + id + "` did not activate within " + STEP_TIMEOUT_MS + " ms");
        }
    }

    private void focusInput(String id) throws Exception {
        Component input = Edt.call(() -> {
            JComponent root = toolWindow(id).getComponent();
            Component found = findInput(root);
            if (found == null) throw new StepFailure("capability_missing", "no text input found in the tool window `" + id + "`");
            IdeFocusManager.getInstance(project).requestFocus(found, true);
            return found;
        }, STEP_TIMEOUT_MS);
        long until = System.currentTimeMillis() + FOCUS_WAIT_MS;
        while (System.currentTimeMillis() < until) {
            Boolean focused = Edt.call(() -> {
                Component owner = KeyboardFocusManager.getCurrentKeyboardFocusManager().getFocusOwner();
                return owner != null && (owner == input || SwingUtilities.isDescendingFrom(owner, input));
            }, STEP_TIMEOUT_MS);
            if (focused) return;
            Thread.sleep(25);
        }
        throw new StepFailure("focus_mismatch", "the input of `" + id + "` did not get the keyboard focus (is the IDE window in front?)");
    }

    /**
     * The chat input inside a tool window: the last (lowest in the tree order, where chat
     * inputs sit) showing, editable text component or IntelliJ editor component.
     */
    static Component findInput(Component root) {
        Component best = null;
        if (root == null || !root.isShowing()) return null;
        if (root instanceof JTextComponent && ((JTextComponent) root).isEditable() && root.isFocusable()) best = root;
        else if (root.getClass().getName().endsWith("EditorComponentImpl") && root.isFocusable()) best = root;
        if (root instanceof Container) {
            for (Component child : ((Container) root).getComponents()) {
                Component found = findInput(child);
                if (found != null) best = found;
            }
        }
        return best;
    }

    private void paste() throws Exception {
        Edt.call(() -> {
            Component owner = focusOwner("paste");
            if (owner instanceof JTextComponent && ((JTextComponent) owner).isEditable()) {
                ((JTextComponent) owner).paste();
                return null;
            }
            AnAction action = ActionManager.getInstance().getAction(PASTE_ACTION);
            if (action == null) throw new StepFailure("capability_missing", "this IDE has no " + PASTE_ACTION + " action");
            ActionCallback done = ActionManager.getInstance().tryToExecute(action, null, owner, "Koru", true);
            if (done.isRejected()) throw new StepFailure("capability_missing", PASTE_ACTION + " was rejected in the focused input");
            return null;
        }, STEP_TIMEOUT_MS);
    }

    private void submit(String toolWindowId) throws Exception {
        Edt.call(() -> {
            Component owner = focusOwner("submit");
            if (toolWindowId != null) {
                JComponent root = toolWindow(toolWindowId).getComponent();
                if (!SwingUtilities.isDescendingFrom(owner, root)) {
                    throw new StepFailure("focus_mismatch", "the keyboard focus left the tool window `" + toolWindowId + "` before submitting");
                }
            }
            // Posted to the event queue (not dispatched to the component) so the IDE's keymap handles Enter as a key press would.
            long now = System.currentTimeMillis();
            java.awt.EventQueue queue = Toolkit.getDefaultToolkit().getSystemEventQueue();
            queue.postEvent(new KeyEvent(owner, KeyEvent.KEY_PRESSED, now, 0, KeyEvent.VK_ENTER, '\n'));
            queue.postEvent(new KeyEvent(owner, KeyEvent.KEY_TYPED, now, 0, KeyEvent.VK_UNDEFINED, '\n'));
            queue.postEvent(new KeyEvent(owner, KeyEvent.KEY_RELEASED, now, 0, KeyEvent.VK_ENTER, '\n'));
            return null;
        }, STEP_TIMEOUT_MS);
    }

    private void runAction(String id) throws Exception {
        Edt.call(() -> {
            AnAction action = ActionManager.getInstance().getAction(id);
            if (action == null) throw new StepFailure("capability_missing", "this IDE has no action `" + id + "`");
            Component context = KeyboardFocusManager.getCurrentKeyboardFocusManager().getFocusOwner();
            ActionCallback done = ActionManager.getInstance().tryToExecute(action, null, context, "Koru", true);
            if (done.isRejected()) throw new StepFailure("capability_missing", "the action `" + id + "` is disabled here");
            return null;
        }, STEP_TIMEOUT_MS);
    }

    private static Component focusOwner(String what) throws StepFailure {
        Component owner = KeyboardFocusManager.getCurrentKeyboardFocusManager().getFocusOwner();
        if (owner == null) throw new StepFailure("focus_mismatch", "nothing has the keyboard focus to " + what + " into (the IDE window is not in front)");
        return owner;
    }
}
