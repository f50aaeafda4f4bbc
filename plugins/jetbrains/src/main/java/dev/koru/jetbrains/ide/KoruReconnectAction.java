// The "Koru: Reconnect to Daemon" action (Tools menu): drops this window's connection and connects again at once.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.actionSystem.AnAction;
import com.intellij.openapi.actionSystem.AnActionEvent;
import com.intellij.openapi.project.DumbAware;

public final class KoruReconnectAction extends AnAction implements DumbAware {
    @Override
    public void actionPerformed(AnActionEvent event) {
        KoruProjectSession session = KoruProjectSession.of(event.getProject());
        if (session != null) session.reconnect();
        else if (event.getProject() != null) KoruProjectSession.open(event.getProject());
    }
}
