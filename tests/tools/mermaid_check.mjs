// Parse Mermaid diagrams with the real mermaid package (no browser needed).
//
//   node tests/tools/mermaid_check.mjs [--dump] FILE...      (FILE may be "-" for stdin)
//
// A FILE ending in .md is scanned for ```mermaid fenced blocks; any other file is one
// diagram. Each diagram goes through mermaid.parse() and then through the state
// diagram's own data extraction (what the layout step consumes), so errors raised after
// parsing are caught too. Exit status: 0 all valid, 1 some diagram invalid, 2 usage or
// setup error (mermaid not installed: run tests/tools/install_mermaid_check.sh).
//
// --dump prints one JSON object per diagram: {file, index, ok, error, type, nodes, edges}
// with the nodes and edges Mermaid would lay out (id, parentId, label, shape, classes).
//
//   node tests/tools/mermaid_check.mjs --serve
//
// --serve loads node, jsdom and mermaid once (about a second of CPU) and then answers
// requests until stdin closes: each line in is a JSON array of FILEs, each line out a JSON
// object {code, results, stderr}: the exit status, the --dump objects and what stderr
// would say for those files (the tests keep one such process per pytest worker).
//
// The packages are looked up in $MERMAID_CHECK_DIR (default: <repo>/.cache/mermaid-check).

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const cacheDir = resolve(process.env.MERMAID_CHECK_DIR || join(here, "..", "..", ".cache", "mermaid-check"));

function fail(message) {
  process.stderr.write(`mermaid_check: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const serve = args.includes("--serve");
const dump = args.includes("--dump");
const files = args.filter((a) => a !== "--dump" && a !== "--serve");
if (files.length === 0 && !serve) fail("usage: mermaid_check.mjs [--dump] FILE... | --serve");

let JSDOM, mermaid;
try {
  const require = createRequire(join(cacheDir, "package.json"));
  ({ JSDOM } = require("jsdom"));
  const pkgDir = dirname(require.resolve("mermaid/package.json"));
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  const entry = pkg.exports["."].import ?? pkg.module;
  const dom = new JSDOM("<!doctype html><html><body></body></html>");
  globalThis.window = dom.window;
  globalThis.document = dom.window.document;
  ({ default: mermaid } = await import(pathToFileURL(join(pkgDir, entry)).href));
} catch (err) {
  fail(`cannot load mermaid/jsdom from ${cacheDir}: ${err.message}\n` +
       "install them with tests/tools/install_mermaid_check.sh");
}
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
// mermaid.parse() registers the diagram types on its first call, then applies a diagram's
// directives and builds it with getDiagramFromText, the call below that returns the
// diagram itself. One parse() here registers them; each diagram is then built once, not
// twice (our diagrams carry no directives). A third of the checker's time.
await mermaid.parse("stateDiagram-v2\n  a --> b");

function diagramsIn(file) {
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  if (!file.endsWith(".md")) return [text];
  const out = [];
  const fence = /^```mermaid[ \t]*\n([\s\S]*?)^```[ \t]*$/gm;
  for (const m of text.matchAll(fence)) out.push(m[1]);
  return out;
}

function plain(value) {
  if (Array.isArray(value)) return value.map(String);
  return value === undefined || value === null ? null : String(value);
}

class Unreadable extends Error {}

// Check the diagrams in `paths`: the number that failed, a --dump object for each
// diagram, and the lines stderr gets. A file that cannot be read throws Unreadable.
async function check(paths) {
  let bad = 0;
  const results = [];
  const errors = [];
  for (const file of paths) {
    let diagrams;
    try {
      diagrams = diagramsIn(file);
    } catch (err) {
      throw new Unreadable(`cannot read ${file}: ${err.message}`);
    }
    if (file.endsWith(".md") && diagrams.length === 0) {
      bad++;
      errors.push(`${file}: no \`\`\`mermaid block found`);
      continue;
    }
    for (const [index, source] of diagrams.entries()) {
      const result = { file, index, ok: true, error: null, type: null, nodes: [], edges: [] };
      try {
        const diagram = await mermaid.mermaidAPI.getDiagramFromText(source);
        result.type = diagram.type;
        const db = diagram.db;
        if (typeof db.extract === "function" && typeof db.getRootDocV2 === "function") {
          db.extract(db.getRootDocV2());
          const data = db.getData();
          result.nodes = data.nodes.map((n) => ({
            id: n.id, parentId: n.parentId ?? null, label: plain(n.label), shape: n.shape,
            isGroup: Boolean(n.isGroup), classes: (n.cssClasses ?? "").split(/\s+/).filter(Boolean),
          }));
          result.edges = data.edges.map((e) => ({ start: e.start, end: e.end, label: e.label ?? "" }));
        }
      } catch (err) {
        bad++;
        result.ok = false;
        result.error = String(err?.message ?? err);
        errors.push(`${file}${diagrams.length > 1 ? `#${index}` : ""}: ${result.error}`);
      }
      results.push(result);
    }
  }
  return { bad, results, errors };
}

if (serve) {
  const { createInterface } = await import("node:readline");
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    let reply;
    try {
      const { bad, results, errors } = await check(JSON.parse(line));
      reply = { code: bad ? 1 : 0, results, stderr: errors.map((e) => `${e}\n`).join("") };
    } catch (err) {
      reply = { code: 2, results: [], stderr: `mermaid_check: ${err.message}\n` };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  }
  process.exit(0);
}

let outcome;
try {
  outcome = await check(files);
} catch (err) {
  if (err instanceof Unreadable) fail(err.message);
  throw err;
}
for (const line of outcome.errors) process.stderr.write(`${line}\n`);
if (dump) for (const result of outcome.results) process.stdout.write(JSON.stringify(result) + "\n");
process.exit(outcome.bad ? 1 : 0);
