// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import com.intellij.openapi.project.Project;

/** Stub of com.intellij.openapi.wm.StatusBarWidgetFactory (an interface; extension point statusBarWidgetFactory). */
public interface StatusBarWidgetFactory {
    String getId();

    String getDisplayName();

    boolean isAvailable(Project project);

    StatusBarWidget createWidget(Project project);

    void disposeWidget(StatusBarWidget widget);

    boolean canBeEnabledOn(StatusBar statusBar);
}
