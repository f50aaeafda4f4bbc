// The command catalog of the built-in registry's JetBrains entries: generated from registry/default.yaml by scripts/generate-catalog.py — do not edit; run `python3 plugins/jetbrains/scripts/generate-catalog.py`.
package dev.koru.jetbrains.client;

import java.util.List;

/** Step commands, action ids and tool window ids the registry's JetBrains routes use. */
public final class Catalog {
    private Catalog() {}

    /** One registry entry and what its steps run and its requirements name. */
    public static final class Entry {
        public final String id;
        public final List<String> commands;
        public final List<String> toolWindows;

        Entry(String id, List<String> commands, List<String> toolWindows) {
            this.id = id;
            this.commands = commands;
            this.toolWindows = toolWindows;
        }
    }

    /** Each JetBrains catalog entry of registry/default.yaml. */
    public static final List<Entry> ENTRIES = List.of(
            new Entry("jetbrains_plugin_drive", List.of("koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"), List.of("AIAssistant")),
            new Entry("jetbrains_copilot_plugin_drive", List.of("copilot.chat.show", "koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"), List.of("GitHub Copilot Chat")),
            new Entry("jetbrains_claude_code_plugin_drive", List.of("koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"), List.of("Claude Code")),
            new Entry("jetbrains_junie_plugin_drive", List.of("koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"), List.of("Junie"))
    );

    /** Every step command above, once: the plugin's default allow-list. */
    public static final List<String> COMMANDS = List.of("copilot.chat.show", "koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit");

    /** The commands that are IDE action ids (not Koru's built-in steps): reported as `command:<id>` when the IDE has them. */
    public static final List<String> ACTION_IDS = List.of("copilot.chat.show");

    /** Tool window ids: reported as `tool_window:<id>` when registered in the project. */
    public static final List<String> TOOL_WINDOWS = List.of("AIAssistant", "Claude Code", "GitHub Copilot Chat", "Junie");
}
