// tracer test marks for Node test runners (docs/report.md, "Which test").
// A mark is written with write(2) to an fd that can never be open (above
// the kernel's nr_open ceiling): it fails with EBADF, here and always, and
// tracer's write hook — when tracer runs — sees the bytes, the thread and
// the time. Without tracer it costs one failing syscall.
//
// writeSync, never fs.write: an async write runs on a libuv pool thread,
// and the mark must come from the test's own thread (a worker thread in
// vitest's threads pool), in order with its kill() and spawn().
'use strict';
const fs = require('fs');

const MARK_FD = 0x7ffffff0;
const PREFIX = 'tracer-test-mark/1 ';
const MAX = 512;

// mark('begin' | 'end', { runner, worker, file, name, phase })
function mark(ev, t) {
  let text = PREFIX + JSON.stringify({
    ev,
    runner: t.runner,
    worker: t.worker === undefined ? undefined : String(t.worker),
    file: t.file,
    name: t.name,
    phase: t.phase,
  });
  if (Buffer.byteLength(text) > MAX) text = text.slice(0, MAX);
  try {
    fs.writeSync(MARK_FD, text);
  } catch (e) {
    if (e.code !== 'EBADF') throw e;
  }
}

module.exports = { mark, MARK_FD };
