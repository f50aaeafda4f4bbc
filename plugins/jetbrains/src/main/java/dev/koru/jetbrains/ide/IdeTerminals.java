// The project's terminal tabs as the terminal bridge's ports: the reworked terminal's tabs (2025.3+ Terminal API) and the classic terminal's widgets, each bound to the real classes; where the IDE has no terminal plugin, or an API has changed shape, there are none.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.diagnostic.Logger;
import com.intellij.openapi.project.Project;
import dev.koru.jetbrains.client.TerminalBridge;
import dev.koru.jetbrains.client.TerminalPorts;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Not run against a real JetBrains IDE here (none can run on the build machine): compiled against stubs of the terminal
 * plugin's classes; every call into them is guarded, so a changed API makes the terminals unreachable, never breaks the
 * plugin. What the bridge does with the ports is unit-tested against fakes of both APIs.
 */
final class IdeTerminals {
    private static final Logger LOG = Logger.getInstance(IdeTerminals.class);

    private final Project project;
    /** Stable ids per tab object, for the tab's life. */
    private final Map<Object, String> ids = new WeakHashMap<>();
    private final AtomicInteger next = new AtomicInteger();
    private volatile boolean reworkedBroken;
    private volatile boolean classicBroken;

    IdeTerminals(Project project) {
        this.project = project;
    }

    /** Whether this IDE has the terminal plugin (its classes are visible through the optional dependency). */
    static boolean available() {
        try {
            Class.forName("org.jetbrains.plugins.terminal.TerminalToolWindowManager", false, IdeTerminals.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private synchronized String idOf(Object tab) {
        return ids.computeIfAbsent(tab, t -> "term-" + next.incrementAndGet());
    }

    /** Every terminal tab now; called off the EDT (the tab lists are read on it). */
    List<TerminalBridge.Port> ports() {
        List<TerminalBridge.Port> ports = new ArrayList<>();
        if (!available()) return ports;
        try {
            ports.addAll(Edt.call(this::portsOnEdt, 5_000));
        } catch (Exception e) {
            LOG.debug("Koru: the terminal tabs could not be listed: " + e);
        }
        return ports;
    }

    private List<TerminalBridge.Port> portsOnEdt() {
        List<TerminalBridge.Port> ports = new ArrayList<>();
        if (!reworkedBroken) {
            try {
                for (com.intellij.terminal.frontend.toolwindow.TerminalToolWindowTab tab
                        : com.intellij.terminal.frontend.toolwindow.TerminalToolWindowTabsManager.getInstance(project).getTabs()) {
                    ports.add(TerminalPorts.reworked(idOf(tab), new Reworked(tab.getView())));
                }
            } catch (LinkageError e) {
                reworkedBroken = true; // no reworked terminal API in this IDE (before 2025.3), or another shape
                LOG.info("Koru: no reworked terminal API here (" + e + "); classic terminals only");
            } catch (RuntimeException e) {
                LOG.debug("Koru: reworked terminal tabs: " + e);
            }
        }
        if (!classicBroken) {
            try {
                for (com.intellij.terminal.ui.TerminalWidget widget
                        : org.jetbrains.plugins.terminal.TerminalToolWindowManager.getInstance(project).getTerminalWidgets()) {
                    ports.add(TerminalPorts.classic(idOf(widget), new Classic(widget)));
                }
            } catch (LinkageError e) {
                classicBroken = true;
                LOG.info("Koru: no classic terminal API here (" + e + ")");
            } catch (RuntimeException e) {
                LOG.debug("Koru: classic terminal widgets: " + e);
            }
        }
        return ports;
    }

    /** A classic terminal widget over the real classes. */
    private static final class Classic implements TerminalPorts.Classic {
        private final com.intellij.terminal.ui.TerminalWidget widget;

        Classic(com.intellij.terminal.ui.TerminalWidget widget) {
            this.widget = widget;
        }

        @Override
        public String title() {
            try {
                return widget.getTerminalTitle().buildTitle();
            } catch (RuntimeException | LinkageError e) {
                return "Terminal";
            }
        }

        @Override
        public Long processPid() {
            try {
                com.jediterm.terminal.TtyConnector tty = widget.getTtyConnector();
                if (tty instanceof com.jediterm.terminal.ProcessTtyConnector) {
                    return ((com.jediterm.terminal.ProcessTtyConnector) tty).getProcess().pid();
                }
            } catch (RuntimeException | LinkageError e) {
                LOG.debug("Koru: a classic terminal's process: " + e);
            }
            return null;
        }

        @Override
        public void ttyWrite(String data) throws IOException {
            com.jediterm.terminal.TtyConnector tty;
            try {
                tty = widget.getTtyConnector();
            } catch (RuntimeException | LinkageError e) {
                throw new IOException("the terminal's tty connector is not reachable: " + e, e);
            }
            if (tty == null) throw new IOException("the terminal has no shell connected yet");
            tty.write(data);
        }

        @Override
        public String screenLines() {
            try {
                com.intellij.terminal.JBTerminalWidget jediTerm = com.intellij.terminal.JBTerminalWidget.asJediTermWidget(widget);
                return jediTerm == null ? null : jediTerm.getTerminalTextBuffer().getScreenLines();
            } catch (RuntimeException | LinkageError e) {
                LOG.debug("Koru: a classic terminal's screen: " + e);
                return null;
            }
        }
    }

    /** A reworked terminal tab's view over the real classes; its models are read on the EDT. */
    private static final class Reworked implements TerminalPorts.Reworked {
        private final com.intellij.terminal.frontend.view.TerminalView view;

        Reworked(com.intellij.terminal.frontend.view.TerminalView view) {
            this.view = view;
        }

        @Override
        public String title() {
            try {
                return view.getTitle().buildTitle();
            } catch (RuntimeException | LinkageError e) {
                return "Terminal";
            }
        }

        @Override
        public Map<String, String> startupEnvironment() {
            try {
                kotlinx.coroutines.Deferred<org.jetbrains.plugins.terminal.session.TerminalStartupOptions> options = view.getStartupOptionsDeferred();
                return options.isCompleted() ? options.getCompleted().getEnvVariables() : null;
            } catch (RuntimeException | LinkageError e) {
                LOG.debug("Koru: a reworked terminal's startup options: " + e);
                return null;
            }
        }

        @Override
        public void sendText(String text) {
            view.createSendTextBuilder().send(text);
        }

        @Override
        public String screenText() {
            try {
                return Edt.call(() -> {
                    org.jetbrains.plugins.terminal.view.TerminalOutputModel model = view.getOutputModels().getActive().getValue();
                    return model.getText(model.getScreenTopOffset(), model.getEndOffset()).toString();
                }, 5_000);
            } catch (Exception | LinkageError e) {
                LOG.debug("Koru: a reworked terminal's screen: " + e);
                return null;
            }
        }
    }
}
