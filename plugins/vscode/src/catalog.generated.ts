/** The IDE commands of the built-in registry's VS Code-family entries: generated from registry/default.yaml by scripts/generate-catalog.mjs — do not edit; run `npm run generate-catalog`. */

/** Each catalog entry, and the commands its steps run or it requires. */
export const CATALOG_ENTRIES: readonly { id: string; commands: readonly string[] }[] = [
  {
    "id": "vscode_native_chat_open",
    "commands": [
      "workbench.action.chat.open"
    ]
  },
  {
    "id": "vscode_plugin_drive",
    "commands": [
      "workbench.action.chat.focusInput",
      "editor.action.clipboardPasteAction",
      "workbench.action.chat.submit"
    ]
  },
  {
    "id": "antigravity_native_send",
    "commands": [
      "antigravity.sendPromptToAgentPanel"
    ]
  },
  {
    "id": "cursor_native_new_chat",
    "commands": [
      "composer.createNew"
    ]
  },
  {
    "id": "cursor_plugin_drive",
    "commands": [
      "composer.focusComposer",
      "editor.action.clipboardPasteAction"
    ]
  },
  {
    "id": "windsurf_plugin_drive",
    "commands": [
      "windsurf.prioritized.chat.openNewConversation",
      "editor.action.clipboardPasteAction"
    ]
  },
  {
    "id": "claude_code_panel_drive",
    "commands": [
      "claude-vscode.primaryEditor.open",
      "koru.expectActiveTab"
    ]
  }
];

/** Every command above, once: the extension's default allow-list and the commands it reports as capabilities. */
export const CATALOG_COMMANDS: readonly string[] = [
  "antigravity.sendPromptToAgentPanel",
  "claude-vscode.primaryEditor.open",
  "composer.createNew",
  "composer.focusComposer",
  "editor.action.clipboardPasteAction",
  "koru.expectActiveTab",
  "windsurf.prioritized.chat.openNewConversation",
  "workbench.action.chat.focusInput",
  "workbench.action.chat.open",
  "workbench.action.chat.submit"
];
