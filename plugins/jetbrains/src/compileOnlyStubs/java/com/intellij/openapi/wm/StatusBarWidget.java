// COMPILE-ONLY STUB (never shipped): a signature-only copy of the documented IntelliJ Platform API that the build-183 Debian jars lack; the IDE provides the real class at run time.
package com.intellij.openapi.wm;

import com.intellij.openapi.Disposable;
import com.intellij.util.Consumer;

import java.awt.event.MouseEvent;

/** Stub of com.intellij.openapi.wm.StatusBarWidget (an interface) and its presentations. */
public interface StatusBarWidget extends Disposable {
    String ID();

    WidgetPresentation getPresentation();

    void install(StatusBar statusBar);

    /** Stub of StatusBarWidget.WidgetPresentation. */
    interface WidgetPresentation {
        String getTooltipText();

        Consumer<MouseEvent> getClickConsumer();
    }

    /** Stub of StatusBarWidget.TextPresentation. */
    interface TextPresentation extends WidgetPresentation {
        String getText();

        float getAlignment();
    }
}
