// Says `window_closing` and `bye` to the daemon when a project closes (application listener on ProjectManagerListener's topic).
package dev.koru.jetbrains.ide;

import com.intellij.openapi.project.Project;
import com.intellij.openapi.project.ProjectManagerListener;

public final class KoruProjectListener implements ProjectManagerListener {
    @Override
    public void projectClosing(Project project) {
        KoruProjectSession.close(project, "project closed");
    }
}
