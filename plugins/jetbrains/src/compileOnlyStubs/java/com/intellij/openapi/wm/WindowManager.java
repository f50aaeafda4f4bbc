// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import com.intellij.openapi.project.Project;

import javax.swing.JFrame;

/** Stub of com.intellij.openapi.wm.WindowManager (an abstract class). */
public abstract class WindowManager {
    public static WindowManager getInstance() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    public abstract JFrame getFrame(Project project);
}
