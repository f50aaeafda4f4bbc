/** One request as a controller on a short-lived connection — how `Koru: Send Selection to Chat` asks the daemon to drive this window, so the drive is planned, recorded and listed in `koru drives` like any other. */

import * as net from "node:net";

import { decodeLine, encodeLine, isDecodeError, LineSplitter, PROTOCOL_VERSION } from "./protocol/codec";
import type { DriveInfo, Envelope, Target } from "./protocol/types.generated";

/** The daemon refused or could not be reached; `code` is the protocol's error code or a socket error. */
export class DaemonRequestError extends Error {
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Connects to `socketPath` as a controller, sends `drive.create` for `prompt` to `target`,
 * and resolves with the queued drive (it runs on in the daemon after this returns).
 */
export function createDrive(
  socketPath: string,
  target: Target,
  prompt: string,
  clientVersion: string,
  timeoutMs = 5000,
): Promise<DriveInfo> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path: socketPath });
    const splitter = new LineSplitter();
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      outcome();
    };
    const timer = setTimeout(
      () => finish(() => reject(new DaemonRequestError("timeout", `the daemon did not answer within ${timeoutMs} ms`))),
      timeoutMs,
    );
    socket.on("connect", () => {
      socket.write(
        encodeLine({
          v: PROTOCOL_VERSION,
          type: "hello",
          role: "controller",
          protocol: { min: PROTOCOL_VERSION, max: PROTOCOL_VERSION },
          client: { name: "koru-vscode", version: clientVersion },
        } as Envelope),
      );
    });
    socket.on("data", (chunk: Buffer) => {
      for (const line of splitter.push(chunk)) {
        const message = decodeLine(line);
        if (isDecodeError(message)) continue;
        if (message.type === "welcome") {
          socket.write(encodeLine({ v: PROTOCOL_VERSION, id: 1, type: "drive.create", target, prompt } as Envelope));
        } else if (message.type === "drive.result") {
          finish(() => resolve(message.drive));
        } else if (message.type === "error") {
          finish(() => reject(new DaemonRequestError(message.code, message.message)));
        }
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) =>
      finish(() =>
        reject(
          new DaemonRequestError(
            "daemon_down",
            `no daemon at ${socketPath} (${error.code ?? error.message}); start one with \`koru daemon\``,
          ),
        ),
      ),
    );
    socket.on("close", () =>
      finish(() => reject(new DaemonRequestError("daemon_down", "the daemon closed the connection"))),
    );
  });
}
