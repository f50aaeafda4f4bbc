/** Which IDE product this extension runs in, from `vscode.env.appName`, `uriScheme` and `appHost` (mirrors the protocol's IdeProduct names). */

/** What VS Code tells an extension about the host application. */
export interface HostFacts {
  appName: string;
  uriScheme: string;
  appHost: string;
}

/** Protocol product names for the VS Code family. */
export type VsCodeFamilyProduct =
  | "vscode"
  | "vscode-insiders"
  | "vscodium"
  | "cursor"
  | "windsurf"
  | "antigravity"
  | "code-server"
  | "other";

/**
 * Detects the product. Forks keep VS Code's API but change the app name and URI scheme;
 * code-server reports `appHost` "server-distro" and the app name "code-server".
 */
export function detectProduct(host: HostFacts): VsCodeFamilyProduct {
  const name = host.appName.toLowerCase();
  const scheme = host.uriScheme.toLowerCase();
  if (name.includes("code-server") || (host.appHost === "server-distro" && scheme === "code-oss")) {
    return "code-server";
  }
  if (name.includes("cursor") || scheme === "cursor") return "cursor";
  if (name.includes("windsurf") || scheme === "windsurf") return "windsurf";
  if (name.includes("antigravity") || scheme === "antigravity") return "antigravity";
  if (name.includes("vscodium") || scheme === "vscodium") return "vscodium";
  if (name.includes("insiders") || scheme === "vscode-insiders") return "vscode-insiders";
  if (name.includes("visual studio code") || scheme === "vscode") return "vscode";
  return "other";
}
