// Starts the project's Koru session once the project has opened (extension point postStartupActivity); works in dumb mode.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.project.DumbAware;
import com.intellij.openapi.project.Project;
import com.intellij.openapi.startup.StartupActivity;

public final class KoruStartupActivity implements StartupActivity, DumbAware {
    @Override
    public void runActivity(Project project) {
        // Returns at once: the client connects on its own thread.
        KoruProjectSession.open(project);
    }
}
