// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.options;

import javax.swing.JComponent;

/** Stub of com.intellij.openapi.options.UnnamedConfigurable (an interface). */
public interface UnnamedConfigurable {
    JComponent createComponent();

    boolean isModified();

    void apply() throws ConfigurationException;

    void reset();

    void disposeUIResources();
}
