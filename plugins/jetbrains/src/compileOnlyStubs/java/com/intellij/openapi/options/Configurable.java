// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.options;

/** Stub of com.intellij.openapi.options.Configurable (an interface; extension point applicationConfigurable). */
public interface Configurable extends UnnamedConfigurable {
    String getDisplayName();
}
