/** Mirrors protocol/src/envelope.rs and daemon/src/codec.rs: NDJSON framing with a maximum line length, and the envelope-level decode rules (UTF-8, JSON object, id, type, v) with the daemon's error codes. */

import { MESSAGE_TYPES } from "./types.generated";
import type { Envelope } from "./types.generated";

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

/** Default maximum line length in bytes, newline excluded (1 MiB), as the daemon's. */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;

/** Every message type of protocol v1 (generated from docs/protocol.schema.json). */
export const KNOWN_MESSAGE_TYPES: readonly string[] = MESSAGE_TYPES;

/** Why a line could not be decoded, in the daemon's error vocabulary. */
export interface DecodeError {
  code: "malformed" | "unknown_type" | "invalid_message";
  message: string;
  /** 1-based column (JSON) or byte offset (UTF-8), when known. */
  column?: number;
  field?: string;
}

/** A line longer than the limit arrived (the connection must be closed). */
export class LineTooLong extends Error {
  constructor(public readonly limit: number) {
    super(`line longer than ${limit} bytes`);
  }
}

/** Splits a byte stream into lines; reports an over-long line before its newline arrives. */
export class LineSplitter {
  private buffer: Buffer = Buffer.alloc(0);

  constructor(private readonly maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {}

  /** Adds bytes and returns the complete lines (newline and a trailing `\r` removed). */
  push(chunk: Buffer): Buffer[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const lines: Buffer[] = [];
    for (;;) {
      const newline = this.buffer.indexOf(0x0a);
      if (newline < 0) {
        if (this.buffer.length > this.maxLineBytes + 1) {
          throw new LineTooLong(this.maxLineBytes);
        }
        return lines;
      }
      let line = this.buffer.subarray(0, newline);
      this.buffer = this.buffer.subarray(newline + 1);
      if (line.length > 0 && line[line.length - 1] === 0x0d) {
        line = line.subarray(0, line.length - 1);
      }
      if (line.length > this.maxLineBytes) {
        throw new LineTooLong(this.maxLineBytes);
      }
      lines.push(line);
    }
  }
}

/** One envelope as one line, newline included. */
export function encodeLine(envelope: Envelope): Buffer {
  return Buffer.from(JSON.stringify(envelope) + "\n", "utf8");
}

/** Decodes one line (without its newline), checking what the daemon checks first. */
export function decodeLine(line: Buffer): Envelope | DecodeError {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(line);
  } catch {
    const offset = firstInvalidUtf8(line);
    return {
      code: "malformed",
      message: `the line is not valid UTF-8 (first bad byte at offset ${offset})`,
      column: offset + 1,
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { code: "malformed", message: `the line is not valid JSON: ${(error as Error).message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return {
      code: "malformed",
      message: "the line is JSON but not an object; every line must be one JSON object",
    };
  }
  const object = value as Record<string, unknown>;
  const id = object.id;
  if (id !== undefined && id !== null && !(typeof id === "string" || Number.isInteger(id))) {
    return { code: "invalid_message", message: "`id` must be an integer or a string", field: "id" };
  }
  if (typeof object.type !== "string") {
    return {
      code: "invalid_message",
      message: object.type === undefined ? "missing field `type`" : "`type` must be a string",
      field: "type",
    };
  }
  if (!KNOWN_MESSAGE_TYPES.includes(object.type)) {
    return { code: "unknown_type", message: `unknown message type ${JSON.stringify(object.type)}` };
  }
  const v = object.v;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
    return {
      code: "invalid_message",
      message:
        v === undefined
          ? "missing field `v` (the protocol version)"
          : "`v` must be a positive integer protocol version",
      field: "v",
    };
  }
  return object as unknown as Envelope;
}

/** True when `decodeLine` failed. */
export function isDecodeError(decoded: Envelope | DecodeError): decoded is DecodeError {
  return typeof (decoded as DecodeError).code === "string" && !("v" in decoded);
}

/** The offset of the first byte that is not part of valid UTF-8 (Rust's `valid_up_to`). */
function firstInvalidUtf8(bytes: Buffer): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i];
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    let continuation: number;
    if (lead >= 0xc2 && lead <= 0xdf) continuation = 1;
    else if (lead >= 0xe0 && lead <= 0xef) continuation = 2;
    else if (lead >= 0xf0 && lead <= 0xf4) continuation = 3;
    else return i;
    // The second byte's range excludes overlong forms and surrogates.
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
    if (i + 1 >= bytes.length || bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (let k = 2; k <= continuation; k++) {
      if (i + k >= bytes.length || (bytes[i + k] & 0xc0) !== 0x80) return i;
    }
    i += continuation + 1;
  }
  return bytes.length;
}
