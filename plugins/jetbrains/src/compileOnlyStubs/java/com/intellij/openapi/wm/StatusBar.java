// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

/** Stub of com.intellij.openapi.wm.StatusBar (an interface). */
public interface StatusBar {
    void updateWidget(String id);
}
