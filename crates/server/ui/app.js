// signet log explorer: search the Rekor v1 log, show an entry with its certificate and inclusion
// proof, and verify the proof and the checkpoint signature in the browser with WebCrypto.
//
// Entries are attacker-chosen data, so everything the page shows is inserted as text
// (textContent / createElement), never as HTML. The page's CSP forbids inline script and style,
// so there is none here either.
'use strict';

(function () {

// ---------------------------------------------------------------------------------------------
// DOM helpers

const $ = (id) => document.getElementById(id);

// el('td', {class: 'mono'}, 'text', childNode): children that are not Nodes become text nodes.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'onclick') node.addEventListener('click', v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

const mono = (text) => el('span', { class: 'mono' }, text);
const note = (text) => el('p', { class: 'note' }, text);
const nowrap = (text) => el('span', { class: 'nowrap' }, text);

// A two-column table of [label, value] rows; rows whose value is null are left out.
function kvTable(rows) {
  const body = el('tbody');
  for (const [label, value] of rows) {
    if (value === null || value === undefined) continue;
    body.append(el('tr', null, el('th', { scope: 'row' }, label), el('td', null, value)));
  }
  return el('table', { class: 'kv' }, body);
}

function gridTable(headers, rows) {
  return el('table', { class: 'grid' },
    el('thead', null, el('tr', null, headers.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', null, rows.map((r) => el('tr', null, r.map((c) => el('td', null, c))))));
}

function showError(message) {
  const box = $('error');
  box.textContent = message || '';
  box.hidden = !message;
}

function setStatus(message) {
  $('status').textContent = message || '';
}

// Long user input is cut in messages, so that a pasted blob does not flood the page.
function quote(s) {
  return JSON.stringify(s.length > 100 ? s.slice(0, 100) + '…' : s);
}

// ---------------------------------------------------------------------------------------------
// Bytes

const utf8 = new TextEncoder();
const text = new TextDecoder('utf-8'); // not fatal: bad bytes show as U+FFFD

function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function fromHex(s, what) {
  if (typeof s !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(s)) throw new Error(`${what} is not hex`);
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(i * 2, i * 2 + 2), 16);
  return out;
}

function fromBase64(s, what) {
  if (typeof s !== 'string') throw new Error(`${what} is not a string`);
  let bin;
  try {
    bin = atob(s);
  } catch (_) {
    throw new Error(`${what} is not valid base64`);
  }
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function equalBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

// The first PEM block of a text: {label, der}, or null.
function parsePem(pem) {
  const m = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/.exec(pem);
  if (!m) return null;
  return { label: m[1], der: fromBase64(m[2].replace(/\s+/g, ''), `the PEM ${m[1]} block`), pem: m[0] };
}

function isoTime(unixSeconds) {
  if (!Number.isFinite(unixSeconds)) return '(invalid time)';
  const d = new Date(unixSeconds * 1000);
  return isNaN(d) ? '(invalid time)' : d.toISOString().replace('.000Z', 'Z');
}

// ---------------------------------------------------------------------------------------------
// API

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Fetches a same-origin path; a non-2xx answer throws ApiError with the server's message
// (signet's errors are {"code": N, "message": "..."}).
async function api(path, options) {
  const init = { method: 'GET', headers: { Accept: 'application/json' }, ...options };
  if (init.json !== undefined) {
    init.method = 'POST';
    init.headers = { ...init.headers, 'Content-Type': 'application/json' };
    init.body = JSON.stringify(init.json);
    delete init.json;
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, `could not reach the server (${e.message})`);
  }
  if (!res.ok) {
    let message = `HTTP ${res.status} ${res.statusText}`.trim();
    try {
      const body = await res.json();
      if (body && typeof body.message === 'string') message = body.message;
    } catch (_) { /* not JSON: keep the status line */ }
    throw new ApiError(res.status, message);
  }
  return res;
}

async function getJson(path, options) {
  const res = await api(path, options);
  try {
    return { json: await res.json(), res };
  } catch (_) {
    throw new ApiError(res.status, `${path} did not answer with JSON`);
  }
}

// ---------------------------------------------------------------------------------------------
// What a query is

const HEX = /^[0-9a-fA-F]+$/;
const DIGEST_HEX = { sha256: 64, sha384: 96, sha512: 128 };
const EXPECTED = 'Expected an artifact digest (sha256:<64 hex> or 64 hex), a log index (a number), ' +
  'an entry UUID (64 or 80 hex characters), or a signer identity (an email address or a URI such as ' +
  'https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main).';

// {kind, value} or {error}. 64 hex is both a digest and a 64-hex UUID: it is searched as a
// digest first, then looked up as a UUID.
function classify(raw) {
  const q = raw.trim();
  if (!q) return { error: 'Enter something to search for. ' + EXPECTED };
  if (/^[0-9]+$/.test(q)) {
    const n = Number(q);
    if (!Number.isSafeInteger(n)) return { error: `Log index ${quote(q)} is too large: expected a whole number below 2^53.` };
    return { kind: 'index', value: n, label: `log index ${n}` };
  }
  const digest = /^([a-zA-Z0-9]+):(.*)$/.exec(q);
  if (digest && !q.includes('//') && !q.includes('@')) {
    const alg = digest[1].toLowerCase();
    const want = DIGEST_HEX[alg];
    if (!want) return { error: `Digest algorithm ${quote(digest[1])} is not supported: expected sha256, sha384 or sha512.` };
    const value = digest[2];
    if (value.length !== want || !HEX.test(value)) {
      const got = HEX.test(value) ? `${value.length} hex characters` : 'characters that are not hex';
      return { error: `${quote(q)} is not a ${alg} digest: expected "${alg}:" followed by ${want} hex characters, got ${got}.` };
    }
    return { kind: 'digest', value: `${alg}:${value.toLowerCase()}`, label: `digest ${alg}:${value.toLowerCase()}` };
  }
  if (HEX.test(q)) {
    const v = q.toLowerCase();
    if (v.length === 64) return { kind: 'digest-or-uuid', value: v, label: `digest or UUID ${v}` };
    if (v.length === 80) return { kind: 'uuid', value: v, label: `UUID ${v}` };
    return { error: `${quote(q)} is ${q.length} hex characters: expected 64 (a sha256 digest or an entry UUID) or 80 (an entry UUID).` };
  }
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/\S+$/.test(q)) return { kind: 'identity', value: q, label: `identity ${q}` };
  if (/^[^\s@]+@[^\s@]+$/.test(q)) return { kind: 'identity', value: q, label: `identity ${q}` };
  return { error: `${quote(q)} is not a search the explorer understands. ${EXPECTED}` };
}

// ---------------------------------------------------------------------------------------------
// Searching

let searchSeq = 0; // a newer search wins over a slower, older one
let current = null; // the entry on show: {uuid, entry}

function resetResults() {
  showError('');
  for (const id of ['results-section', 'entry-section', 'certificate-section', 'proof-section']) $(id).hidden = true;
  for (const id of ['results', 'entry', 'certificate', 'proof', 'verify-checks']) $(id).replaceChildren();
  $('results-note').textContent = '';
  current = null;
  resetVerify();
}

function resetVerify() {
  const r = $('verify-result');
  r.textContent = '';
  r.className = 'verify-result';
  $('verify-checks').replaceChildren();
  $('verify').disabled = !current;
}

async function runSearch(raw) {
  const seq = ++searchSeq;
  resetResults();
  const query = classify(raw);
  if (query.error) {
    showError(query.error);
    return;
  }
  const q = raw.trim();
  history.replaceState(null, '', `${location.pathname}?q=${encodeURIComponent(q)}`);
  setStatus(`Searching for ${query.label}…`);
  $('search').disabled = true;
  try {
    await search(query, seq);
  } catch (e) {
    if (seq === searchSeq) showError(`Search for ${query.label} failed: ${e.message}`);
  } finally {
    if (seq === searchSeq) {
      setStatus('');
      $('search').disabled = false;
    }
  }
  loadLog().catch(() => {}); // the log may have grown; loadLog shows its own errors
}

async function search(query, seq) {
  switch (query.kind) {
    case 'index': {
      const { json } = await getJson(`/api/v1/log/entries?logIndex=${query.value}`);
      if (seq === searchSeq) showEntryMap(json);
      return;
    }
    case 'uuid':
      return openEntry(query.value, seq);
    case 'digest':
      return searchIndex({ hash: query.value }, query, seq);
    case 'identity':
      return searchIndex({ identity: query.value }, query, seq);
    case 'digest-or-uuid': {
      const found = await searchIndex({ hash: `sha256:${query.value}` }, query, seq, true);
      if (found || seq !== searchSeq) return;
      try {
        await openEntry(query.value, seq);
      } catch (e) {
        if (e.status !== 404) throw e;
        throw new Error(`no entry has sha256 digest ${query.value}, and no entry has that UUID.`);
      }
      return;
    }
  }
}

// POST /api/v1/index/retrieve: lists the matching UUIDs and opens the first. Returns whether
// anything matched; with quiet, no match is not an error (the caller tries something else).
async function searchIndex(criteria, query, seq, quiet) {
  const { json, res } = await getJson('/api/v1/index/retrieve', { json: criteria });
  if (seq !== searchSeq) return false;
  if (!Array.isArray(json) || !json.every((u) => typeof u === 'string' && HEX.test(u))) {
    throw new Error('the server answered with something other than a list of entry UUIDs');
  }
  if (json.length === 0) {
    if (quiet) return false;
    throw new Error(`no entries match ${query.label}.`);
  }
  const more = res.headers.get('x-next-after');
  $('results-note').textContent = `${json.length} matching ${json.length === 1 ? 'entry' : 'entries'}` +
    (more ? ' (the first page; more exist — narrow the search)' : '') + '. Showing the first; pick another below.';
  const list = $('results');
  for (const uuid of json) {
    const button = el('button', { type: 'button', class: 'link' }, uuid);
    button.addEventListener('click', () => pickResult(uuid));
    list.append(el('li', { 'data-uuid': uuid }, button));
  }
  $('results-section').hidden = false;
  await openEntry(json[0], seq);
  return true;
}

async function pickResult(uuid) {
  const seq = ++searchSeq;
  showError('');
  setStatus('Loading entry…');
  try {
    await openEntry(uuid, seq);
  } catch (e) {
    if (seq === searchSeq) showError(`Loading entry ${uuid} failed: ${e.message}`);
  } finally {
    if (seq === searchSeq) setStatus('');
  }
}

async function openEntry(uuid, seq) {
  const { json } = await getJson(`/api/v1/log/entries/${encodeURIComponent(uuid)}`);
  if (seq === searchSeq) showEntryMap(json);
}

// Rekor answers {"<uuid>": {body, integratedTime, logID, logIndex, verification}}.
function showEntryMap(map) {
  const pairs = map && typeof map === 'object' && !Array.isArray(map) ? Object.entries(map) : [];
  if (pairs.length === 0) throw new Error('the server answered with no entry');
  const [uuid, entry] = pairs[0];
  if (!entry || typeof entry !== 'object' || typeof entry.body !== 'string') {
    throw new Error('the entry in the answer has no body');
  }
  current = { uuid, entry };
  for (const li of $('results').children) li.classList.toggle('current', li.dataset.uuid === uuid);
  showError('');
  renderEntry(uuid, entry);
  renderCertificate(entry);
  renderProof(entry);
  resetVerify();
}

// ---------------------------------------------------------------------------------------------
// The entry

// The tree ID is the first 16 hex of an 80-hex UUID (a signed 64-bit number), or null.
function treeIdOf(uuid) {
  if (!/^[0-9a-fA-F]{80}$/.test(uuid)) return null;
  return BigInt.asIntN(64, BigInt('0x' + uuid.slice(0, 16))).toString();
}

function decodeBody(entry) {
  const bytes = fromBase64(entry.body, 'the entry body');
  const str = text.decode(bytes);
  let json = null;
  try {
    json = JSON.parse(str);
  } catch (_) { /* shown as text */ }
  return { bytes, str, json };
}

function renderEntry(uuid, entry) {
  const box = $('entry');
  let body;
  try {
    body = decodeBody(entry);
  } catch (e) {
    body = { bytes: new Uint8Array(), str: `(${e.message})`, json: null };
  }
  const b = body.json && typeof body.json === 'object' ? body.json : {};
  const spec = b.spec && typeof b.spec === 'object' ? b.spec : {};
  const proofIndex = entry.verification?.inclusionProof?.logIndex;
  const rows = [
    ['UUID', mono(uuid)],
    ['Log index', el('span', null, String(entry.logIndex),
      proofIndex !== undefined && proofIndex !== entry.logIndex ? [' ', el('span', { class: 'badge' }, `index ${proofIndex} in its shard`)] : null)],
    ['Tree ID', treeIdOf(uuid)],
    ['Integrated time', `${isoTime(entry.integratedTime)} (${entry.integratedTime})`],
    ['Log ID', typeof entry.logID === 'string' ? mono(entry.logID) : null],
    ['Kind', typeof b.kind === 'string' ? `${b.kind} ${b.apiVersion || ''}`.trim() : '(body is not a Rekor entry)'],
  ];
  if (b.kind === 'hashedrekord') {
    const h = spec.data?.hash;
    if (h) rows.push(['Artifact digest', mono(`${h.algorithm}:${h.value}`)]);
  } else if (b.kind === 'dsse') {
    if (spec.payloadHash) rows.push(['Payload digest', mono(`${spec.payloadHash.algorithm}:${spec.payloadHash.value}`)]);
    if (spec.envelopeHash) rows.push(['Envelope digest', mono(`${spec.envelopeHash.algorithm}:${spec.envelopeHash.value}`)]);
    if (Array.isArray(spec.signatures)) rows.push(['Signatures', String(spec.signatures.length)]);
  }
  const set = entry.verification?.signedEntryTimestamp;
  rows.push(['Signed entry timestamp', typeof set === 'string' ? mono(set) : 'none']);
  box.replaceChildren(
    kvTable(rows),
    el('h3', null, `Body (${body.bytes.length} bytes, base64-decoded)`),
    el('pre', { class: 'body' }, body.json ? JSON.stringify(body.json, null, 2) : body.str));
  $('entry-section').hidden = false;
}

// The PEM that signed the entry: hashedrekord's publicKey.content, dsse's first verifier
// (both base64 of a PEM certificate or public key).
function signerPem(entry) {
  const { json } = decodeBody(entry);
  const spec = json?.spec;
  let b64 = null;
  if (json?.kind === 'hashedrekord') b64 = spec?.signature?.publicKey?.content;
  else if (json?.kind === 'dsse' && Array.isArray(spec?.signatures)) b64 = spec.signatures[0]?.verifier;
  if (typeof b64 !== 'string') return null;
  return text.decode(fromBase64(b64, 'the signer'));
}

// ---------------------------------------------------------------------------------------------
// A small DER reader, for display only (no crypto here). Every read is bounds-checked against
// its parent, and any malformation throws DerError, which callers turn into a message.

class DerError extends Error {}
const derFail = (message) => { throw new DerError(message); };

// One TLV at bytes[pos, end): {tag, constructed, num, start, end, next, bytes}.
function readTlv(bytes, pos, end) {
  if (end - pos < 2) derFail('truncated element');
  const first = bytes[pos++];
  let num = first & 0x1f;
  if (num === 0x1f) {
    num = 0;
    let b;
    do {
      if (pos >= end) derFail('truncated tag');
      b = bytes[pos++];
      num = num * 128 + (b & 0x7f);
      if (num > 0xffffff) derFail('tag number too large');
    } while (b & 0x80);
  }
  if (pos >= end) derFail('truncated length');
  let len = bytes[pos++];
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0) derFail('indefinite length is not DER');
    if (n > 4 || n > end - pos) derFail('bad length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + bytes[pos++];
  }
  if (len > end - pos) derFail('element runs past its parent');
  return { tag: first, constructed: (first & 0x20) !== 0, num, start: pos, end: pos + len, next: pos + len, bytes };
}

// The one element that fills `bytes` exactly.
function derWhole(bytes) {
  const node = readTlv(bytes, 0, bytes.length);
  if (node.next !== bytes.length) derFail('trailing bytes');
  return node;
}

function derChildren(node) {
  if (!node.constructed) derFail('expected a constructed element');
  const out = [];
  for (let pos = node.start; pos < node.end;) {
    const child = readTlv(node.bytes, pos, node.end);
    out.push(child);
    pos = child.next;
    if (out.length > 4096) derFail('too many elements');
  }
  return out;
}

const derContent = (node) => node.bytes.subarray(node.start, node.end);

function derExpect(node, tag, what) {
  if (!node) derFail(`${what} is missing`);
  if (node.tag !== tag) derFail(`${what} has tag 0x${node.tag.toString(16)}, expected 0x${tag.toString(16)}`);
  return node;
}

function derOid(node) {
  const b = derContent(derExpect(node, 0x06, 'object identifier'));
  if (b.length === 0 || b.length > 128) derFail('bad object identifier');
  const arcs = [];
  let v = 0n;
  for (let i = 0; i < b.length; i++) {
    v = (v << 7n) | BigInt(b[i] & 0x7f);
    if (!(b[i] & 0x80)) {
      arcs.push(v);
      v = 0n;
    } else if (i === b.length - 1) {
      derFail('truncated object identifier');
    }
  }
  const x = arcs[0] < 40n ? 0n : arcs[0] < 80n ? 1n : 2n;
  return [x, arcs[0] - 40n * x, ...arcs.slice(1)].join('.');
}

function derSmallInt(node) {
  const b = derContent(derExpect(node, 0x02, 'integer'));
  if (b.length === 0 || b.length > 4) derFail('integer out of range');
  return b.reduce((n, x) => n * 256 + x, 0);
}

function derString(node) {
  const b = derContent(node);
  switch (node.tag) {
    case 0x0c: case 0x12: case 0x13: case 0x16: case 0x1a: // UTF8, Numeric, Printable, IA5, Visible
      return text.decode(b);
    case 0x14: // TeletexString: read as Latin-1
      return String.fromCharCode(...b.subarray(0, 4096));
    case 0x1e: // BMPString
      if (b.length % 2) derFail('odd-length BMPString');
      return new TextDecoder('utf-16be').decode(b);
    default:
      derFail(`tag 0x${node.tag.toString(16)} is not a string`);
  }
}

function derTime(node) {
  const s = text.decode(derContent(node));
  let m;
  if (node.tag === 0x17) {
    m = /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(s);
    if (m) m[1] = String((Number(m[1]) < 50 ? 2000 : 1900) + Number(m[1]));
  } else if (node.tag === 0x18) {
    m = /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(s);
  }
  if (!m) derFail('bad time');
  const iso = `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`;
  const date = new Date(iso);
  if (isNaN(date)) derFail('bad time');
  return { iso, date };
}

const OID_NAMES = {
  '2.5.4.3': 'CN', '2.5.4.5': 'serialNumber', '2.5.4.6': 'C', '2.5.4.7': 'L', '2.5.4.8': 'ST',
  '2.5.4.10': 'O', '2.5.4.11': 'OU', '1.2.840.113549.1.9.1': 'emailAddress', '0.9.2342.19200300.100.1.25': 'DC',
  '1.2.840.10045.2.1': 'EC public key', '1.2.840.113549.1.1.1': 'RSA', '1.3.101.112': 'Ed25519',
  '1.2.840.10045.3.1.7': 'P-256', '1.3.132.0.34': 'P-384', '1.3.132.0.35': 'P-521',
  '1.2.840.10045.4.3.2': 'ECDSA with SHA-256', '1.2.840.10045.4.3.3': 'ECDSA with SHA-384',
  '1.2.840.10045.4.3.4': 'ECDSA with SHA-512', '1.2.840.113549.1.1.11': 'RSA PKCS#1 v1.5 with SHA-256',
  '1.2.840.113549.1.1.12': 'RSA PKCS#1 v1.5 with SHA-384', '1.2.840.113549.1.1.13': 'RSA PKCS#1 v1.5 with SHA-512',
  '1.2.840.113549.1.1.10': 'RSASSA-PSS',
  '1.3.6.1.5.5.7.3.1': 'serverAuth', '1.3.6.1.5.5.7.3.2': 'clientAuth', '1.3.6.1.5.5.7.3.3': 'codeSigning',
  '1.3.6.1.5.5.7.3.4': 'emailProtection', '1.3.6.1.5.5.7.3.8': 'timeStamping',
  '2.5.29.14': 'Subject Key Identifier', '2.5.29.15': 'Key Usage', '2.5.29.17': 'Subject Alternative Name',
  '2.5.29.19': 'Basic Constraints', '2.5.29.35': 'Authority Key Identifier', '2.5.29.37': 'Extended Key Usage',
  '1.3.6.1.4.1.11129.2.4.2': 'Embedded SCTs', '1.3.6.1.4.1.11129.2.4.3': 'CT precertificate poison',
};
const oidName = (oid) => OID_NAMES[oid] || oid;

// Fulcio's extensions, 1.3.6.1.4.1.57264.1.<n> (docs/oid-info.md in sigstore/fulcio).
const FULCIO_ARC = '1.3.6.1.4.1.57264.1.';
const FULCIO_NAMES = {
  1: 'Issuer (v1, deprecated)', 2: 'GitHub Workflow Trigger (deprecated)', 3: 'GitHub Workflow SHA (deprecated)',
  4: 'GitHub Workflow Name (deprecated)', 5: 'GitHub Workflow Repository (deprecated)',
  6: 'GitHub Workflow Ref (deprecated)', 7: 'OtherName SAN', 8: 'Issuer (v2)', 9: 'Build Signer URI',
  10: 'Build Signer Digest', 11: 'Runner Environment', 12: 'Source Repository URI', 13: 'Source Repository Digest',
  14: 'Source Repository Ref', 15: 'Source Repository Identifier', 16: 'Source Repository Owner URI',
  17: 'Source Repository Owner Identifier', 18: 'Build Config URI', 19: 'Build Config Digest', 20: 'Build Trigger',
  21: 'Run Invocation URI', 22: 'Source Repository Visibility At Signing', 23: 'Deployment Environment',
};

function derName(node) {
  const parts = [];
  for (const rdn of derChildren(derExpect(node, 0x30, 'name'))) {
    for (const atv of derChildren(derExpect(rdn, 0x31, 'relative distinguished name'))) {
      const [type, value] = derChildren(derExpect(atv, 0x30, 'attribute'));
      const oid = derOid(type);
      if (!value) derFail('attribute without a value');
      let v;
      try {
        v = derString(value);
      } catch (_) {
        v = '#' + toHex(derContent(value));
      }
      parts.push(`${oidName(oid)}=${v}`);
    }
  }
  return parts.join(', ');
}

function derAlgorithm(node) {
  const [oid, params] = derChildren(derExpect(node, 0x30, 'algorithm identifier'));
  return { oid: derOid(oid), params };
}

// SubjectPublicKeyInfo: {type: 'ec'|'ed25519'|'rsa'|other oid, curve, name}.
function derSpki(node) {
  const [alg, key] = derChildren(derExpect(node, 0x30, 'subject public key info'));
  const { oid, params } = derAlgorithm(alg);
  derExpect(key, 0x03, 'public key bits');
  if (oid === '1.2.840.10045.2.1') {
    const curve = params && params.tag === 0x06 ? oidName(derOid(params)) : 'unknown curve';
    return { type: 'ec', curve, name: `ECDSA ${curve}` };
  }
  if (oid === '1.3.101.112') return { type: 'ed25519', name: 'Ed25519' };
  if (oid === '1.2.840.113549.1.1.1') {
    let bits = '';
    try {
      const [n] = derChildren(derWhole(derContent(key).subarray(1)));
      const m = derContent(derExpect(n, 0x02, 'modulus'));
      bits = ` ${(m.length - (m[0] === 0 ? 1 : 0)) * 8}-bit`;
    } catch (_) { /* the size is only for display */ }
    return { type: 'rsa', name: `RSA${bits}` };
  }
  return { type: oid, name: oidName(oid) };
}

function parseCertificate(der) {
  const [tbs, sigAlg, sigValue] = derChildren(derExpect(derWhole(der), 0x30, 'certificate'));
  derExpect(tbs, 0x30, 'tbsCertificate');
  derExpect(sigValue, 0x03, 'signature value');
  const f = derChildren(tbs);
  let i = 0;
  let version = 1;
  if (f[i] && f[i].tag === 0xa0) version = derSmallInt(derChildren(f[i++])[0]) + 1;
  const serial = toHex(derContent(derExpect(f[i++], 0x02, 'serial number')));
  derAlgorithm(f[i++]);
  const issuer = derName(f[i++]);
  const validity = derChildren(derExpect(f[i++], 0x30, 'validity'));
  if (validity.length !== 2) derFail('validity must hold two times');
  const notBefore = derTime(validity[0]);
  const notAfter = derTime(validity[1]);
  const subject = derName(f[i++]);
  const spki = derSpki(f[i++]);
  let extensions = [];
  for (; i < f.length; i++) {
    if (f[i].tag === 0xa3) {
      extensions = derChildren(derExpect(derChildren(f[i])[0], 0x30, 'extensions')).map(derExtension);
    } else if (f[i].tag !== 0xa1 && f[i].tag !== 0xa2) {
      derFail('unexpected field in tbsCertificate');
    }
  }
  return { version, serial, issuer, subject, notBefore, notAfter, spki, extensions,
    signatureAlgorithm: oidName(derAlgorithm(sigAlg).oid) };
}

function derExtension(node) {
  const parts = derChildren(derExpect(node, 0x30, 'extension'));
  const oid = derOid(parts[0]);
  let k = 1;
  let critical = false;
  if (parts[k] && parts[k].tag === 0x01) critical = derContent(parts[k++])[0] === 0xff;
  const value = derContent(derExpect(parts[k], 0x04, 'extension value'));
  return { oid, critical, value };
}

// An extension's value as a list of display strings. Throws DerError if malformed.
function describeExtension(ext) {
  const { oid, value } = ext;
  if (oid.startsWith(FULCIO_ARC)) {
    const arc = Number(oid.slice(FULCIO_ARC.length));
    // .1 to .6 hold the raw string; .8 on are DER strings (some issuers wrote raw ones).
    if (arc >= 8) {
      try {
        return [derString(derWhole(value))];
      } catch (_) { /* fall back to raw text */ }
    }
    return [text.decode(value)];
  }
  switch (oid) {
    case '2.5.29.17':
      return derSans(value).map((s) => `${s.type}: ${s.value}`);
    case '2.5.29.15': {
      const b = derContent(derExpect(derWhole(value), 0x03, 'key usage'));
      const names = ['digitalSignature', 'nonRepudiation', 'keyEncipherment', 'dataEncipherment', 'keyAgreement',
        'keyCertSign', 'cRLSign', 'encipherOnly', 'decipherOnly'];
      return [names.filter((_, bit) => 1 + (bit >> 3) < b.length && b[1 + (bit >> 3)] & (0x80 >> (bit & 7))).join(', ') || '(none)'];
    }
    case '2.5.29.37':
      return derChildren(derExpect(derWhole(value), 0x30, 'extended key usage')).map((o) => oidName(derOid(o)));
    case '2.5.29.19': {
      const parts = derChildren(derExpect(derWhole(value), 0x30, 'basic constraints'));
      const ca = parts[0] && parts[0].tag === 0x01 && derContent(parts[0])[0] === 0xff;
      const len = parts.find((p) => p.tag === 0x02);
      return [`CA: ${ca ? 'yes' : 'no'}${len ? `, path length ${derSmallInt(len)}` : ''}`];
    }
    case '2.5.29.14':
      return [toHex(derContent(derExpect(derWhole(value), 0x04, 'key identifier')))];
    case '2.5.29.35': {
      const id = derChildren(derExpect(derWhole(value), 0x30, 'authority key identifier')).find((p) => p.tag === 0x80);
      return [id ? toHex(derContent(id)) : '(no key identifier)'];
    }
    case '1.3.6.1.4.1.11129.2.4.2':
      return sctList(derContent(derExpect(derWhole(value), 0x04, 'SCT list')));
    default:
      return [`${value.length} bytes`];
  }
}

function derSans(value) {
  return derChildren(derExpect(derWhole(value), 0x30, 'subject alternative names')).map((gn) => {
    const raw = () => text.decode(derContent(gn));
    switch (gn.tag) {
      case 0x81: return { type: 'email', value: raw() };
      case 0x82: return { type: 'DNS', value: raw() };
      case 0x86: return { type: 'URI', value: raw() };
      case 0x87: {
        const b = derContent(gn);
        if (b.length === 4) return { type: 'IP', value: Array.from(b).join('.') };
        return { type: 'IP', value: toHex(b).replace(/(.{4})(?!$)/g, '$1:') };
      }
      case 0xa0: { // otherName: type-id OID, [0] EXPLICIT value
        const [type, wrapped] = derChildren(gn);
        const oid = derOid(type);
        const inner = wrapped && wrapped.tag === 0xa0 ? derChildren(wrapped)[0] : null;
        let v;
        try {
          v = derString(inner);
        } catch (_) {
          v = inner ? '#' + toHex(derContent(inner)) : '(empty)';
        }
        const name = oid === FULCIO_ARC + '7' ? 'otherName (username)' : `otherName ${oid}`;
        return { type: name, value: v };
      }
      case 0xa4: return { type: 'directory name', value: derName(derChildren(gn)[0] || derFail('empty name')) };
      default: return { type: `[${gn.num}]`, value: toHex(derContent(gn)) };
    }
  });
}

// RFC 6962 SignedCertificateTimestampList (TLS encoding): each SCT's log ID and time.
function sctList(b) {
  const u16 = (at) => {
    if (at + 2 > b.length) derFail('truncated SCT list');
    return (b[at] << 8) | b[at + 1];
  };
  if (u16(0) !== b.length - 2) derFail('SCT list length mismatch');
  const out = [];
  for (let at = 2; at < b.length;) {
    const len = u16(at);
    const sct = b.subarray(at + 2, at + 2 + len);
    if (sct.length !== len || len < 41) derFail('truncated SCT');
    const millis = sct.subarray(33, 41).reduce((n, x) => n * 256 + x, 0);
    out.push(`SCT v${sct[0] + 1} from log ${toHex(sct.subarray(1, 33))} at ${isoTime(millis / 1000)}`);
    at += 2 + len;
  }
  return out.length ? out : ['(empty)'];
}

// ---------------------------------------------------------------------------------------------
// The certificate

function renderCertificate(entry) {
  const box = $('certificate');
  box.replaceChildren();
  $('certificate-section').hidden = false;
  let block;
  try {
    const pem = signerPem(entry);
    if (pem === null) {
      box.append(note('This entry carries no signer certificate or key that the explorer knows how to read.'));
      return;
    }
    block = parsePem(pem);
    if (!block) throw new DerError('the signer is not PEM');
  } catch (e) {
    box.append(el('p', { class: 'error' }, `The certificate could not be decoded: ${e.message}`));
    return;
  }
  if (block.label === 'PUBLIC KEY') {
    let kind = 'unknown key type';
    try {
      kind = derSpki(derWhole(block.der)).name;
    } catch (_) { /* shown as unknown */ }
    box.append(note(`This entry was signed with a public key (${kind}), not a certificate.`), el('pre', null, block.pem));
    return;
  }
  let cert;
  try {
    if (block.label !== 'CERTIFICATE') throw new DerError(`a PEM ${block.label} is not a certificate`);
    cert = parseCertificate(block.der);
  } catch (e) {
    box.append(el('p', { class: 'error' }, `The certificate could not be decoded (${e.message}).`));
    return;
  }

  const described = cert.extensions.map((ext) => {
    let values;
    try {
      values = describeExtension(ext);
    } catch (e) {
      values = [`(could not be decoded: ${e.message})`];
    }
    return { ...ext, values };
  });
  const byOid = (oid) => described.find((e) => e.oid === oid);
  const san = byOid('2.5.29.17');
  const oidcIssuer = byOid(FULCIO_ARC + '8') || byOid(FULCIO_ARC + '1');
  const minutes = Math.round((cert.notAfter.date - cert.notBefore.date) / 60000);
  const now = new Date();
  const state = now < cert.notBefore.date ? 'not yet valid' : now > cert.notAfter.date ? 'expired now; what counts is that it was valid at the integrated time' : 'valid now';
  const integrated = new Date(entry.integratedTime * 1000);
  const atSigning = integrated >= cert.notBefore.date && integrated <= cert.notAfter.date;

  const values = (list) => el('ul', { class: 'values' }, list.map((v) => el('li', null, v)));
  box.append(kvTable([
    ['Subject', cert.subject || '(empty: the identity is in the SAN)'],
    ['Issuer', cert.issuer || '(empty)'],
    ['Serial', mono(cert.serial)],
    ['Not before', cert.notBefore.iso],
    ['Not after', `${cert.notAfter.iso} (${minutes} minutes; ${state})`],
    ['At integration', atSigning ? 'the entry was integrated while the certificate was valid' : 'the entry was integrated OUTSIDE the certificate validity'],
    ['SANs', san ? values(san.values) : '(none)'],
    ['OIDC issuer', oidcIssuer ? oidcIssuer.values.join(', ') : null],
    ['Public key', cert.spki.name],
    ['Signature', cert.signatureAlgorithm],
    ['Version', `v${cert.version}`],
  ]));

  const sigstore = described.filter((e) => e.oid.startsWith(FULCIO_ARC));
  box.append(el('h3', null, 'Sigstore extensions'));
  box.append(sigstore.length
    ? gridTable(['Field', 'OID', 'Value'], sigstore.map((e) => [
      FULCIO_NAMES[Number(e.oid.slice(FULCIO_ARC.length))] || 'Unknown', mono(e.oid), values(e.values)]))
    : note('none'));
  const other = described.filter((e) => !e.oid.startsWith(FULCIO_ARC));
  box.append(el('h3', null, 'Other extensions'));
  box.append(other.length
    ? gridTable(['Extension', 'Value'], other.map((e) => [
      el('span', null, oidName(e.oid), e.critical ? [' ', el('span', { class: 'badge' }, 'critical')] : null), values(e.values)]))
    : note('none'));
  box.append(el('details', null, el('summary', null, 'PEM'), el('pre', null, block.pem)));
}

// ---------------------------------------------------------------------------------------------
// The inclusion proof

function renderProof(entry) {
  const box = $('proof');
  $('proof-section').hidden = false;
  const p = entry.verification?.inclusionProof;
  if (!p || typeof p !== 'object') {
    box.replaceChildren(note('This entry has no inclusion proof.'));
    return;
  }
  const hashes = Array.isArray(p.hashes) ? p.hashes : [];
  box.replaceChildren(kvTable([
    ['Log index', el('span', null, String(p.logIndex),
      p.logIndex !== entry.logIndex ? [' ', el('span', { class: 'badge' }, `in the shard; log-wide index ${entry.logIndex}`)] : null)],
    ['Tree size', String(p.treeSize)],
    ['Root hash', mono(String(p.rootHash))],
    ['Hashes', hashes.length
      ? el('ol', { class: 'hashes', start: 0 }, hashes.map((h) => el('li', null, mono(String(h)))))
      : '(none: the tree holds only this entry)'],
  ]), el('h3', null, 'Checkpoint'), el('pre', { class: 'checkpoint' }, typeof p.checkpoint === 'string' ? p.checkpoint : '(none)'));
}

// RFC 9162 section 2.1.3.2: the root that `path` proves for `leaf` at `index` in a tree of `size`.
async function rootFromInclusionProof(index, size, leaf, path) {
  if (index >= size) throw new Error(`leaf index ${index} is not below tree size ${size}`);
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of path) {
    if (sn === 0n) throw new Error('the proof has more hashes than a tree of this size needs');
    if ((fn & 1n) === 1n || fn === sn) {
      r = await sha256(concat([1], p, r));
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await sha256(concat([1], r, p));
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new Error('the proof has fewer hashes than a tree of this size needs');
  return r;
}

// C2SP signed note: the text (ending in "\n"), a blank line, then "— <name> base64(hint ‖ sig)" lines.
function parseNote(note) {
  if (typeof note !== 'string') throw new Error('there is no checkpoint');
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new Error('the checkpoint has no blank line before its signatures');
  const noteText = note.slice(0, split + 1);
  const sigs = note.slice(split + 2);
  if (!sigs.endsWith('\n')) throw new Error('the checkpoint does not end with a newline');
  const lines = noteText.split('\n');
  if (lines.length < 4 || !lines[0]) throw new Error('the checkpoint has no origin, size and root lines');
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new Error(`the checkpoint size ${quote(lines[1])} is not a decimal number`);
  const root = fromBase64(lines[2], 'the checkpoint root hash');
  if (root.length !== 32) throw new Error('the checkpoint root hash is not 32 bytes');
  const signatures = sigs.slice(0, -1).split('\n').map((line) => {
    if (!line.startsWith('\u2014 ')) throw new Error('a checkpoint signature line does not start with an em dash');
    const rest = line.slice(2);
    const space = rest.lastIndexOf(' ');
    if (space <= 0) throw new Error('a checkpoint signature line has no signature');
    const blob = fromBase64(rest.slice(space + 1), 'a checkpoint signature');
    if (blob.length < 5) throw new Error('a checkpoint signature is too short');
    return { name: rest.slice(0, space), hint: blob.subarray(0, 4), sig: blob.subarray(4) };
  });
  return { text: noteText, origin: lines[0], size: BigInt(lines[1]), root, signatures };
}

// WebCrypto wants ECDSA signatures as r ‖ s, each padded to the field size; logs write DER.
function ecdsaDerToRaw(sig, size) {
  const parts = derChildren(derExpect(derWhole(sig), 0x30, 'ECDSA signature'));
  if (parts.length !== 2) derFail('an ECDSA signature holds two integers');
  return concat(...parts.map((p) => {
    let b = derContent(derExpect(p, 0x02, 'ECDSA integer'));
    while (b.length > 1 && b[0] === 0) b = b.subarray(1);
    if (b.length > size) derFail('ECDSA integer too large');
    return concat(new Uint8Array(size - b.length), b);
  }));
}

// The log's public key (GET /api/v1/log/publicKey[?treeID=]), imported for verification.
const logKeys = new Map();
function logKey(treeId) {
  const path = '/api/v1/log/publicKey' + (treeId ? `?treeID=${encodeURIComponent(treeId)}` : '');
  if (!logKeys.has(path)) {
    const loading = importLogKey(path);
    loading.catch(() => logKeys.delete(path)); // retry on the next click
    logKeys.set(path, loading);
  }
  return logKeys.get(path);
}

async function importLogKey(path) {
  const pem = await (await api(path, { headers: { Accept: 'application/x-pem-file' } })).text();
  const block = parsePem(pem);
  if (!block || block.label !== 'PUBLIC KEY') throw new Error(`${path} did not answer with a PEM public key`);
  const spki = derSpki(derWhole(block.der));
  let importAlg;
  let verifyAlg;
  let sigSize = 0;
  if (spki.type === 'ec' && (spki.curve === 'P-256' || spki.curve === 'P-384')) {
    importAlg = { name: 'ECDSA', namedCurve: spki.curve };
    verifyAlg = { name: 'ECDSA', hash: spki.curve === 'P-256' ? 'SHA-256' : 'SHA-384' };
    sigSize = spki.curve === 'P-256' ? 32 : 48;
  } else if (spki.type === 'ed25519') {
    importAlg = verifyAlg = { name: 'Ed25519' };
  } else if (spki.type === 'rsa') {
    importAlg = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    verifyAlg = { name: 'RSASSA-PKCS1-v1_5' };
  } else {
    throw new Error(`the log key is ${spki.name}, which the explorer cannot verify`);
  }
  let key;
  try {
    key = await crypto.subtle.importKey('spki', block.der, importAlg, false, ['verify']);
  } catch (e) {
    throw new Error(`this browser's WebCrypto cannot import the ${spki.name} log key (${e.message})`);
  }
  const raw = spki.type === 'ed25519' ? block.der.subarray(block.der.length - 32) : null;
  return { key, spki, der: block.der, raw, verifyAlg, sigSize };
}

// The key hint of a signature line: SHA-256(SPKI)[:4] for ECDSA and RSA (as Rekor does), and the
// C2SP key ID SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4] for Ed25519.
async function keyHint(k, name) {
  const id = k.raw ? await sha256(concat(utf8.encode(name), [0x0a, 0x01], k.raw)) : await sha256(k.der);
  return id.subarray(0, 4);
}

// Verifies the entry on show. Each check appends {ok, text}; the verdict is the first failure.
async function verifyEntry(uuid, entry) {
  const checks = [];
  const check = (ok, good, bad) => {
    checks.push({ ok, text: ok ? good : bad });
    return ok;
  };
  const p = entry.verification?.inclusionProof;
  if (!p || typeof p !== 'object') {
    check(false, '', 'the entry has no inclusion proof');
    return checks;
  }

  // RFC 6962 leaf hash; the UUID's last 64 hex are the leaf hash, so they must agree.
  const leaf = await sha256(concat([0], fromBase64(entry.body, 'the entry body')));
  const uuidLeaf = uuid.slice(-64).toLowerCase();
  check(toHex(leaf) === uuidLeaf,
    `leaf hash SHA-256(0x00 ‖ body) = ${toHex(leaf)} matches the entry UUID`,
    `the leaf hash SHA-256(0x00 ‖ body) = ${toHex(leaf)} does not match the entry UUID (…${uuidLeaf})`);

  let computed = null;
  try {
    if (!Number.isSafeInteger(p.logIndex) || !Number.isSafeInteger(p.treeSize)) throw new Error('logIndex and treeSize must be whole numbers');
    if (!Array.isArray(p.hashes) || p.hashes.length > 64) throw new Error('hashes must be a list of at most 64 hashes');
    const path = p.hashes.map((h, i) => {
      const b = fromHex(h, `hashes[${i}]`);
      if (b.length !== 32) throw new Error(`hashes[${i}] is not 32 bytes`);
      return b;
    });
    computed = await rootFromInclusionProof(BigInt(p.logIndex), BigInt(p.treeSize), leaf, path);
  } catch (e) {
    check(false, '', `the inclusion proof is malformed: ${e.message}`);
  }
  if (computed) {
    check(toHex(computed) === String(p.rootHash).toLowerCase(),
      `the root recomputed from the leaf and ${p.hashes.length} proof hash${p.hashes.length === 1 ? '' : 'es'} (index ${p.logIndex}, tree size ${p.treeSize}) equals the proof's root hash ${toHex(computed)}`,
      `the root recomputed from the leaf and the proof hashes, ${toHex(computed)}, does not match the proof's root hash ${p.rootHash}`);
  }

  let cp;
  try {
    cp = parseNote(p.checkpoint);
  } catch (e) {
    check(false, '', `the checkpoint is malformed: ${e.message}`);
    return checks;
  }
  check(cp.size === BigInt(p.treeSize), `the checkpoint is for tree size ${cp.size}, as the proof is`,
    `the checkpoint is for tree size ${cp.size}, but the proof is for ${p.treeSize}`);
  if (computed) {
    check(equalBytes(computed, cp.root), 'the recomputed root equals the checkpoint\'s root hash',
      `the recomputed root ${toHex(computed)} does not match the checkpoint's root hash ${toHex(cp.root)}`);
  }

  let k;
  try {
    k = await logKey(treeIdOf(uuid));
  } catch (e) {
    check(false, '', `the log's public key could not be fetched: ${e.message}`);
    return checks;
  }
  const mine = [];
  for (const s of cp.signatures) {
    if (equalBytes(s.hint, await keyHint(k, s.name))) mine.push(s);
  }
  if (mine.length === 0) {
    check(false, '', `the checkpoint carries no signature by the log's ${k.spki.name} key`);
    return checks;
  }
  for (const s of mine) {
    let ok = false;
    let why = 'does not verify';
    try {
      const sig = k.sigSize ? ecdsaDerToRaw(s.sig, k.sigSize) : s.sig;
      ok = await crypto.subtle.verify(k.verifyAlg, k.key, sig, utf8.encode(cp.text));
    } catch (e) {
      why = `is malformed (${e.message})`;
    }
    check(ok, `the checkpoint signature by "${s.name}" verifies with the log's ${k.spki.name} key`,
      `the checkpoint signature by "${s.name}" ${why} with the log's ${k.spki.name} key`);
  }
  return checks;
}

async function verifyCurrent() {
  const shown = current;
  if (!shown) return;
  resetVerify();
  const result = $('verify-result');
  $('verify').disabled = true;
  result.textContent = 'Verifying…';
  let checks;
  try {
    checks = await verifyEntry(shown.uuid, shown.entry);
  } catch (e) {
    checks = [{ ok: false, text: `verification could not run: ${e.message}` }];
  }
  if (current !== shown) return; // another entry is on show now
  $('verify').disabled = false;
  const failed = checks.find((c) => !c.ok);
  result.className = 'verify-result ' + (failed ? 'bad' : 'ok');
  result.textContent = failed
    ? `FAILED: ${failed.text}`
    : `Inclusion verified: entry ${shown.entry.logIndex} is in the tree of size ${shown.entry.verification.inclusionProof.treeSize}, and the checkpoint is signed by the log's key.`;
  $('verify-checks').replaceChildren(...checks.map((c) => el('li', { class: c.ok ? 'ok' : 'bad' }, c.text)));
}

// ---------------------------------------------------------------------------------------------
// The log, its shards, the TUF targets and the lab reports

function shardRow(s, state) {
  return [mono(String(s.treeID)), nowrap(state), nowrap(String(s.treeSize)), mono(String(s.rootHash))];
}

async function loadLog() {
  let info;
  try {
    ({ json: info } = await getJson('/api/v1/log'));
  } catch (e) {
    $('log-info').replaceChildren(el('p', { class: 'error' }, `The log state could not be read: ${e.message}`));
    $('shards').replaceChildren();
    return;
  }
  $('log-info').replaceChildren(kvTable([
    ['Tree size', String(info.treeSize)],
    ['Root hash', mono(String(info.rootHash))],
    ['Tree ID', mono(String(info.treeID))],
  ]), el('h3', null, 'Latest checkpoint'), el('pre', { class: 'checkpoint' }, String(info.signedTreeHead || '(none)')));
  const inactive = Array.isArray(info.inactiveShards) ? info.inactiveShards : [];
  $('shards').replaceChildren(
    gridTable(['Tree ID', 'State', 'Size', 'Root hash'],
      [shardRow(info, 'active'), ...inactive.map((s) => shardRow(s, 'frozen'))]),
    note(inactive.length ? `${inactive.length + 1} shards; frozen ones newest first.` : 'One shard.'));
}

// TUF metadata: timestamp.json names the snapshot version, the snapshot the targets version
// (consistent snapshots: <version>.<role>.json).
async function loadTuf() {
  const box = $('tuf-targets');
  let timestamp;
  try {
    ({ json: timestamp } = await getJson('/tuf/timestamp.json'));
  } catch (e) {
    box.replaceChildren(e.status === 404 ? note('TUF repository disabled') : el('p', { class: 'error' }, `TUF timestamp: ${e.message}`));
    return;
  }
  try {
    const version = (meta, role) => {
      const v = meta?.[role]?.version;
      if (!Number.isSafeInteger(v) || v < 1) throw new Error(`no version for ${role}`);
      return v;
    };
    const snapshotVersion = version(timestamp?.signed?.meta, 'snapshot.json');
    const { json: snapshot } = await getJson(`/tuf/${snapshotVersion}.snapshot.json`);
    const targetsVersion = version(snapshot?.signed?.meta, 'targets.json');
    const { json: targets } = await getJson(`/tuf/${targetsVersion}.targets.json`);
    const list = Object.entries(targets?.signed?.targets || {});
    const rows = list.map(([name, t]) => {
      const sha = t?.hashes?.sha256;
      const href = typeof sha === 'string' && /^[0-9a-f]{64}$/.test(sha)
        ? `/tuf/targets/${sha}.${name.split('/').map(encodeURIComponent).join('/')}` : null;
      return [href ? el('a', { href }, name) : name, nowrap(String(t?.length ?? '?')), mono(String(sha ?? '?'))];
    });
    box.replaceChildren(
      note(`targets v${targetsVersion} (snapshot v${snapshotVersion}), expires ${targets?.signed?.expires ?? '?'}`),
      rows.length ? gridTable(['Target', 'Length', 'SHA-256'], rows) : note('No targets.'));
  } catch (e) {
    box.replaceChildren(el('p', { class: 'error' }, `The TUF targets could not be read: ${e.message}`));
  }
}

async function loadReports() {
  const box = $('reports');
  let list;
  try {
    ({ json: list } = await getJson('/ui/reports.json'));
  } catch (e) {
    box.replaceChildren(note(e.status === 404 ? 'No reports.' : `Reports could not be listed: ${e.message}`));
    return;
  }
  // Only the server's own report pages are linked.
  const reports = (Array.isArray(list) ? list : []).filter((r) =>
    r && typeof r.name === 'string' && typeof r.url === 'string' && /^\/ui\/reports\/[A-Za-z0-9._-]+$/.test(r.url));
  box.replaceChildren(reports.length
    ? el('ul', { class: 'values' }, reports.map((r) => el('li', null, el('a', { href: r.url, target: '_blank', rel: 'noopener' }, r.name))))
    : note('No reports.'));
}

// ---------------------------------------------------------------------------------------------

function init() {
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    runSearch($('q').value);
  });
  $('verify').addEventListener('click', () => { verifyCurrent(); });
  loadLog();
  loadTuf();
  loadReports();
  // A shared link (/ui?q=...) runs its search.
  const q = new URLSearchParams(location.search).get('q');
  if (q) {
    $('q').value = q;
    runSearch(q);
  }
}

init();
})();
