// The README's runnable blocks type-check under the SDK's own strict
// settings against this build's declarations, as a newcomer's strict
// TypeScript project would compile them (the integration suite runs them).

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const pkg = new URL("../../../", import.meta.url); // dist/test/unit → sdk/typescript

describe("README", () => {
  it("every block marked runnable type-checks (strict, noUncheckedIndexedAccess)", () => {
    const readme = readFileSync(new URL("README.md", pkg), "utf8");
    const re = /<!-- sdk test runs this: (\S+) -->\s*\n```ts\n([\s\S]*?)\n```/g;
    const dir = fileURLToPath(new URL("dist/readme-check/", pkg));
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files: string[] = [];
    for (const m of readme.matchAll(re)) {
      const file = `${dir}${m[1]}.ts`;
      writeFileSync(file, m[2] ?? "");
      files.push(file);
    }
    assert.ok(files.length >= 8, `${files.length} runnable blocks`);
    const program = ts.createProgram(files, {
      strict: true,
      noUncheckedIndexedAccess: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
      types: ["node"],
      skipLibCheck: true,
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file
        ? `${d.file.fileName.slice(dir.length)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}`
        : "";
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
    });
    assert.deepEqual(problems, []);
  });
});
