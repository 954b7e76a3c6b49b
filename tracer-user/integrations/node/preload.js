// tracer test marks for Node test runners: vitest, jest, node:test, mocha and
// Playwright Test (docs/report.md, "Which test"). One file, three ways in:
//
//   NODE_OPTIONS="--require /path/preload.js"   (what `tracer record --tests` sets)
//   vitest:  test: { setupFiles: ['/path/preload.js'] }
//   jest:    setupFilesAfterEnv: ['/path/preload.js']
//
// In every test's own thread it declares the test's begin and end with a
// mark: write(2) to an fd that can never be open (above nr_open's ceiling),
// failing with EBADF always, while tracer's write hook, when tracer runs,
// sees the bytes, the thread and the time: the kernel's, not the payload's.
//
// Rules this file keeps:
// - it never breaks a suite: every hook it adds runs the runner's own code
//   unchanged and swallows its own errors;
// - in a node process that runs no tests (npm, a build tool, a test's own
//   child) it reads 3 variables, argv, execArgv (under node --test: /proc);
// - a mark is one failing syscall (no exception built, see `send`), from
//   the test's thread (writeSync semantics: never a libuv pool thread).
'use strict';

// eslint-disable-next-line no-unused-expressions
(function tracerNodeMarks() {
  // One registry per realm and process, whatever the copies of this file
  // (the preload, a setup file a runner loads again for every test file).
  const DONE = Symbol.for('tracer.node-marks/1');

  const MARK_FD = 0x7ffffff0;
  const PREFIX = 'tracer-test-mark/1 ';
  // The kernel side copies at most this many bytes of a mark
  // (tracer_common::MARK_LEN): a longer mark would be cut into bad JSON.
  const MAX = 512;

  let fs = null;
  try {
    fs = require('fs');
  } catch (e) {
    // no fs: no marks
  }

  // --- the mark writer ------------------------------------------------------

  // fs.writeSync throws for EBADF, and that exception's stack trace is most
  // of a mark's cost: 16 µs of CPU per mark in Node 20, 7.6 µs with no frame
  // (100,000 marks each, process.cpuUsage). The fs binding's context-object
  // form would save 3.5 µs more through an internal API: not taken.
  function send(buf) {
    if (!fs) return;
    let limit;
    let set = false;
    try {
      limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      set = true;
    } catch (e) {
      set = false;
    }
    try {
      fs.writeSync(MARK_FD, buf);
    } catch (e) {
      // EBADF, always: nothing is ever open there.
    }
    if (set) {
      try {
        Error.stackTraceLimit = limit;
      } catch (e) {
        // frozen intrinsics: it was never changed
      }
    }
  }

  function clip(s, n) {
    if (typeof s !== 'string') return undefined;
    return s.length > n ? s.slice(0, n) : s;
  }

  // mark('begin' | 'end', { runner, worker, file, name, phase }). The text
  // is made to fit MAX as JSON: the name, then the file, are cut (the same
  // way for a begin and its end, so the two still match).
  function mark(ev, t) {
    try {
      let name = clip(String(t.name), 400);
      let file = clip(t.file, 200);
      for (let i = 0; i < 8; i++) {
        const text = PREFIX + JSON.stringify({
          ev,
          runner: t.runner,
          worker: t.worker === undefined || t.worker === null ? undefined : String(t.worker),
          file,
          name,
          phase: t.phase,
        });
        const buf = Buffer.from(text);
        if (buf.length <= MAX) {
          send(buf);
          return;
        }
        if (name.length > 16) name = name.slice(0, name.length >> 1);
        else if (file && file.length > 16) file = file.slice(0, file.length >> 1);
        else return;
      }
    } catch (e) {
      // never the test's problem
    }
  }

  // What the integration could do in this process, said once: a `status`
  // mark with the way it took (`seam`), or why it names no test (`why`).
  // The report lists each, so a runner or version it cannot label reads
  // "vitest 5.0: test names not available: why", never silent nothing.
  const said = new Set();
  function status(runner, fields) {
    if (said.has(runner)) return;
    said.add(runner);
    try {
      const o = Object.assign({ ev: 'status', runner }, fields);
      let buf = Buffer.from(PREFIX + JSON.stringify(o));
      // Cut a field's text, never the JSON (a cut object says nothing).
      for (const k of ['why', 'seam', 'version']) {
        if (buf.length <= MAX) break;
        if (typeof o[k] === 'string') o[k] = o[k].slice(0, 64);
        buf = Buffer.from(PREFIX + JSON.stringify(o));
      }
      if (buf.length <= MAX) send(buf);
    } catch (e) {
      // never the test's problem
    }
  }

  // The version in the package.json of the first `node_modules/<name>`
  // from `dir` up: what the status mark says of the runner.
  function versionFrom(dir, name) {
    try {
      const path = require('path');
      let d = dir;
      for (let i = 0; d && i < 32; i++) {
        const f = path.join(d, 'node_modules', name, 'package.json');
        if (fs.existsSync(f)) return String(JSON.parse(fs.readFileSync(f, 'utf8')).version);
        const up = path.dirname(d);
        if (up === d) break;
        d = up;
      }
    } catch (e) {
      // no version: said as unknown
    }
    return undefined;
  }
  function packageVersion(pkgDir) {
    try {
      return String(JSON.parse(fs.readFileSync(require('path').join(pkgDir, 'package.json'), 'utf8')).version);
    } catch (e) {
      return undefined;
    }
  }

  function relative(p) {
    if (typeof p !== 'string') return undefined;
    try {
      const r = require('path').relative(process.cwd(), p);
      return r && !r.startsWith('..') ? r : p;
    } catch (e) {
      return p;
    }
  }

  // --- vitest ---------------------------------------------------------------

  // vitest's runner keeps the task it runs in its worker state
  // (`globalThis.__vitest_worker__.current`): the test from onBeforeRunTask
  // (before its beforeEach hooks) until onAfterRunTask (after its afterEach
  // hooks), a suite or the file otherwise, on the worker's own thread
  // (tested on 3.2; the 0.x to 3.x sources set it the same way). Watching
  // that one assignment needs nothing of the project's config. A test is
  // over once its result left "run" (a concurrent one keeps its window
  // while another begins). vitest gives no hook between a test's
  // beforeEach hooks and its body, so its marks carry no phase.
  function vitestName(t) {
    const parts = [String(t.name)];
    let s = t.suite;
    for (let i = 0; s && s !== t.file && !s.filepath && i < 64; i++) {
      if (s.name) parts.unshift(String(s.name));
      s = s.suite;
    }
    return parts.join(' > ');
  }
  function vitestTest(t) {
    return {
      runner: 'vitest',
      worker: process.env.VITEST_POOL_ID,
      file: t.file && typeof t.file.name === 'string' ? t.file.name : undefined,
      name: vitestName(t),
    };
  }
  function finished(r) {
    return r && r.state !== 'run' && r.state !== 'queued';
  }
  function vitestState(state, seam) {
    if (!state || typeof state !== 'object' || state[DONE]) return;
    const desc = Object.getOwnPropertyDescriptor(state, 'current');
    if (desc && (!desc.configurable || desc.get || desc.set)) return;
    Object.defineProperty(state, DONE, { value: true });
    status('vitest', {
      worker: process.env.VITEST_POOL_ID,
      version: versionFrom(process.cwd(), 'vitest'),
      seam,
    });
    let current = state.current;
    // Open windows: test -> its result object when it began (runTest gives
    // the test a new one right after onBeforeRunTask).
    const open = new Map();
    function moved(v) {
      for (const [t, atBegin] of open) {
        if (v === undefined || (t.result !== atBegin && finished(t.result))) {
          open.delete(t);
          mark('end', t[DONE]);
        }
      }
      if (v && typeof v === 'object' && v.type === 'test' && !open.has(v)) {
        open.set(v, v.result);
        // The name as it began, for its end.
        Object.defineProperty(v, DONE, { value: vitestTest(v), configurable: true });
        mark('begin', v[DONE]);
      }
    }
    Object.defineProperty(state, 'current', {
      configurable: true,
      enumerable: desc ? desc.enumerable : true,
      get() {
        return current;
      },
      set(v) {
        current = v;
        try {
          moved(v);
        } catch (e) {
          // never the test's problem
        }
      },
    });
  }
  // The worker state appears as vitest starts a file: by defineProperty
  // (1.x to 5.x: it replaces an accessor uncalled) or a plain assignment
  // (0.x). Two globals vitest assigns plainly after it, before the first
  // test, are the next ways: `__vitest_environment__` (0.x to 3.x) and
  // `__vitest_required__` (1.x to 5.x; read in the sources of 1.6, 2.1,
  // 3.2, 4.1, 5.1). The first setter to run watches the state; the status mark
  // says which, and a worker that ends with none seen says so (on 'exit').
  // The watch is an accessor on the global's prototype: the vm pools copy
  // every own global into their context as a getter without a setter, and
  // vitest's own assignment then threw (4.1 vmForks: "Cannot assign to read
  // only property '__vitest_required__'"). An assignment on the global
  // still reaches the prototype's setter; a defineProperty shadows it.
  function watchGlobal(key, onSet) {
    const proto = Object.getPrototypeOf(globalThis);
    if (!proto || proto === Object.prototype) return;
    if (Object.getOwnPropertyDescriptor(globalThis, key)) return;
    if (Object.getOwnPropertyDescriptor(proto, key)) return;
    let value;
    Object.defineProperty(proto, key, {
      configurable: true,
      enumerable: false,
      get() {
        return value;
      },
      set(v) {
        value = v;
        try {
          onSet(v);
        } catch (e) {
          // never the test's problem
        }
      },
    });
  }
  function vitestWorkerProcess() {
    try {
      if (!require('worker_threads').isMainThread) return true;
    } catch (e) {
      // no worker_threads: a process, then
    }
    const flags = (process.execArgv || []).join(' ');
    const main = String((process.argv && process.argv[1]) || '');
    return (
      /vitest[\\/]suppress-warnings\.cjs/.test(flags) ||
      /vitest[\\/]dist[\\/]workers[\\/]|tinypool[\\/]dist[\\/]entry[\\/]/.test(main)
    );
  }
  function vitestWorker() {
    watchGlobal('__vitest_worker__', (v) => vitestState(v, 'worker state assigned'));
    watchGlobal('__vitest_environment__', () =>
      vitestState(globalThis.__vitest_worker__, '__vitest_environment__'),
    );
    watchGlobal('__vitest_required__', () =>
      vitestState(globalThis.__vitest_worker__, '__vitest_required__'),
    );
    // Only a worker says why it named nothing: a worker thread, or a
    // process vitest started with its own flags or entry (1.x-3.x: a
    // tinypool entry; 4.x: dist/workers/*.js). A test's own node child
    // inherits VITEST too, and is none.
    if (!vitestWorkerProcess()) return;
    // The vm pools run vitest with --experimental-vm-modules (1.x-4.x; 4.x
    // also names the entry vmForks.js/vmThreads.js): said at once, since
    // their workers end without an 'exit' event the preload sees
    // (measured, 4.1 vmForks).
    const flags = (process.execArgv || []).join(' ');
    const main = String((process.argv && process.argv[1]) || '');
    if (/--experimental-vm-modules/.test(flags) || /[\\/]vm(Forks|Threads)\.js$/.test(main)) {
      status('vitest', {
        version: versionFrom(process.cwd(), 'vitest'),
        why: 'vmThreads/vmForks run tests in a vm context the preload does not reach; use the setupFiles line',
      });
      return;
    }
    process.on('exit', () => {
      if (process.env.VITEST_POOL_ID === undefined) return;
      status('vitest', {
        worker: process.env.VITEST_POOL_ID,
        version: versionFrom(process.cwd(), 'vitest'),
        why: 'no known seam reached the worker state; use the setupFiles line',
      });
    });
  }

  // --- module loads ---------------------------------------------------------

  // One hook on `Module._load` per process, for the runners whose seam is a
  // module they load (jest's adapter, mocha's Mocha class, Playwright's
  // globals): each watcher sees every request made in a process it was
  // registered in and returns what the requester gets (the module's own
  // exports, or a wrapper of them). A watcher's error changes nothing.
  const watchers = [];
  function watchLoads(watcher) {
    watchers.push(watcher);
    const Module = require('module');
    const load = Module._load;
    if (typeof load !== 'function' || load[DONE]) return;
    const hooked = function _load(request, parent) {
      let exp = load.apply(this, arguments);
      for (const w of watchers) {
        try {
          exp = w(request, parent, exp);
        } catch (e) {
          // never the test's problem
        }
      }
      return exp;
    };
    Object.defineProperty(hooked, DONE, { value: true });
    Module._load = hooked;
  }

  // --- jest -----------------------------------------------------------------

  // jest-circus dispatches every test's events to the environment's
  // handleTestEvent, on the thread that runs the test: the setup phase (its
  // beforeEach hooks), the call (its body), the teardown (its afterEach
  // hooks). A window is opened only for a phase that happens: hooks open
  // setup and teardown, the body opens call.
  function jestName(test) {
    const parts = [String(test.name)];
    let p = test.parent;
    // The root describe block (the one with no parent) has no user name.
    for (let i = 0; p && p.parent && i < 64; i++) {
      parts.unshift(String(p.name));
      p = p.parent;
    }
    return parts.join(' > ');
  }
  // `testPath`: the test file, or a function that finds it (a setup file
  // learns it only once the tests run).
  function jestHandler(testPath) {
    const file = typeof testPath === 'function' ? testPath : relative(testPath);
    // test -> [phase, its mark]
    const open = new Map();
    function to(test, phase) {
      if (!test || typeof test !== 'object') return;
      const was = open.get(test);
      if (was && was[0] === phase) return;
      if (was) {
        open.delete(test);
        mark('end', was[1]);
      }
      if (phase) {
        const t = {
          runner: 'jest',
          worker: process.env.JEST_WORKER_ID,
          file: typeof file === 'function' ? file() : file,
          name: jestName(test),
          phase,
        };
        open.set(test, [phase, t]);
        mark('begin', t);
      }
    }
    return function tracerTestEvent(event, state) {
      try {
        switch (event && event.name) {
          case 'hook_start': {
            const test = state && state.currentlyRunningTest;
            const type = event.hook && event.hook.type;
            if (!test) break;
            if (type === 'beforeEach' && !open.has(test)) to(test, 'setup');
            else if (type === 'afterEach') to(test, 'teardown');
            break;
          }
          case 'test_fn_start':
            to(event.test, 'call');
            break;
          case 'test_fn_success':
          case 'test_fn_failure':
          case 'test_done':
          case 'test_skip':
            to(event.test, null);
            break;
          case 'run_finish':
          case 'teardown':
            for (const test of [...open.keys()]) to(test, null);
            break;
          default:
        }
      } catch (e) {
        // never the test's problem
      }
    };
  }
  // Preload: the test framework's adapter, jest-circus/runner, which
  // jest-runner requires in each worker and calls once per test file with
  // the file's environment; the handler is given to that environment before
  // jest-circus reads it.
  function jestEnvironment(environment, testPath) {
    if (!environment || typeof environment !== 'object') return;
    const handler = jestHandler(testPath);
    const own = environment.handleTestEvent;
    environment.handleTestEvent = function handleTestEvent(event, state) {
      handler(event, state);
      if (typeof own === 'function') return own.apply(this, arguments);
      return undefined;
    };
    // A setup-file copy of this file in the test's realm stands down.
    try {
      if (environment.global) Object.defineProperty(environment.global, DONE, { value: true });
    } catch (e) {
      // never the test's problem
    }
  }
  // jest-runner calls the adapter once per test file; it requires it by
  // path and takes `.default` when the module has one. Its export has had
  // two shapes: the function itself (jest 27 to 29, `module.exports =
  // require(…).default`) and `{ default }` (jest 30). Either way the
  // wrapped adapter is what jest-runner gets; any other shape is said in
  // the status mark and changes nothing.
  const wrappedAdapters = new WeakMap();
  function wrapAdapter(adapter) {
    if (adapter[DONE]) return adapter;
    let wrapped = wrappedAdapters.get(adapter);
    if (wrapped) return wrapped;
    wrapped = function jestAdapter(globalConfig, config, environment, runtime, testPath) {
      try {
        jestEnvironment(environment, testPath);
      } catch (e) {
        // never the test's problem
      }
      return adapter.apply(this, arguments);
    };
    Object.defineProperty(wrapped, DONE, { value: true });
    wrappedAdapters.set(adapter, wrapped);
    return wrapped;
  }
  function wrapJestAdapter(exp, version) {
    if (typeof exp === 'function') {
      status('jest', { worker: process.env.JEST_WORKER_ID, version, seam: 'jest-circus/runner (function)' });
      return wrapAdapter(exp);
    }
    if (exp && typeof exp.default === 'function') {
      status('jest', { worker: process.env.JEST_WORKER_ID, version, seam: 'jest-circus/runner (default)' });
      exp.default = wrapAdapter(exp.default);
      return exp;
    }
    status('jest', {
      worker: process.env.JEST_WORKER_ID,
      version,
      why: 'jest-circus/runner exports neither a function nor { default }; use the setupFilesAfterEnv line',
    });
    return exp;
  }
  const ADAPTER = /jest-circus[\\/](build[\\/])?runner(\.js)?$/;
  const JASMINE = /jest-jasmine2([\\/]build[\\/]index(\.js)?)?$/;
  function jestLoaded(request, parent, exp) {
    if (typeof request !== 'string') return exp;
    if (ADAPTER.test(request)) {
      let version;
      try {
        // `<jest-circus>/runner.js` or `<jest-circus>/build/runner.js`;
        // jest-circus's version is jest's.
        const path = require('path');
        const dir = path.dirname(require('module')._resolveFilename(request, parent));
        version = packageVersion(path.basename(dir) === 'build' ? path.dirname(dir) : dir);
      } catch (e) {
        version = undefined;
      }
      return wrapJestAdapter(exp, version);
    }
    if (JASMINE.test(request)) {
      status('jest', {
        worker: process.env.JEST_WORKER_ID,
        why: 'the jest-jasmine2 runner is not covered (jest-circus, the default since jest 27, is)',
      });
    }
    return exp;
  }

  // Setup file: jest-circus's handlers are on the test realm's global.
  function jestSetupFile() {
    const handlers = globalThis[Symbol.for('EVENT_HANDLERS')];
    if (!Array.isArray(handlers) || globalThis[DONE]) return;
    Object.defineProperty(globalThis, DONE, { value: true });
    status('jest', {
      worker: process.env.JEST_WORKER_ID,
      version: versionFrom(process.cwd(), 'jest-circus'),
      seam: 'setupFilesAfterEnv',
    });
    const path = () => {
      try {
        return relative(globalThis.expect.getState().testPath);
      } catch (e) {
        return undefined;
      }
    };
    handlers.push(jestHandler(path));
  }

  // --- mocha ----------------------------------------------------------------

  // mocha runs the tests in the process its CLI runs in (serial), or, with
  // `--parallel`, in workerpool's child processes (lib/nodejs/worker.js,
  // worker.cjs in 12; MOCHA_WORKER_ID in their environment), one Runner
  // per file. The Runner's events are mocha's documented way to watch
  // tests (what a reporter subscribes to); the preload reaches the Runner class as
  // `Mocha.Runner` (documented) when mocha's CLI or worker first requires
  // lib/mocha.js (lib/mocha.cjs in 12), and subscribes each Runner that
  // runs tests as its `run` starts (the main process's parallel runner
  // overrides `run` and runs none). Tested on 10.8.2, 11.8.0 and 12.0.3;
  // the sources of 8.x and 9.x have the same events and methods.
  //
  // mocha 12 is an ES module package ("type": "module": bin/mocha.js,
  // lib/cli/cli.js, lib/runner.js are ESM), but the Mocha class stays a
  // CommonJS file, lib/mocha.cjs (`module.exports = Mocha`, its "legacy
  // CJS-style require() export"), which requires lib/runner.js (Node's
  // require of an ES module, 20.19+ and 22.12+, as mocha 12's engines
  // ask). Node's ESM loader hands a CommonJS file to Module._load
  // (measured: Node 20.20, 22.23, 24.22, 26.12), and lib/cli/run.cjs and
  // lib/nodejs/worker.cjs require it: the same load the preload already
  // watches, only named .cjs; the same documented `Mocha.Runner` and
  // Runner events, measured on 12.0.3 serial and --parallel. Chosen over the alternatives as the least fragile:
  // - module.register (Node's documented customization hooks) runs its
  //   hooks on a loader thread of their own, for every module of the run
  //   (every runner's, the suite's own), and they see URLs and source
  //   text, never a module's exports: reaching `Runner` from there means
  //   rewriting mocha's source, and a load hook that returns a CommonJS
  //   file's source has its requires go through the ESM loader (Node's
  //   docs): more moving parts, each able to change how the suite loads;
  // - root hooks (a root beforeEach/afterEach, `this.currentTest`) need
  //   the bdd globals mocha hands out at `pre-require`, an event of the
  //   same Mocha instance's suite: reached only through the same load,
  //   and they add hooks to the user's suite (run by mocha, with its
  //   timeouts, reported as the suite's own if they fail), where listening
  //   to events adds nothing the suite runs.
  //
  // A test's window, on the thread that runs it, from the events alone:
  // its `"before each" hook`s (setup), its body (call: from the `test`
  // event, and from the end of each beforeEach hook, to `test end`), its
  // `"after each" hook`s (teardown). Nothing of the runner is replaced (a
  // wrapped method would show in a failing test's stack).
  function mochaName(test) {
    try {
      if (typeof test.titlePath === 'function') {
        const p = test.titlePath();
        if (Array.isArray(p) && p.length) return p.map(String).join(' > ');
      }
    } catch (e) {
      // the title, then
    }
    return typeof test.fullTitle === 'function' ? String(test.fullTitle()) : String(test.title);
  }
  function mochaHook(hook) {
    const title = String((hook && (hook.originalTitle || hook.title)) || '');
    if (title.startsWith('"before each" hook')) return 'setup';
    if (title.startsWith('"after each" hook')) return 'teardown';
    return null;
  }
  function mochaListen(runner, Runner, version) {
    const ev = Object.assign(
      { EVENT_TEST_BEGIN: 'test', EVENT_TEST_END: 'test end', EVENT_HOOK_BEGIN: 'hook' },
      { EVENT_HOOK_END: 'hook end', EVENT_SUITE_END: 'suite end', EVENT_RUN_END: 'end' },
      Runner.constants || {},
    );
    status('mocha', { worker: process.env.MOCHA_WORKER_ID, version, seam: 'Runner events' });
    let current = null;
    let open = null; // [test, phase, its mark]
    function to(test, phase) {
      if (open && test && open[0] === test && open[1] === phase) return;
      if (open) {
        mark('end', open[2]);
        open = null;
      }
      if (!test) return;
      const t = {
        runner: 'mocha',
        worker: process.env.MOCHA_WORKER_ID,
        file: relative(test.file),
        name: mochaName(test),
        phase,
      };
      open = [test, phase, t];
      mark('begin', t);
    }
    const on = (name, f) =>
      runner.on(name, function tracerMochaEvent(x) {
        try {
          f(x);
        } catch (e) {
          // never the test's problem
        }
      });
    const over = () => {
      current = null;
      to(null);
    };
    on(ev.EVENT_TEST_BEGIN, (test) => {
      current = test;
      to(test, 'call');
    });
    on(ev.EVENT_HOOK_BEGIN, (hook) => {
      const phase = mochaHook(hook);
      if (phase && current) to(current, phase);
      else over();
    });
    on(ev.EVENT_HOOK_END, (hook) => {
      const phase = mochaHook(hook);
      if (phase === 'setup' && current) to(current, 'call');
      else if (phase === 'teardown') to(null);
    });
    on(ev.EVENT_TEST_END, () => to(null));
    on(ev.EVENT_SUITE_END, over);
    on(ev.EVENT_RUN_END, over);
  }
  let mochaSeen = false;
  function mochaRunner(Runner, version) {
    const proto = Runner.prototype;
    if (!proto || typeof proto.run !== 'function' || typeof proto.on !== 'function') {
      return status('mocha', {
        worker: process.env.MOCHA_WORKER_ID,
        version,
        why: 'Mocha.Runner has no run and on methods here: a shape the preload does not know',
      });
    }
    if (proto.run[DONE]) return undefined;
    const run = proto.run;
    const wrapped = function run_(fn, opts) {
      try {
        if (!this[DONE]) {
          Object.defineProperty(this, DONE, { value: true });
          mochaListen(this, Runner, version);
        }
      } catch (e) {
        // never the test's problem
      }
      return run.apply(this, arguments);
    };
    Object.defineProperty(wrapped, DONE, { value: true });
    proto.run = wrapped;
    return undefined;
  }
  // `Mocha` is the export of lib/mocha.js (lib/mocha.cjs in 12; an
  // ES module importing it asks for its absolute path): a function with
  // `Runner`.
  function mochaLoaded(request, parent, exp) {
    if (mochaSeen || typeof exp !== 'function' || typeof exp.Runner !== 'function') return exp;
    if (typeof request !== 'string' || !/(^|[\\/])mocha(\.c?js)?$/.test(request)) return exp;
    mochaSeen = true;
    let version;
    try {
      const path = require('path');
      // lib/mocha.js, or the package's index.js
      const dir = path.dirname(require('module')._resolveFilename(request, parent));
      version = packageVersion(path.basename(dir) === 'lib' ? path.dirname(dir) : dir);
    } catch (e) {
      version = undefined;
    }
    mochaRunner(exp.Runner, version);
    return exp;
  }
  function looksLikeMocha() {
    if (process.env.MOCHA_WORKER_ID !== undefined) return true;
    const main = String((process.argv && process.argv[1]) || '');
    return /[\\/]mocha[\\/](bin[\\/](_mocha|mocha(\.js)?)|lib[\\/](cli[\\/]cli|nodejs[\\/]worker)\.c?js)$|[\\/]\.bin[\\/]_?mocha$/.test(
      main,
    );
  }
  function mochaWorker() {
    watchLoads(mochaLoaded);
    // A mocha that never required its Runner through require (an ES
    // module build, a bundle) names no test: said once, as the process
    // ends, by a process that ran tests or would have (not bin/mocha.js
    // when it only spawned the CLI in a child with node's flags).
    process.on('exit', () => {
      if (mochaSeen) return;
      status('mocha', {
        worker: process.env.MOCHA_WORKER_ID,
        version: versionFrom(process.cwd(), 'mocha'),
        why: "mocha's Runner was not reached: lib/mocha.js (or .cjs) was not loaded through require",
      });
    });
  }

  // --- Playwright Test --------------------------------------------------------

  // `playwright test` runs the tests in worker processes it forks
  // (playwright/lib/worker/workerProcessEntry.js in 1.65), which set
  // TEST_WORKER_INDEX and TEST_PARALLEL_INDEX in their own environment as
  // they start. Its documented extension points (reporters, fixtures, a
  // global setup) run in the main process or need the project's config,
  // so the preload takes an internal seam: the worker declares each test
  // to the module lib/globals.js, `setCurrentTestInfo(testInfo)` before
  // the test's hooks and fixtures and `setCurrentTestInfo(null)` after
  // them, on the worker's thread. Its exports are getters (esbuild's), so
  // the requester gets a copy of them whose `setCurrentTestInfo` marks,
  // then calls Playwright's own. The name is `testInfo.titlePath` after
  // the file (`describe > test`), the file `testInfo.file`, the worker
  // TEST_WORKER_INDEX; no phase (no hook tells the test's hooks from its
  // body without a fixture). A worker where the seam is not found says so
  // as it exits.
  let pwSeen = false;
  const pwWrapped = new WeakMap();
  function pwTest(info) {
    const path = Array.isArray(info.titlePath) ? info.titlePath.map(String) : [String(info.title)];
    const file = typeof info.file === 'string' ? relative(info.file) : undefined;
    // titlePath: the file (relative to the test dir), then the describes
    // and the title.
    const at = path.findIndex((p) => p && file && (file === p || file.endsWith(`/${p}`) || p.endsWith(file)));
    return {
      runner: 'playwright',
      worker: process.env.TEST_WORKER_INDEX,
      file,
      name: (at >= 0 ? path.slice(at + 1) : path.filter(Boolean)).join(' > '),
    };
  }
  function pwGlobals(exp, version) {
    if (!exp || typeof exp !== 'object') return exp;
    const done = pwWrapped.get(exp);
    if (done) return done;
    const set = exp.setCurrentTestInfo;
    if (typeof set !== 'function') {
      status('playwright', { version, why: 'lib/globals.js has no setCurrentTestInfo: a layout the preload does not know' });
      return exp;
    }
    let open = null;
    function setCurrentTestInfo(info) {
      try {
        // Said at the first test: the worker sets its index after it
        // loads lib/globals.js.
        status('playwright', { worker: process.env.TEST_WORKER_INDEX, version, seam: 'setCurrentTestInfo (lib/globals.js)' });
        if (open) mark('end', open);
        open = null;
        if (info && typeof info === 'object') {
          open = pwTest(info);
          mark('begin', open);
        }
      } catch (e) {
        // never the test's problem
      }
      return set.apply(this, arguments);
    }
    const copy = {};
    for (const key of Object.getOwnPropertyNames(exp)) {
      if (key === 'setCurrentTestInfo') {
        Object.defineProperty(copy, key, { value: setCurrentTestInfo, enumerable: true });
      } else {
        Object.defineProperty(copy, key, { get: () => exp[key], enumerable: true });
      }
    }
    pwWrapped.set(exp, copy);
    return copy;
  }
  function pwLoaded(request, parent, exp) {
    if (typeof request !== 'string' || !/(^|[\\/])globals(\.js)?$/.test(request)) return exp;
    const path = require('path');
    const file = require('module')._resolveFilename(request, parent);
    if (!/[\\/]playwright[\\/]lib[\\/]globals\.js$/.test(file)) return exp;
    pwSeen = true;
    return pwGlobals(exp, packageVersion(path.dirname(path.dirname(file))));
  }
  function looksLikePlaywrightWorker() {
    const main = String((process.argv && process.argv[1]) || '');
    return /[\\/]playwright[\\/]lib[\\/](worker[\\/]workerProcessEntry|common[\\/]process)\.js$/.test(main);
  }
  function playwrightWorker() {
    watchLoads(pwLoaded);
    process.on('exit', () => {
      if (pwSeen || process.env.TEST_WORKER_INDEX === undefined) return;
      status('playwright', {
        worker: process.env.TEST_WORKER_INDEX,
        version: versionFrom(process.cwd(), 'playwright'),
        why: "Playwright's lib/globals.js was not reached: a layout the preload does not know",
      });
    });
  }

  // --- node:test ------------------------------------------------------------

  // `node --test` runs each file in a child with NODE_TEST_CONTEXT set, where
  // root beforeEach/afterEach hooks (node:test's public API) mark each test,
  // around its own hooks, on its thread: `t.fullName` (`suite > test`, Node
  // 20.20) else `t.name`, the file `t.filePath` (not in 20.20) else argv[1];
  // no phase, no worker id. A test's own node child inherits the variable,
  // and hooks there start a harness writing to its stdout (measured, Node
  // 20): a process whose parent has the variable too is left alone.
  function testFileProcess() {
    const up = (f) => fs.readFileSync(`/proc/${process.ppid}/${f}`, 'latin1');
    try {
      return !`\0${up('environ')}`.includes('\0NODE_TEST_CONTEXT=');
    } catch (e) {
      // unreadable: is the parent `node --test`?
    }
    try {
      return up('cmdline').split('\0').includes('--test');
    } catch (e) {
      return false;
    }
  }
  function nodeTestWorker() {
    if (!fs || !testFileProcess()) return;
    const version = process.versions.node;
    const file = relative(process.argv[1]);
    const hook = (ev) => (t) => {
      try {
        const name = typeof t.fullName === 'string' && t.fullName ? t.fullName : String(t.name);
        const f = typeof t.filePath === 'string' ? relative(t.filePath) : file;
        mark(ev, { runner: 'node:test', file: f, name });
      } catch (e) {
        // never the test's problem
      }
    };
    try {
      const test = require('node:test');
      if (typeof test.beforeEach !== 'function' || typeof test.afterEach !== 'function') {
        return status('node:test', { version, why: 'node:test has no root beforeEach/afterEach here' });
      }
      test.beforeEach(hook('begin'));
      test.afterEach(hook('end'));
    } catch (e) {
      return status('node:test', { version, why: `root hooks not registered: ${e && e.message}` });
    }
    status('node:test', { version, seam: 'root beforeEach/afterEach hooks' });
  }
  // `--test-isolation=none` (Node 22.8+; not in 20, the version tested).
  function nodeTestRunner() {
    const flags = process.execArgv || [];
    if (!flags.includes('--test') || !flags.some((f) => /^--(experimental-)?test-isolation=none$/.test(f))) return;
    const why = '--test-isolation=none runs the tests in the runner process, which the preload does not hook';
    status('node:test', { version: process.versions.node, why });
  }

  // --- which process this is ------------------------------------------------

  function looksLikeJest() {
    if (process.env.JEST_WORKER_ID !== undefined) return true;
    // jest in band runs its tests in its own process.
    const main = String((process.argv && process.argv[1]) || '');
    return /(^|[\\/])jest(\.js)?$|[\\/]jest[\\/]bin[\\/]|[\\/]jest-cli[\\/]/.test(main);
  }

  try {
    if (globalThis.__vitest_worker__) {
      // A vitest setup file.
      vitestState(globalThis.__vitest_worker__, 'setupFiles');
    } else if (Array.isArray(globalThis[Symbol.for('EVENT_HANDLERS')])) {
      // A jest setup file.
      jestSetupFile();
    } else if (!globalThis[DONE]) {
      // The preload, in every node process and worker thread.
      Object.defineProperty(globalThis, DONE, { value: true });
      if (process.env.VITEST !== undefined) vitestWorker();
      if (looksLikeJest()) watchLoads(jestLoaded);
      if (looksLikeMocha()) mochaWorker();
      if (looksLikePlaywrightWorker()) playwrightWorker();
      if (process.env.NODE_TEST_CONTEXT !== undefined) nodeTestWorker();
      else nodeTestRunner();
    }
  } catch (e) {
    // never the suite's problem
  }

  if (typeof module === 'object' && module && typeof module.exports === 'object') {
    module.exports = { mark, MARK_FD };
  }
})();
