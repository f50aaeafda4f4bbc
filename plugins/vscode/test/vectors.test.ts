/** Replays the golden conversations protocol/vectors/*.ndjson (the same files the Rust system tests replay against the daemon) through this client's codec: what a client sends encodes and decodes back unchanged, bad lines get the daemon's error codes, and every type the daemon sends is known. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import {
  decodeLine,
  encodeLine,
  isDecodeError,
  KNOWN_MESSAGE_TYPES,
  LineSplitter,
  LineTooLong,
} from "../src/protocol/codec";
import type { Envelope } from "../src/protocol/types.generated";

const root = join(__dirname, "..", "..", "..");
const vectorsDir = join(root, "protocol", "vectors");

interface Step {
  comment?: string;
  /** First line only: the arguments the Rust replayer starts the daemon with. */
  daemon_args?: string[];
  conn?: string;
  send?: unknown;
  send_raw?: string;
  send_hex?: string;
  send_repeat?: { prefix: string; text: string; times: number; suffix: string };
  expect?: Record<string, unknown>;
  expect_close?: boolean;
  close?: boolean;
}

function substitute(value: unknown): unknown {
  if (typeof value === "string") return value === "$WORKSPACE" ? "/home/user/repo" : value;
  if (Array.isArray(value)) return value.map(substitute);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
  }
  return value;
}

function files(): string[] {
  return readdirSync(vectorsDir)
    .filter((name) => name.endsWith(".ndjson"))
    .sort();
}

function steps(name: string): Step[] {
  return readFileSync(join(vectorsDir, name), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Step);
}

/** The next `expect` on the same connection after step `index`. */
function nextExpect(all: Step[], index: number): Record<string, unknown> | undefined {
  const conn = all[index].conn;
  return all.slice(index + 1).find((s) => s.conn === conn && s.expect !== undefined)?.expect;
}

/** Error codes a client's codec can tell on its own (envelope level, before any daemon logic). */
function envelopeLevel(expected: Record<string, unknown> | undefined): string | undefined {
  if (!expected || expected.type !== "error") return undefined;
  const code = expected.code as string;
  const field = (expected.location as { field?: string } | undefined)?.field;
  if (code === "malformed" || code === "unknown_type") return code;
  if (code === "invalid_message" && (field === "v" || field === "id" || field === "type")) return code;
  return undefined;
}

test("there are golden vectors to replay", () => {
  assert.ok(files().length >= 5, `found ${files().join(", ")}`);
});

for (const name of files()) {
  test(`vector ${name}`, () => {
    const all = steps(name);
    all.forEach((step, index) => {
      const where = `${name}:${index + 1}`;
      if (step.send !== undefined) {
        const sent = substitute(step.send) as Envelope;
        const encoded = encodeLine(sent);
        assert.equal(encoded[encoded.length - 1], 0x0a, `${where}: one line`);
        const decoded = decodeLine(encoded.subarray(0, encoded.length - 1));
        const expectedError = envelopeLevel(nextExpect(all, index));
        if (expectedError) {
          assert.ok(isDecodeError(decoded), `${where}: should be refused as ${expectedError}`);
          assert.equal(decoded.code, expectedError, where);
        } else if (!isDecodeError(decoded)) {
          assert.deepEqual(decoded, sent, `${where}: round trip`);
        }
      }
      if (step.send_raw !== undefined || step.send_hex !== undefined) {
        const bytes =
          step.send_raw !== undefined
            ? Buffer.from(step.send_raw, "utf8")
            : Buffer.from(step.send_hex as string, "hex");
        const decoded = decodeLine(bytes);
        const expected = nextExpect(all, index);
        assert.ok(isDecodeError(decoded), `${where}: a bad line must not decode`);
        assert.equal(decoded.code, expected?.code, where);
        const column = (expected?.location as { column?: unknown } | undefined)?.column;
        if (typeof column === "number" && step.send_hex !== undefined) {
          assert.equal(decoded.column, column, `${where}: UTF-8 offset`);
        }
        if (typeof expected?.message === "string" && expected.message.startsWith("the line is not valid UTF-8")) {
          assert.equal(decoded.message, expected.message, where);
        }
      }
      if (step.send_repeat) {
        const { prefix, text, times, suffix } = step.send_repeat;
        const splitter = new LineSplitter();
        const big = Buffer.from(prefix + text.repeat(times) + suffix + "\n", "utf8");
        assert.throws(() => splitter.push(big), LineTooLong, `${where}: over-long line`);
        assert.equal(nextExpect(all, index)?.code, "line_too_long", where);
      }
      if (step.expect !== undefined) {
        assert.ok(
          KNOWN_MESSAGE_TYPES.includes(step.expect.type as string),
          `${where}: the daemon sends ${String(step.expect.type)}, unknown to this client`,
        );
      }
    });
  });
}

test("the client knows exactly the message types of the schema", () => {
  const schema = JSON.parse(readFileSync(join(root, "docs", "protocol.schema.json"), "utf8"));
  const types = (schema.oneOf as Array<{ properties: { type: { const: string } } }>).map(
    (branch) => branch.properties.type.const,
  );
  assert.deepEqual([...KNOWN_MESSAGE_TYPES].sort(), types.sort());
});

test("lines split across chunks are joined and CRLF is accepted", () => {
  const splitter = new LineSplitter(64);
  assert.deepEqual(splitter.push(Buffer.from('{"v":1,')), []);
  const lines = splitter.push(Buffer.from('"type":"ping"}\r\n{"v":1'));
  assert.deepEqual(lines.map((l) => l.toString()), ['{"v":1,"type":"ping"}']);
  assert.throws(() => new LineSplitter(8).push(Buffer.from("0123456789ABCDEF")), LineTooLong);
});
