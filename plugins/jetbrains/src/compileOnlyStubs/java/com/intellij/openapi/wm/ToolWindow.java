// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import javax.swing.JComponent;

/** Stub of com.intellij.openapi.wm.ToolWindow (an interface). */
public interface ToolWindow {
    void activate(Runnable runnable, boolean autoFocusContents);

    boolean isActive();

    boolean isAvailable();

    JComponent getComponent();
}
