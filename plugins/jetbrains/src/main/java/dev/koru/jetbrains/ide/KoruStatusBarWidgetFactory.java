// Registers the Koru status bar widget (extension point statusBarWidgetFactory).
package dev.koru.jetbrains.ide;

import com.intellij.openapi.project.Project;
import com.intellij.openapi.wm.StatusBar;
import com.intellij.openapi.wm.StatusBarWidget;
import com.intellij.openapi.wm.StatusBarWidgetFactory;

public final class KoruStatusBarWidgetFactory implements StatusBarWidgetFactory {
    @Override
    public String getId() {
        return KoruStatusBarWidget.ID;
    }

    @Override
    public String getDisplayName() {
        return "Koru";
    }

    @Override
    public boolean isAvailable(Project project) {
        return true;
    }

    @Override
    public StatusBarWidget createWidget(Project project) {
        return new KoruStatusBarWidget(project);
    }

    @Override
    public void disposeWidget(StatusBarWidget widget) {
        widget.dispose();
    }

    @Override
    public boolean canBeEnabledOn(StatusBar statusBar) {
        return true;
    }
}
