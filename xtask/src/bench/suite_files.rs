//! The generated part of the bench's runner suites (`suites`): test files
//! of the kind a project's unit suite holds, the same work in each runner's
//! idiom. Each file's tests hash (CPU in the runner's worker), write and
//! read back a few files in the run's `SUITE_DIR` (file I/O), shell out
//! once (`sh -c`, a fork and exec, one line to stderr: what a test calling
//! git or a CLI does) and log a warning to stderr (the runner's own
//! output path). No sleeps: the runner's work, not the clock, sets the time.

/// A jest test file, number `i` (globals `test`, `expect`; CommonJS).
pub(crate) fn jest(i: usize) -> String {
    format!("{JS_REQUIRE}{}", js_tests(i))
}

/// A vitest test file, number `i` (ES module, `test` and `expect` imported).
pub(crate) fn vitest(i: usize) -> String {
    format!("{JS_IMPORT}{}", js_tests(i))
}

const JS_REQUIRE: &str = "\
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const { mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
";

const JS_IMPORT: &str = "\
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
";

fn js_tests(i: usize) -> String {
    format!(
        "
test('generated {i}: hashes a chain', () => {{
  let h = '{i}';
  for (let n = 0; n < 3000; n++) h = createHash('sha256').update(h + n).digest('hex');
  expect(h).toHaveLength(64);
}});

test('generated {i}: writes and reads files', () => {{
  const dir = mkdtempSync(join(process.env.SUITE_DIR, 'gen{i}-'));
  for (let n = 0; n < 20; n++) writeFileSync(join(dir, `f${{n}}.json`), JSON.stringify({{ n, i: {i} }}));
  let sum = 0;
  for (let n = 0; n < 20; n++) sum += JSON.parse(readFileSync(join(dir, `f${{n}}.json`), 'utf8')).n;
  rmSync(dir, {{ recursive: true }});
  expect(sum).toBe(190);
}});

test('generated {i}: shells out', () => {{
  const r = spawnSync('sh', ['-c', 'echo out {i}; echo warning {i} >&2'], {{ encoding: 'utf8' }});
  expect(r.status).toBe(0);
  expect(r.stdout.trim()).toBe('out {i}');
}});

test('generated {i}: logs a warning', () => {{
  console.error('generated {i}: a deprecation warning');
  expect([3, 1, 2].sort()).toEqual([1, 2, 3]);
}});
"
    )
}

/// A pytest test file, number `i`.
pub(crate) fn pytest(i: usize) -> String {
    format!(
        "import hashlib
import json
import os
import subprocess
import sys
import tempfile


def test_generated_{i}_hashes_a_chain():
    h = b\"{i}\"
    for n in range(3000):
        h = hashlib.sha256(h + str(n).encode()).hexdigest().encode()
    assert len(h) == 64


def test_generated_{i}_writes_and_reads_files():
    with tempfile.TemporaryDirectory(dir=os.environ[\"SUITE_DIR\"]) as d:
        for n in range(20):
            with open(os.path.join(d, f\"f{{n}}.json\"), \"w\") as f:
                json.dump({{\"n\": n, \"i\": {i}}}, f)
        total = 0
        for n in range(20):
            with open(os.path.join(d, f\"f{{n}}.json\")) as f:
                total += json.load(f)[\"n\"]
    assert total == 190


def test_generated_{i}_shells_out():
    r = subprocess.run([\"sh\", \"-c\", \"echo out {i}; echo warning {i} >&2\"], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.strip() == \"out {i}\"


def test_generated_{i}_logs_a_warning():
    print(\"generated {i}: a deprecation warning\", file=sys.stderr)
    assert sorted([3, 1, 2]) == [1, 2, 3]
"
    )
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// The generated files parse: `node --check` (CommonJS for jest; the
    /// vitest one as an ES module) and Python's compiler, where installed.
    #[test]
    fn generated_files_parse() {
        let dir = std::env::temp_dir().join(format!("bench-suite-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = [
            ("gen.test.js", jest(7), "node", vec!["--check"]),
            ("gen.test.mjs", vitest(7), "node", vec!["--check"]),
            (
                "test_gen.py",
                pytest(7),
                "python3",
                vec!["-m", "py_compile"],
            ),
        ];
        for (name, body, tool, args) in files {
            assert!(body.contains("generated 7") || body.contains("generated_7"));
            let path = dir.join(name);
            std::fs::write(&path, body).unwrap();
            match Command::new(tool).args(&args).arg(&path).output() {
                Ok(out) => assert!(
                    out.status.success(),
                    "{tool} {args:?} {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => eprintln!("{tool} not runnable ({e}): {name} not checked"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
