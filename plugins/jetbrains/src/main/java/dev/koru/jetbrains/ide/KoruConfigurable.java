// The settings page (Settings → Tools → Koru, extension point applicationConfigurable): the socket path and the extra commands drives may run, plus where each window stands.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.options.Configurable;
import dev.koru.jetbrains.client.Catalog;

import javax.swing.BorderFactory;
import javax.swing.Box;
import javax.swing.BoxLayout;
import javax.swing.JComponent;
import javax.swing.JLabel;
import javax.swing.JPanel;
import javax.swing.JScrollPane;
import javax.swing.JTextArea;
import javax.swing.JTextField;
import java.awt.BorderLayout;
import java.awt.Component;

/** Swing only, created and used on the EDT by the IDE. */
public final class KoruConfigurable implements Configurable {
    private JTextField socketPath;
    private JTextArea allowed;
    private JLabel status;

    @Override
    public String getDisplayName() {
        return "Koru";
    }

    @Override
    public JComponent createComponent() {
        JPanel panel = new JPanel();
        panel.setLayout(new BoxLayout(panel, BoxLayout.Y_AXIS));
        socketPath = new JTextField(40);
        allowed = new JTextArea(6, 40);
        status = new JLabel();
        panel.add(left(new JLabel("Daemon socket (blank: $KORU_SOCKET, else $XDG_RUNTIME_DIR/koru/koru.sock, else /tmp/koru-$UID/koru.sock):")));
        panel.add(left(socketPath));
        panel.add(Box.createVerticalStrut(8));
        panel.add(left(new JLabel("Extra action ids drives may run (one per line), besides the registry's: " + String.join(", ", Catalog.COMMANDS))));
        JScrollPane scroll = new JScrollPane(allowed);
        panel.add(left(scroll));
        panel.add(Box.createVerticalStrut(8));
        panel.add(left(status));
        JPanel outer = new JPanel(new BorderLayout());
        outer.setBorder(BorderFactory.createEmptyBorder(4, 4, 4, 4));
        outer.add(panel, BorderLayout.NORTH);
        reset();
        return outer;
    }

    private static JComponent left(JComponent component) {
        component.setAlignmentX(Component.LEFT_ALIGNMENT);
        return component;
    }

    @Override
    public boolean isModified() {
        return socketPath != null && (!socketPath.getText().trim().equals(KoruSettings.socketPath())
                || !KoruSettings.parseList(allowed.getText()).equals(KoruSettings.extraAllowedCommands()));
    }

    @Override
    public void apply() {
        boolean socketChanged = !socketPath.getText().trim().equals(KoruSettings.socketPath());
        KoruSettings.setSocketPath(socketPath.getText());
        KoruSettings.setExtraAllowedCommands(allowed.getText());
        // A new socket or new capabilities: every window says hello again (non-blocking).
        for (KoruProjectSession session : KoruProjectSession.all()) session.reconnect();
        if (socketChanged) status.setText("Reconnecting to " + KoruSettings.socketPath() + "…");
    }

    @Override
    public void reset() {
        if (socketPath == null) return;
        socketPath.setText(KoruSettings.socketPath());
        allowed.setText(String.join("\n", KoruSettings.extraAllowedCommands()));
        StringBuilder text = new StringBuilder("<html>");
        if (KoruProjectSession.all().isEmpty()) text.append("No project window is connected.");
        for (KoruProjectSession session : KoruProjectSession.all()) {
            text.append(session.state()).append("<br>");
        }
        status.setText(text.append("</html>").toString());
    }

    @Override
    public void disposeUIResources() {
        socketPath = null;
        allowed = null;
        status = null;
    }
}
