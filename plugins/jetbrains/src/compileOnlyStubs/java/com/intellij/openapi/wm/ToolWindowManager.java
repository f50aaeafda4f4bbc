// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import com.intellij.openapi.project.Project;

/** Stub of com.intellij.openapi.wm.ToolWindowManager (an abstract class in every IDE since 2004). */
public abstract class ToolWindowManager {
    public static ToolWindowManager getInstance(Project project) {
        throw new UnsupportedOperationException("compile-only stub");
    }

    public abstract ToolWindow getToolWindow(String id);
}
