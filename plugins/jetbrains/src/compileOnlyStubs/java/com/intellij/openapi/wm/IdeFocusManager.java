// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import com.intellij.openapi.project.Project;
import com.intellij.openapi.util.ActionCallback;

import java.awt.Component;

/** Stub of com.intellij.openapi.wm.IdeFocusManager (an abstract class). */
public abstract class IdeFocusManager {
    public static IdeFocusManager getInstance(Project project) {
        throw new UnsupportedOperationException("compile-only stub");
    }

    public abstract ActionCallback requestFocus(Component c, boolean forced);
}
