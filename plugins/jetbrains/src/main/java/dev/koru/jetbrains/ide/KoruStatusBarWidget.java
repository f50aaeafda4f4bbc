// The status bar widget: "Koru: connected / no daemon / refused / drive …" with the details in its tooltip; a click reconnects at once.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.project.Project;
import com.intellij.openapi.wm.StatusBar;
import com.intellij.openapi.wm.StatusBarWidget;
import com.intellij.util.Consumer;
import dev.koru.jetbrains.client.DaemonClient;

import java.awt.Component;
import java.awt.event.MouseEvent;

public final class KoruStatusBarWidget implements StatusBarWidget, StatusBarWidget.TextPresentation {
    static final String ID = "dev.koru.jetbrains.status";

    private final Project project;
    private StatusBar statusBar;
    private final java.util.function.Consumer<DaemonClient.State> listener = state -> Edt.later(this::refresh);

    KoruStatusBarWidget(Project project) {
        this.project = project;
    }

    @Override
    public String ID() {
        return ID;
    }

    @Override
    public WidgetPresentation getPresentation() {
        return this;
    }

    @Override
    public void install(StatusBar statusBar) {
        this.statusBar = statusBar;
        KoruProjectSession session = KoruProjectSession.open(project);
        session.addListener(listener);
    }

    @Override
    public void dispose() {
        KoruProjectSession session = KoruProjectSession.of(project);
        if (session != null) session.removeListener(listener);
        statusBar = null;
    }

    private void refresh() {
        if (statusBar != null) statusBar.updateWidget(ID);
    }

    @Override
    public String getText() {
        KoruProjectSession session = KoruProjectSession.of(project);
        if (session == null) return "Koru: off";
        if (session.activeDrive() != null) return "Koru: drive " + session.activeDrive();
        return "Koru: " + text(session.state());
    }

    static String text(DaemonClient.State state) {
        switch (state.kind) {
            case "connected": return "connected";
            case "connecting": return "connecting…";
            case "no_daemon": return "no daemon";
            case "refused": return "refused";
            default: return state.kind;
        }
    }

    @Override
    public float getAlignment() {
        return Component.CENTER_ALIGNMENT;
    }

    @Override
    public String getTooltipText() {
        KoruProjectSession session = KoruProjectSession.of(project);
        if (session == null) return "Koru is not running for this project";
        return "Koru: " + session.state() + " — socket " + session.socket() + " — " + session.drivesRun()
                + " drives run. Click to reconnect now.";
    }

    @Override
    public Consumer<MouseEvent> getClickConsumer() {
        return event -> {
            KoruProjectSession session = KoruProjectSession.of(project);
            if (session != null) session.reconnect();
        };
    }
}
