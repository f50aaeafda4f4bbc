// The journal export page's checker: re-checks every embedded entry line as `koru verify` does (one canonical JSON object, its SHA-256 or HMAC-SHA256 seal, seq one more than the entry before, prev_hash linking to it) with its own SHA-256 and HMAC (no crypto.subtle, no network), then shows the verdict and the entries; the DOM is built with textContent only.
'use strict';

(function journalExportPage() {
  const GENESIS = 'sha256:0000000000000000000000000000000000000000000000000000000000000000';
  const U64_MAX = BigInt('18446744073709551615');
  const I64_MIN = BigInt('-9223372036854775808');

  // ---- UTF-8 and hex ----

  /** The UTF-8 bytes of a string (lone surrogates as U+FFFD, as TextEncoder does). */
  function utf8(text) {
    const out = [];
    for (let i = 0; i < text.length; i++) {
      let code = text.charCodeAt(i);
      if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
        const low = text.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          i++;
        }
      }
      if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
      if (code < 0x80) out.push(code);
      else if (code < 0x800) out.push(0xc0 | (code >> 6), 0x80 | (code & 63));
      else if (code < 0x10000) out.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
      else out.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 63), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
    }
    return Uint8Array.from(out);
  }

  function hex(bytes) {
    let out = '';
    for (const byte of bytes) out += (byte < 16 ? '0' : '') + byte.toString(16);
    return out;
  }

  // ---- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) ----

  const ROUND = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const INITIAL = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

  const rotr = (x, n) => (x >>> n) | (x << (32 - n));

  /** SHA-256 of `bytes` (a Uint8Array): 32 bytes. */
  function sha256(bytes) {
    const length = bytes.length;
    const padded = new Uint8Array(Math.ceil((length + 9) / 64) * 64);
    padded.set(bytes);
    padded[length] = 0x80;
    const view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
    view.setUint32(padded.length - 4, (length * 8) >>> 0);
    const state = Uint32Array.from(INITIAL);
    const w = new Uint32Array(64);
    for (let block = 0; block < padded.length; block += 64) {
      for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4);
      for (let i = 16; i < 64; i++) {
        const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let [a, b, c, d, e, f, g, h] = state;
      for (let i = 0; i < 64; i++) {
        const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        const choice = (e & f) ^ (~e & g);
        const t1 = (h + s1 + choice + ROUND[i] + w[i]) | 0;
        const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        const majority = (a & b) ^ (a & c) ^ (b & c);
        const t2 = (s0 + majority) | 0;
        h = g;
        g = f;
        f = e;
        e = (d + t1) | 0;
        d = c;
        c = b;
        b = a;
        a = (t1 + t2) | 0;
      }
      state[0] += a;
      state[1] += b;
      state[2] += c;
      state[3] += d;
      state[4] += e;
      state[5] += f;
      state[6] += g;
      state[7] += h;
    }
    const out = new Uint8Array(32);
    const outView = new DataView(out.buffer);
    state.forEach((word, i) => outView.setUint32(i * 4, word));
    return out;
  }

  /** HMAC-SHA256 of `message` with `key` (both Uint8Array): 32 bytes. */
  function hmacSha256(key, message) {
    const block = new Uint8Array(64);
    block.set(key.length > 64 ? sha256(key) : key);
    const inner = new Uint8Array(64 + message.length);
    const outer = new Uint8Array(64 + 32);
    for (let i = 0; i < 64; i++) {
      inner[i] = block[i] ^ 0x36;
      outer[i] = block[i] ^ 0x5c;
    }
    inner.set(message, 64);
    outer.set(sha256(inner), 64);
    return sha256(outer);
  }

  // ---- JSON as serde_json reads and writes it ----

  /** A JSON number kept as its text, so that re-writing it is exact. */
  class JsonNumber {
    constructor(text) {
      this.text = text;
    }
    /** The value as an unsigned 64-bit integer (BigInt), or null when it is not one (serde_json's as_u64). */
    asU64() {
      if (!/^(0|[1-9][0-9]*)$/.test(this.text)) return null;
      const value = BigInt(this.text);
      return value <= U64_MAX ? value : null;
    }
  }

  /**
   * Parses one JSON text strictly: objects become Maps (a repeated key keeps the last value,
   * as serde_json does), numbers JsonNumbers, the rest plain values. Throws on anything
   * serde_json would refuse (trailing text, lone surrogates, control characters in strings).
   */
  function parseJson(text) {
    let at = 0;
    const fail = (why) => {
      throw new Error(`${why} at character ${at + 1}`);
    };
    const space = () => {
      while (at < text.length && ' \t\n\r'.includes(text[at])) at++;
    };
    const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

    function string() {
      at++; // the opening quote
      let out = '';
      for (;;) {
        const start = at;
        while (at < text.length) {
          const code = text.charCodeAt(at);
          if (code === 0x22 || code === 0x5c || code < 0x20 || (code >= 0xd800 && code <= 0xdfff)) break;
          at++;
        }
        out += text.slice(start, at);
        if (at >= text.length) fail('unterminated string');
        const code = text.charCodeAt(at);
        if (code === 0x22) {
          at++;
          return out;
        }
        if (code < 0x20) fail('control character in a string');
        if (code >= 0xd800 && code <= 0xdbff) {
          const low = text.charCodeAt(at + 1);
          if (!(low >= 0xdc00 && low <= 0xdfff)) fail('lone surrogate in a string');
          out += text.slice(at, at + 2);
          at += 2;
          continue;
        }
        if (code >= 0xdc00 && code <= 0xdfff) fail('lone surrogate in a string');
        // A backslash escape.
        const kind = text[at + 1];
        const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }[kind];
        if (simple !== undefined) {
          out += simple;
          at += 2;
          continue;
        }
        if (kind !== 'u') fail('invalid escape');
        const unit = (offset) => {
          const digits = text.slice(offset, offset + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(digits)) fail('invalid \\u escape');
          return parseInt(digits, 16);
        };
        const first = unit(at + 2);
        at += 6;
        if (first >= 0xdc00 && first <= 0xdfff) fail('lone surrogate in a string');
        if (first >= 0xd800 && first <= 0xdbff) {
          if (text[at] !== '\\' || text[at + 1] !== 'u') fail('lone surrogate in a string');
          const second = unit(at + 2);
          if (!(second >= 0xdc00 && second <= 0xdfff)) fail('lone surrogate in a string');
          at += 6;
          out += String.fromCharCode(first, second);
        } else {
          out += String.fromCharCode(first);
        }
      }
    }

    function value(depth) {
      if (depth > 128) fail('nested too deeply');
      space();
      const c = text[at];
      if (c === '{') {
        at++;
        const map = new Map();
        space();
        if (text[at] === '}') {
          at++;
          return map;
        }
        for (;;) {
          space();
          if (text[at] !== '"') fail('expected a key');
          const key = string();
          space();
          if (text[at] !== ':') fail("expected ':'");
          at++;
          map.delete(key);
          map.set(key, value(depth + 1));
          space();
          if (text[at] === ',') {
            at++;
          } else if (text[at] === '}') {
            at++;
            return map;
          } else {
            fail("expected ',' or '}'");
          }
        }
      }
      if (c === '[') {
        at++;
        const items = [];
        space();
        if (text[at] === ']') {
          at++;
          return items;
        }
        for (;;) {
          items.push(value(depth + 1));
          space();
          if (text[at] === ',') {
            at++;
          } else if (text[at] === ']') {
            at++;
            return items;
          } else {
            fail("expected ',' or ']'");
          }
        }
      }
      if (c === '"') return string();
      for (const [word, literal] of [['true', true], ['false', false], ['null', null]]) {
        if (text.startsWith(word, at)) {
          at += word.length;
          return literal;
        }
      }
      NUMBER.lastIndex = at;
      const number = NUMBER.exec(text);
      if (number) {
        at += number[0].length;
        if (!Number.isFinite(Number(number[0]))) fail('number out of range');
        return new JsonNumber(number[0]);
      }
      return fail(c === undefined ? 'unexpected end' : `unexpected ${JSON.stringify(c)}`);
    }

    const result = value(0);
    space();
    if (at !== text.length) fail('trailing characters');
    return result;
  }

  /** Orders strings by code point, which is the order of their UTF-8 bytes. */
  function byUtf8(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      let x = a.charCodeAt(i);
      let y = b.charCodeAt(i);
      if (x === y) continue;
      // Surrogates (code points above U+FFFF) sort after U+E000–U+FFFF in code point order.
      x += x >= 0xe000 ? -0x800 : x >= 0xd800 ? 0x2000 : 0;
      y += y >= 0xe000 ? -0x800 : y >= 0xd800 ? 0x2000 : 0;
      return x - y;
    }
    return a.length - b.length;
  }

  const ESCAPES = { 0x22: '\\"', 0x5c: '\\\\', 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t' };

  /** A string as serde_json writes it. */
  function quote(text) {
    let out = '"';
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code >= 0x20 && code !== 0x22 && code !== 0x5c) continue;
      out += text.slice(start, i) + (ESCAPES[code] || `\\u00${code < 16 ? '0' : ''}${code.toString(16)}`);
      start = i + 1;
    }
    return `${out}${text.slice(start)}"`;
  }

  /** A float as serde_json writes it (the shortest digits that read back: 1.0, 0.001, 1e+21, 1.5e-7). */
  function floatText(value) {
    if (value === 0) return Object.is(value, -0) ? '-0.0' : '0.0';
    const sign = value < 0 ? '-' : '';
    const [mantissa, exponent] = Math.abs(value).toExponential().split('e');
    const digits = mantissa.replace('.', '');
    const length = digits.length;
    const point = Number(exponent) + 1; // the value is 0.<digits> × 10^point
    const zeros = point - length;
    if (zeros >= 0 && point <= 16) return `${sign}${digits}${'0'.repeat(zeros)}.0`;
    if (point > 0 && point <= 16) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
    if (point > -5 && point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
    const power = point - 1 > 0 ? `e+${point - 1}` : `e${point - 1}`;
    if (length === 1) return `${sign}${digits}${power}`;
    return `${sign}${digits[0]}.${digits.slice(1)}${power}`;
  }

  /** A number as serde_json writes it back: integers that fit 64 bits as they are, the rest as floats. */
  function numberText(number) {
    const text = number.text;
    if (/^-?(0|[1-9][0-9]*)$/.test(text)) {
      const value = BigInt(text);
      if (text[0] !== '-' && value <= U64_MAX) return text;
      if (text[0] === '-' && value !== BigInt(0) && value >= I64_MIN) return text;
    }
    return floatText(Number(text));
  }

  /** The canonical form (keys in UTF-8 byte order at every depth, no whitespace) of a parsed value. */
  function canonical(value) {
    if (value === null) return 'null';
    if (value === true) return 'true';
    if (value === false) return 'false';
    if (typeof value === 'string') return quote(value);
    if (value instanceof JsonNumber) return numberText(value);
    if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
    const keys = [...value.keys()].sort(byUtf8);
    return `{${keys.map((key) => `${quote(key)}:${canonical(value.get(key))}`).join(',')}}`;
  }

  // ---- The chain ----

  const stringField = (map, key) => (map instanceof Map && typeof map.get(key) === 'string' ? map.get(key) : null);
  const u64Field = (map, key) => (map instanceof Map && map.get(key) instanceof JsonNumber ? map.get(key).asU64() : null);

  /** The fields every entry has, or an exception saying which is missing. */
  function parseEntry(line) {
    const object = parseJson(line);
    if (!(object instanceof Map)) throw new Error('not a JSON object');
    const seq = u64Field(object, 'seq');
    if (seq === null) throw new Error('no seq');
    for (const name of ['prev_hash', 'entry_hash', 'kind']) {
      if (stringField(object, name) === null) throw new Error(`no ${name}`);
    }
    return { object, seq, prevHash: stringField(object, 'prev_hash'), entryHash: stringField(object, 'entry_hash'), kind: stringField(object, 'kind') };
  }

  /** The seq of a line, if it parses. */
  function seqOf(line) {
    try {
      return u64Field(parseJson(line), 'seq');
    } catch {
      return null;
    }
  }

  /** What the table shows of an entry (a ledger's entries say which item, where in the source, and what the audit found). */
  function describe(object) {
    const by = object.get('by');
    const who = by instanceof Map ? [stringField(by, 'door'), stringField(by, 'client'), by.get('pid') instanceof JsonNumber ? `pid ${by.get('pid').text}` : null].filter(Boolean).join(' · ') : '';
    const atMs = object.get('at_ms') instanceof JsonNumber ? Number(object.get('at_ms').text) : NaN;
    const kind = stringField(object, 'kind') || '';
    const number = (map, key) => (map instanceof Map && map.get(key) instanceof JsonNumber ? map.get(key).text : null);
    const row = {
      seq: u64Field(object, 'seq'),
      time: Number.isFinite(atMs) && Math.abs(atMs) < 8.64e15 ? new Date(atMs).toISOString().replace('T', ' ').replace('Z', '') : '',
      kind,
      drive: stringField(object, 'drive_id') || '',
      state: stringField(object, 'state') || (kind === 'drive_accepted' ? 'accepted' : ''),
      who,
    };
    if (kind === 'chat_item') {
      const source = object.get('source');
      const where = source instanceof Map ? (stringField(source, 'kind') === 'line' ? `line ${number(source, 'line')}` : stringField(source, 'kind') === 'row' ? `row ${stringField(source, 'row') || '?'}` : `${stringField(source, 'pointer') || 'element'} @${number(source, 'offset')}`) : '';
      const tool = stringField(object, 'tool');
      const outcome = stringField(object, 'outcome');
      row.drive = `item ${number(object, 'index')} · turn ${number(object, 'turn')}`;
      row.state = [stringField(object, 'item') || '?', tool, outcome].filter(Boolean).join(' · ');
      row.who = where;
    } else if (kind === 'ledger_opened') {
      row.drive = stringField(object, 'chat_id') || '';
      row.state = stringField(object, 'store') || '';
      const source = object.get('source');
      row.who = source instanceof Map ? stringField(source, 'file') || '' : '';
    } else if (kind === 'audit_run') {
      const through = object.get('through');
      row.drive = `run ${number(object, 'run')}`;
      row.state = `+${number(object, 'items_added')} items, ${number(through, 'items')} in all`;
      row.who = number(through, 'line') !== null ? `through line ${number(through, 'line')}` : '';
    } else if (kind === 'source_rewritten' || kind === 'source_compacted') {
      const item = object.get('item');
      row.drive = item instanceof Map ? `item ${number(item, 'index')}` : '';
      row.state = kind === 'source_rewritten' ? 'rewritten' : 'compacted';
    }
    return row;
  }

  /**
   * Checks the export's lines with `key` (Uint8Array, or null for none) as `koru verify`
   * checks a journal, plus what the export itself claims (its anchor, head and count).
   * Returns {verdict: 'intact'|'tampered'|'needs-key', problem: {kind, seq, message, row},
   * rows, entries, head, firstSeq, lastSeq, keyed, prunedThrough, prompt}.
   */
  function checkExport(data, key) {
    const meta = data.export || {};
    const lines = data.lines;
    const rows = [];
    const chain = { entries: 0, expectedSeq: null, expectedPrev: null, keyed: null, firstSeq: null, firstPrev: null, needsKey: false, checkpoints: [], accepted: new Map(), promptRecorded: new Map(), outcomes: new Map() };
    let problem = null;

    for (let index = 0; index < lines.length; index++) {
      const row = { index, line: lines[index], status: 'unchecked' };
      rows.push(row);
      if (problem) {
        try {
          Object.assign(row, describe(parseJson(row.line)));
        } catch {}
        continue;
      }
      const found = checkLine(chain, row, lines, index, key, meta);
      if (found) {
        problem = { ...found, row: index };
        row.status = 'bad';
      }
    }
    const lastSeq = chain.expectedSeq === null ? null : chain.expectedSeq - BigInt(1);
    const at = (kind, seq, message, row) => ({ kind, seq, message, row });
    let prunedThrough = null;

    if (!problem && chain.entries === 0) problem = at('malformed', null, 'the export holds no entries', null);
    // An export of the whole journal that starts after seq 1: retention's checkpoint must vouch for the start.
    if (!problem && meta.selection && meta.selection.kind === 'all' && chain.firstSeq > BigInt(1)) {
      const through = chain.firstSeq - BigInt(1);
      const checkpoint = chain.checkpoints.find((c) => c.through === through);
      if (checkpoint && checkpoint.hash === chain.firstPrev) prunedThrough = through;
      else if (checkpoint) problem = at('spliced', chain.firstSeq, `the first entry (seq ${chain.firstSeq}) does not continue the chain its checkpoint vouches for`, 0);
      else problem = at('deleted', BigInt(1), `entries 1–${through} are missing and no checkpoint says they were pruned`, 0);
    }
    // What the export was written with: entries cut from the end show here.
    if (!problem && meta.last_seq !== undefined && BigInt(meta.last_seq) > lastSeq) {
      const missing = lastSeq + BigInt(1);
      const span = BigInt(meta.last_seq) === missing ? `entry ${missing} is` : `entries ${missing}–${meta.last_seq} are`;
      problem = at('deleted', missing, `${span} missing at the end: the export was written ending at seq ${meta.last_seq}`, null);
    }
    if (!problem && typeof meta.head === 'string' && meta.head !== chain.expectedPrev) {
      problem = at('edited', lastSeq, `the last entry's entry_hash is ${chain.expectedPrev}, but the export was written with head ${meta.head}`, rows.length - 1);
    }
    // A text shown (the drive's prompt, the reply its chat recorded) must be the one its
    // entry recorded: `recorded` is {seq, row, sha256, bytes} of that entry, or nothing.
    const checkText = (shown, what, entryKind, recorded) => {
      if (!shown || typeof shown.text !== 'string') return null;
      const text = { driveId: shown.drive_id, text: shown.text, matches: false };
      const bytes = utf8(text.text);
      text.sha256 = hex(sha256(bytes));
      text.bytes = bytes.length;
      if (!recorded || recorded.sha256 === null) {
        if (!problem) problem = at('blob_mismatch', null, `the ${what} shown is for drive ${text.driveId}, whose ${entryKind} entry is not among the checked entries`, null);
        return text;
      }
      text.recorded = recorded;
      text.matches = recorded.sha256 === text.sha256 && recorded.bytes === BigInt(text.bytes);
      if (!text.matches && !problem) {
        problem = at(
          'blob_mismatch',
          recorded.seq,
          `the ${what} text in this file (${text.bytes} bytes, sha256 ${text.sha256}) does not match the digest and length (${recorded.bytes} bytes, sha256 ${recorded.sha256}) its ${entryKind} entry records`,
          recorded.row,
        );
      }
      return text;
    };
    const prompt = checkText(meta.prompt, 'prompt', 'drive_accepted', meta.prompt && chain.accepted.get(meta.prompt.drive_id));
    const outcome = meta.reply && chain.outcomes.get(meta.reply.drive_id);
    const reply = checkText(meta.reply, 'reply', 'drive_outcome_recorded', outcome && { seq: outcome.seq, row: outcome.row, sha256: outcome.replySha256, bytes: outcome.replyBytes });
    const driveId = meta.selection && meta.selection.kind === 'drive' ? meta.selection.drive_id : null;
    const evidence = driveId === null ? null : { prompt: chain.promptRecorded.get(driveId) || null, outcome: chain.outcomes.get(driveId) || null };
    if (problem && problem.row !== null && rows[problem.row]) rows[problem.row].status = 'bad';
    return {
      verdict: problem ? 'tampered' : chain.needsKey ? 'needs-key' : 'intact',
      problem,
      rows,
      entries: chain.entries,
      head: chain.expectedPrev,
      firstSeq: chain.firstSeq,
      firstPrev: chain.firstPrev,
      lastSeq,
      keyed: chain.keyed === true,
      prunedThrough,
      prompt,
      reply,
      evidence,
    };
  }

  /** Checks one line where the chain stands; returns the problem, or nothing when it is good. */
  function checkLine(chain, row, lines, index, key, meta) {
    const expected = chain.expectedSeq;
    const line = row.line;
    const fail = (kind, seq, message) => ({ kind, seq, message });
    if (typeof line !== 'string') return fail('malformed', expected, 'not a journal entry: the embedded line is not text');
    let parsed;
    try {
      parsed = parseEntry(line);
    } catch (error) {
      return fail('malformed', expected, `not a journal entry: ${error.message}`);
    }
    Object.assign(row, describe(parsed.object));
    const seq = parsed.seq;
    // The seal.
    const keyed = parsed.entryHash.startsWith('hmac-sha256:');
    if (!keyed && !parsed.entryHash.startsWith('sha256:')) return fail('malformed', seq, `entry_hash ${JSON.stringify(parsed.entryHash)} names no known algorithm`);
    if (chain.keyed === null) chain.keyed = keyed;
    else if (chain.keyed !== keyed) return fail('spliced', seq, 'this entry is sealed differently (keyed / not keyed) from the ones before it');
    const unsealed = new Map(parsed.object);
    unsealed.delete('entry_hash');
    const body = utf8(canonical(unsealed));
    if (keyed && !key) {
      chain.needsKey = true;
      row.sealed = 'needs the key';
    } else {
      const seal = keyed ? `hmac-sha256:${hex(hmacSha256(key, body))}` : `sha256:${hex(sha256(body))}`;
      if (seal !== parsed.entryHash) {
        if (keyed && chain.entries === 0) {
          return fail('wrong_key', seq, "the first entry's HMAC does not match: the key is not the one the journal was written with (or this entry was edited)");
        }
        return fail('edited', seq, `the entry (kind ${JSON.stringify(parsed.kind)}) does not match its entry_hash: its content was changed`);
      }
      row.sealed = keyed ? 'HMAC ✓' : 'SHA-256 ✓';
    }
    if (canonical(parsed.object) !== line) return fail('edited', seq, 'the line is not in canonical form (bytes were changed without changing the values)');
    // Its place in the chain.
    if (expected === null) {
      if (seq === BigInt(1) && parsed.prevHash !== GENESIS) {
        return fail('spliced', seq, 'the first entry does not start a chain (its prev_hash is not the genesis value)');
      }
      const anchor = meta.anchor || {};
      if (anchor.prev_hash !== parsed.prevHash) {
        return fail('spliced', seq, `the first entry links to ${parsed.prevHash}, not to ${anchor.prev_hash}, the entry this export was written to continue from`);
      }
      if (anchor.genesis === true && seq !== BigInt(1)) {
        return fail('deleted', BigInt(1), `the export was written from the start of the journal, but its first entry is seq ${seq}`);
      }
      chain.firstSeq = seq;
      chain.firstPrev = parsed.prevHash;
    } else if (seq === expected) {
      if (parsed.prevHash !== chain.expectedPrev) {
        return fail('spliced', seq, `entry ${seq} does not link to entry ${seq - BigInt(1)} (prev_hash differs): it comes from another chain`);
      }
    } else {
      const later = lines.slice(index + 1).some((other) => seqOf(other) === expected);
      if (later) return fail('reordered', expected, `entry ${seq} comes where entry ${expected} should; entry ${expected} is further on`);
      if (seq > expected) {
        return fail('deleted', expected, seq === expected + BigInt(1) ? `entry ${expected} is missing` : `entries ${expected}–${seq - BigInt(1)} are missing`);
      }
      return fail('spliced', expected, `entry ${seq} appears again where entry ${expected} should be: it comes from elsewhere`);
    }
    if (parsed.kind === 'journal_pruned') {
      const through = u64Field(parsed.object, 'through_seq');
      const hash = stringField(parsed.object, 'through_hash');
      if (through !== null && hash !== null) chain.checkpoints.push({ through, hash });
    }
    const prompt = parsed.object.get('prompt');
    if (parsed.kind === 'drive_accepted' && stringField(parsed.object, 'drive_id') !== null && prompt instanceof Map) {
      chain.accepted.set(stringField(parsed.object, 'drive_id'), { seq, row: index, sha256: stringField(prompt, 'sha256'), bytes: u64Field(prompt, 'bytes') });
    }
    // The chat's own records of a drive (its evidence), as the checked entries hold them.
    // `holder`: an object with the chat's `file` and the `record` in it.
    const evidenceOf = (holder) => {
      const place = holder instanceof Map ? holder.get('record') : null;
      if (!(place instanceof Map)) return null;
      return {
        file: stringField(holder, 'file'),
        kind: stringField(place, 'kind'),
        line: u64Field(place, 'line'),
        offset: u64Field(place, 'offset'),
        bytes: u64Field(place, 'bytes'),
        table: stringField(place, 'table'),
        row: stringField(place, 'row'),
        pointer: stringField(place, 'pointer'),
        sha256: stringField(place, 'sha256'),
      };
    };
    const recordedFor = stringField(parsed.object, 'drive_id');
    if (parsed.kind === 'drive_prompt_recorded' && recordedFor !== null) {
      const found = evidenceOf(parsed.object);
      chain.promptRecorded.set(recordedFor, { seq, row: index, store: stringField(parsed.object, 'store'), chatId: stringField(parsed.object, 'chat_id'), ...found });
    }
    if (parsed.kind === 'drive_outcome_recorded' && recordedFor !== null) {
      const replyRecord = parsed.object.get('reply');
      chain.outcomes.set(recordedFor, {
        seq,
        row: index,
        stage: stringField(parsed.object, 'stage'),
        basis: stringField(parsed.object, 'basis'),
        record: evidenceOf(parsed.object.get('record')),
        replySha256: stringField(replyRecord, 'sha256'),
        replyBytes: u64Field(replyRecord, 'bytes'),
        replyChars: u64Field(replyRecord, 'chars'),
      });
    }
    chain.entries++;
    chain.expectedSeq = seq + BigInt(1);
    chain.expectedPrev = parsed.entryHash;
    row.status = keyed && !key ? 'needs-key' : 'ok';
    return null;
  }

  // ---- The page ----

  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props)) {
      if (name === 'className') node.className = value;
      else node.setAttribute(name, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  const code = (value) => el('code', {}, String(value));
  const isoTime = (ms) => (typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms).toISOString() : 'unknown');

  function showVerdict(result) {
    const verdict = document.getElementById('verdict');
    const detail = document.getElementById('verdict-detail');
    verdict.dataset.verdict = result.verdict;
    verdict.dataset.entries = String(result.entries);
    if (result.head) verdict.dataset.head = result.head;
    else delete verdict.dataset.head;
    delete verdict.dataset.badSeq;
    detail.textContent = '';
    if (result.verdict === 'tampered') {
      const { kind, seq, message } = result.problem;
      if (seq !== null && seq !== undefined) verdict.dataset.badSeq = String(seq);
      verdict.textContent = `NOT intact — first bad entry ${seq === null || seq === undefined ? '(none named)' : `seq ${seq}`}: ${kind} — ${message}`;
      if (result.entries > 0) detail.textContent = `The ${result.entries} entries before it check out (last good head ${result.head}).`;
    } else if (result.verdict === 'needs-key') {
      verdict.textContent = `Needs the key — ${result.entries} entries are sealed with HMAC-SHA256; type the journal's key below to check their seals`;
      detail.textContent = `Without the key, what could be checked holds: every line is canonical, seq ${result.firstSeq}–${result.lastSeq} runs without a gap and every prev_hash links to the entry before. Head ${result.head}.`;
    } else {
      verdict.textContent = `Intact — ${result.entries} entries, head ${result.head}`;
      detail.textContent = `seq ${result.firstSeq}–${result.lastSeq}, every seal ${result.keyed ? 'checked with the key you typed (HMAC-SHA256)' : 'checked (SHA-256)'} and every link in place.`;
    }
  }

  function showAbout(meta, result) {
    const about = document.getElementById('about');
    about.textContent = '';
    const fact = (term, ...value) => about.append(el('dt', {}, term), el('dd', {}, ...value));
    const ledger = meta.format === 'koru-audit-ledger/1' && meta.ledger ? meta.ledger : null;
    if (ledger) {
      document.title = `Koru audit ledger — ${ledger.chat_id}`;
      document.querySelector('h1').textContent = 'Koru audit ledger of a chat';
      fact('Chat', code(ledger.chat_id), ' of ', code(ledger.store), ` — ${ledger.items} items, each with the SHA-256 of its bytes in the source`);
      fact('Source', code(ledger.source), ' (on the machine that audited it)');
    }
    const selection = meta.selection || {};
    fact('Exported', `${isoTime(meta.exported_at_ms)} by koru ${meta.koru_version || '?'}`);
    fact(ledger ? 'Ledger folder' : 'Journal folder', code(meta.journal_dir || '?'), ' (on the machine that wrote it)');
    if (selection.kind === 'drive') fact('Selection', 'drive ', code(selection.drive_id), ': from its drive_accepted entry to its last entry — its drive_ended, or the chat’s own records of it that came after (entries of other drives in between are kept: the chain needs them)');
    else if (selection.kind === 'since') fact('Selection', `entries from ${isoTime(selection.since_ms)} on`);
    else fact('Selection', ledger ? 'every entry of the ledger' : 'every entry of the journal');
    fact('Entries', `${result.entries} checked${result.firstSeq !== null ? ` (seq ${result.firstSeq}–${result.lastSeq})` : ''} of ${result.rows.length} in this file`);
    const anchor = meta.anchor || {};
    if (anchor.genesis) fact('Starts at', `the start of the ${ledger ? 'ledger' : 'journal'} (the first prev_hash is the genesis value)`);
    else fact('Starts after', `seq ${anchor.after_seq}, whose entry_hash is `, code(anchor.prev_hash || '?'));
    if (result.prunedThrough !== null) fact('Pruned', `seq 1–${result.prunedThrough} were removed by retention; the checkpoint entry vouches for where this chain starts`);
    if (result.verdict === 'tampered') {
      fact('Head', 'not proven: the chain breaks', result.problem.seq !== null && result.problem.seq !== undefined ? ` at seq ${result.problem.seq}` : '', typeof meta.head === 'string' ? '; the file says it was written with head ' : '', typeof meta.head === 'string' ? code(meta.head) : '');
    } else {
      fact('Head', code(result.head || '—'), result.verdict === 'needs-key' ? ' (the entry_hash of the last entry here; its seal is not checked without the key)' : ' (the entry_hash of the last entry here)');
    }
    const journal = meta.journal || {};
    if (journal.head) {
      const same = journal.head === result.head;
      fact(ledger ? 'Ledger when exported' : 'Journal when exported', `last seq ${journal.last_seq}, head `, code(journal.head), same ? ` — this export reached the end of the ${ledger ? 'ledger' : 'journal'}` : '');
    }
    fact('Seals', result.keyed ? 'HMAC-SHA256 (keyed)' : 'SHA-256');
  }

  function showPrompt(meta, result) {
    const box = document.getElementById('prompt-box');
    const status = document.getElementById('prompt-status');
    const textBox = document.getElementById('prompt-text');
    const prompt = meta.prompt;
    box.hidden = !prompt;
    if (!prompt) return;
    if (typeof prompt.text !== 'string') {
      status.textContent = `The prompt of drive ${prompt.drive_id} is not in this file: ${prompt.absent || 'its text was not kept'}. The chain records its digest, sha256 ${prompt.sha256} (${prompt.bytes} bytes).`;
      textBox.hidden = true;
      return;
    }
    textBox.hidden = false;
    textBox.textContent = prompt.text;
    const checked = result.prompt;
    status.dataset.matches = String(checked.matches);
    status.textContent = checked.matches
      ? `Drive ${prompt.drive_id}: this text matches the sha256 and length its drive_accepted entry (seq ${checked.recorded.seq}) records — sha256 ${checked.sha256}, ${checked.bytes} bytes.`
      : `Drive ${prompt.drive_id}: this text does NOT match what its drive_accepted entry records (this text: sha256 ${checked.sha256}, ${checked.bytes} bytes).`;
  }

  /** Where a record is in its file, for a person. */
  function placeOf(found) {
    if (!found) return 'no record';
    const where = found.kind === 'line'
      ? `line ${found.line} (offset ${found.offset}, ${found.bytes} bytes)`
      : found.kind === 'element'
        ? `element ${found.pointer} (offset ${found.offset}, ${found.bytes} bytes)`
        : `row ${found.table}/${found.row} (${found.bytes} bytes)`;
    return `${found.file || ''} ${where}, sha256 ${found.sha256}`;
  }

  function showEvidence(meta, result) {
    const box = document.getElementById('evidence-box');
    const list = document.getElementById('evidence-records');
    const status = document.getElementById('reply-status');
    const textBox = document.getElementById('reply-text');
    const evidence = result.evidence;
    box.hidden = !evidence || (!evidence.prompt && !evidence.outcome);
    if (box.hidden) return;
    list.textContent = '';
    const item = (id, text) => {
      const li = el('li', { id });
      li.textContent = text;
      list.append(li);
    };
    if (evidence.prompt) {
      item('evidence-prompt', `The prompt, as the chat recorded it (seq ${evidence.prompt.seq}): ${evidence.prompt.store} chat ${evidence.prompt.chatId}, ${placeOf(evidence.prompt)}`);
    }
    const outcome = evidence.outcome;
    if (outcome) {
      const how = outcome.basis === 'explicit' ? "the store's record of it" : 'no record of the end in the store; the reply\'s last text';
      item('evidence-outcome', `The turn ${outcome.stage} (seq ${outcome.seq}), ${how}: ${placeOf(outcome.record)}`);
      if (outcome.replySha256 !== null) item('evidence-reply', `The reply: ${outcome.replyChars} characters, ${outcome.replyBytes} bytes, sha256 ${outcome.replySha256}`);
    }
    const reply = meta.reply;
    if (!reply || typeof reply.text !== 'string') {
      status.textContent = reply ? `The reply's text is not in this file: ${reply.absent || 'its text was not kept'}.` : '';
      textBox.hidden = true;
      return;
    }
    textBox.hidden = false;
    textBox.textContent = reply.text;
    const checked = result.reply;
    status.dataset.matches = String(checked.matches);
    status.textContent = checked.matches
      ? `This reply matches the sha256 and length its drive_outcome_recorded entry (seq ${checked.recorded.seq}) records — sha256 ${checked.sha256}, ${checked.bytes} bytes.`
      : `This reply does NOT match what its drive_outcome_recorded entry records (this text: sha256 ${checked.sha256}, ${checked.bytes} bytes).`;
  }

  function showRows(result) {
    const body = document.getElementById('entries-body');
    body.textContent = '';
    const used = new Set();
    let bad = null;
    for (const row of result.rows) {
      let id = `entry-${row.seq !== undefined && row.seq !== null ? row.seq : `line-${row.index + 1}`}`;
      if (used.has(id)) id = `${id}-line-${row.index + 1}`;
      used.add(id);
      const check = {
        ok: row.sealed || '✓',
        'needs-key': 'needs the key',
        bad: `✗ ${result.problem ? result.problem.kind : ''}`,
        unchecked: 'not checked',
      }[row.status];
      const line = typeof row.line === 'string' ? row.line : JSON.stringify(row.line);
      const tr = el(
        'tr',
        { id, className: row.status, 'data-index': String(row.index), 'data-status': row.status },
        el('td', { className: 'seq' }, row.seq !== undefined && row.seq !== null ? String(row.seq) : '?'),
        el('td', { className: 'time' }, row.time || ''),
        el('td', { className: 'kind' }, el('details', {}, el('summary', {}, row.kind || '(unreadable)'), el('pre', {}, line))),
        el('td', { className: 'drive' }, row.drive || ''),
        el('td', { className: 'state' }, row.state || ''),
        el('td', { className: 'who' }, row.who || ''),
        el('td', row.status === 'unchecked' ? { className: 'check', title: 'after the first bad entry, nothing is checked' } : { className: 'check' }, check),
      );
      if (row.status === 'bad') bad = tr;
      body.append(tr);
    }
    if (bad && typeof bad.scrollIntoView === 'function') bad.scrollIntoView({ block: 'center' });
  }

  function showCrossCheck(meta, result) {
    const box = document.getElementById('cross-check');
    box.textContent = '';
    const dir = meta.journal_dir || '<journal folder>';
    const shell = (value) => `'${String(value).replace(/'/g, "'\\''")}'`;
    const item = (...parts) => el('li', {}, ...parts);
    const list = el('ul');
    if (result.verdict === 'tampered') {
      list.append(
        item(
          'This file was changed after it was written (or was written from a journal that was). On the machine that wrote the journal, ',
          code('koru verify'),
          ' checks the journal itself, and ',
          code('koru journal export'),
          ' writes a fresh file.',
        ),
      );
    } else if (result.head) {
      list.append(
        item(
          'On the machine that wrote the journal, ',
          code('koru verify'),
          ' (or ',
          code('koru status'),
          ') prints the journal’s head. If nothing was written after this export, it is ',
          code(result.head),
          '.',
        ),
        item('If the journal went on, the entry after this export links back to its head: ', code(`grep -F ${shell(`"prev_hash":"${result.head}"`)} ${shell(dir)}/seg-*.ndjson`), ` finds seq ${result.lastSeq + BigInt(1)}.`),
      );
    }
    const anchor = meta.anchor || {};
    if (anchor.prev_hash && !anchor.genesis) {
      list.append(item('The entry this export continues from: ', code(`grep -F ${shell(`"entry_hash":"${anchor.prev_hash}"`)} ${shell(dir)}/seg-*.ndjson`), ` finds seq ${anchor.after_seq}.`));
    }
    if (meta.format === 'koru-audit-ledger/1' && meta.ledger) {
      list.append(
        item(
          'Against the chat’s own file: a chat_item whose source is line L of a JSONL file has the SHA-256 of that line without its newline — ',
          code(`sed -n Lp ${shell(meta.ledger.source)} | head -c -1 | sha256sum`),
          ' (an element: ',
          code('tail -c +$((OFFSET+1)) FILE | head -c BYTES | sha256sum'),
          ').',
        ),
      );
    }
    list.append(
      item(
        'By hand, without this page: a line’s entry_hash is the SHA-256 of the same line with its ',
        code(',"entry_hash":"…"'),
        ' field taken out (keys are sorted, so the rest keeps its bytes); with a key it is the HMAC-SHA256 of those bytes.',
      ),
    );
    box.append(list);
  }

  let data = null;

  function run(key) {
    let result;
    try {
      result = checkExport(data, key);
    } catch (error) {
      result = { verdict: 'tampered', problem: { kind: 'malformed', seq: null, message: `the check stopped: ${error.message}` }, rows: [], entries: 0, head: null, firstSeq: null, lastSeq: null, keyed: false, prunedThrough: null, prompt: null, reply: null, evidence: null };
    }
    showVerdict(result);
    showAbout(data.export || {}, result);
    showPrompt(data.export || {}, result);
    showEvidence(data.export || {}, result);
    showRows(result);
    showCrossCheck(data.export || {}, result);
    document.getElementById('key-box').hidden = !result.keyed && !(data.export && data.export.keyed);
    return result;
  }

  function start() {
    try {
      data = JSON.parse(document.getElementById('journal-data').textContent);
      if (!data || !Array.isArray(data.lines)) throw new Error('it holds no list of lines');
    } catch (error) {
      const verdict = document.getElementById('verdict');
      verdict.dataset.verdict = 'tampered';
      verdict.textContent = `NOT intact — the embedded entries cannot be read: ${error.message}`;
      return;
    }
    run(null);
    document.getElementById('key-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const typed = document.getElementById('hmac-key').value;
      run(typed ? utf8(typed) : null);
    });
  }

  // For tests and for anyone checking the checker from the console.
  window.koruJournalExport = {
    sha256Hex: (bytes) => hex(sha256(typeof bytes === 'string' ? utf8(bytes) : bytes)),
    hmacSha256Hex: (key, message) => hex(hmacSha256(typeof key === 'string' ? utf8(key) : key, typeof message === 'string' ? utf8(message) : message)),
    canonical: (line) => canonical(parseJson(line)),
    recheck: (keyText) => {
      const result = run(keyText ? utf8(keyText) : null);
      return { verdict: result.verdict, entries: result.entries, head: result.head, problem: result.problem && { kind: result.problem.kind, seq: result.problem.seq === null ? null : String(result.problem.seq), message: result.problem.message } };
    },
  };

  start();
})();
