/** Builds the `hello` this extension sends: product (detected and raw), versions, the window's folders, pids and focus, and the capabilities — which catalog commands this IDE has. */

import { PROTOCOL_VERSION } from "./protocol/codec";
import type { Capability, Envelope, Hello } from "./protocol/types.generated";
import { detectProduct, HostFacts } from "./product";

/** What the extension knows about its window when it connects. */
export interface WindowFacts extends HostFacts {
  ideVersion: string;
  extensionVersion: string;
  workspaceFolders: string[];
  pid: number;
  parentPid: number;
  focused: boolean;
  /** Every command this IDE has (`vscode.commands.getCommands(true)`). */
  availableCommands: ReadonlySet<string>;
  /** The commands worth reporting: the catalog's plus the user's allowed ones. */
  interestingCommands: readonly string[];
}

/** The client name the daemon shows in `koru sessions`. */
export const CLIENT_NAME = "koru-vscode";

/** Capabilities: the generic kinds this extension implements, then each interesting command the IDE has. */
export function capabilitiesFor(facts: Pick<WindowFacts, "availableCommands" | "interestingCommands">): Capability[] {
  const capabilities: Capability[] = [
    { kind: "drive_steps" },
    { kind: "native_send" },
    { kind: "plugin_drive" },
    { kind: "clipboard" },
  ];
  const seen = new Set<string>();
  for (const id of facts.interestingCommands) {
    if (facts.availableCommands.has(id) && !seen.has(id)) {
      seen.add(id);
      capabilities.push({ kind: "command", id });
    }
  }
  return capabilities;
}

export function buildHello(facts: WindowFacts): Envelope {
  const hello: Hello = {
    role: "plugin",
    protocol: { min: PROTOCOL_VERSION, max: PROTOCOL_VERSION },
    client: { name: CLIENT_NAME, version: facts.extensionVersion },
    ide: {
      product: detectProduct(facts),
      version: facts.ideVersion,
      app_name: facts.appName,
      uri_scheme: facts.uriScheme,
      app_host: facts.appHost,
    },
    window: {
      pid: facts.pid,
      parent_pid: facts.parentPid,
      focused: facts.focused,
      workspace_folders: facts.workspaceFolders,
    },
    capabilities: capabilitiesFor(facts),
  };
  return { v: PROTOCOL_VERSION, type: "hello", ...hello } as Envelope;
}
