#!/usr/bin/env python3
"""A local stand-in for the GitHub Actions runner: just enough of it to run
ci/github/example-workflow.yml, and the composite action ci/github/action.yml
it calls, the way GitHub would, so ci/test/e2e.sh tests the YAML itself and
not a copy of its commands.

What it does as GitHub does: jobs in `needs` order, each with its own
RUNNER_TEMP and workspace; `run:` steps as `bash --noprofile --norc -eo
pipefail FILE`; `${{ }}` expressions (contexts inputs, steps, github, runner,
env; operators ! == != && || and parentheses; always() success() failure()
cancelled()); `if:`; composite actions (inputs with defaults, their own
steps and outputs, GITHUB_ACTION_PATH); the GITHUB_OUTPUT / GITHUB_ENV /
GITHUB_PATH / GITHUB_STEP_SUMMARY files; workflow commands (`::error ...`)
read from stdout. With --as-runner-worker the process names itself
Runner.Worker (as the real runner's worker is named), so a step's ancestry
looks like a runner's.

What it stands in for: actions/checkout (the workspace starts empty; steps
use absolute paths), actions/upload-artifact and actions/download-artifact
(a local directory of artifacts), actions/cache/restore and
actions/cache/save (a local directory of caches, by key). A job's
`strategy.matrix` (lists of values, no include/exclude) runs one leg per
combination, named `JOB (v1, v2)`, with the matrix and strategy contexts.
Any other `uses:` is an error.

--substitute OLD=NEW replaces text in the workflow's own `run:` scripts (not
the action's): the test swaps `make test` for its workload that way.

The result (each job's conclusion, steps, summary, annotations and log:
every step's stdout and stderr) is written as JSON to --result.
"""
import argparse
import ctypes
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import yaml

STEP_TIMEOUT = 900


# ---------------------------------------------------------------- expressions

TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>&&|\|\||==|!=|!|\(|\)|,)"
    r"|(?P<num>\d+(?:\.\d+)?)|(?P<id>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)*))"
)


def tokenize(text):
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse expression at: {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def truthy(v):
    return v not in (None, False, "", 0)


def as_text(v):
    if v is None:
        return ""
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


class Expr:
    """Recursive descent over the tokens; `ctx` maps context names to dicts,
    `status` answers the status functions."""

    def __init__(self, text, ctx, status):
        self.toks = tokenize(text)
        self.i = 0
        self.ctx = ctx
        self.status = status

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.toks):
            raise ValueError(f"trailing tokens: {self.toks[self.i:]}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek()[1] == "||":
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self):
        v = self.cmp()
        while self.peek()[1] == "&&":
            self.take()
            rhs = self.cmp()
            v = rhs if truthy(v) else v
        return v

    def cmp(self):
        v = self.unary()
        if self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            rhs = self.unary()
            # GitHub compares strings case-insensitively.
            a, b = (x.lower() if isinstance(x, str) else x for x in (v, rhs))
            v = (a == b) if op == "==" else (a != b)
        return v

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self):
        kind, val = self.take()
        if val == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "str":
            return val[1:-1].replace("''", "'")
        if kind == "num":
            return float(val) if "." in val else int(val)
        if kind != "id":
            raise ValueError(f"unexpected {val!r}")
        if val in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[val]
        if self.peek()[1] == "(":
            self.take("(")
            self.take(")")
            if val not in ("always", "success", "failure", "cancelled"):
                raise ValueError(f"function {val}() is not supported here")
            return self.status(val)
        head, *rest = val.split(".")
        v = self.ctx.get(head, {})
        for part in rest:
            v = v.get(part) if isinstance(v, dict) else None
        return v


def evaluate(text, ctx, status):
    return Expr(text, ctx, status).parse()


def interpolate(value, ctx, status):
    if not isinstance(value, str):
        return value
    return re.sub(
        r"\$\{\{(.*?)\}\}",
        lambda m: as_text(evaluate(m.group(1), ctx, status)),
        value,
    )


def condition(text, ctx, status):
    """An `if:` (with or without ${{ }}); success() when absent."""
    if text is None:
        return status("success")
    if isinstance(text, bool):
        return text
    text = text.strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    if m:
        text = m.group(1)
    # GitHub adds success() unless a status function is named.
    if not re.search(r"\b(always|success|failure|cancelled)\s*\(", text):
        return status("success") and truthy(evaluate(text, ctx, status))
    return truthy(evaluate(text, ctx, status))


# ---------------------------------------------------------------- env files


def read_kv_file(path):
    """KEY=VALUE lines and KEY<<DELIM heredocs, as GITHUB_OUTPUT/GITHUB_ENV."""
    out = {}
    if not os.path.exists(path):
        return out
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            body = []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            i += 1
            out[key] = "\n".join(body)
        else:
            key, _, val = line.partition("=")
            out[key] = val
    return out


# ---------------------------------------------------------------- the runner


class Job:
    def __init__(self, runner, name, spec, workdir, leg=None):
        self.runner = runner
        self.name = name
        self.spec = spec
        # (matrix values, job-index, job-total) of a matrix leg.
        self.matrix, self.index, self.total = leg or ({}, 0, 1)
        self.temp = os.path.join(workdir, "temp")
        self.workspace = os.path.join(workdir, "workspace")
        os.makedirs(self.temp)
        os.makedirs(self.workspace)
        self.files = os.path.join(workdir, "files")
        os.makedirs(self.files)
        self.env = dict(runner.base_env)
        if runner.user:
            for d in (workdir, self.temp, self.workspace, self.files):
                os.chown(d, runner.user.pw_uid, runner.user.pw_gid)
            self.env.update(
                {"HOME": runner.user.pw_dir, "USER": runner.user.pw_name,
                 "LOGNAME": runner.user.pw_name}
            )
        self.env.update(
            {
                "GITHUB_ACTIONS": "true",
                "CI": "true",
                "GITHUB_JOB": spec.get("__id", name),
                "GITHUB_RUN_ATTEMPT": runner.base_env.get("GITHUB_RUN_ATTEMPT", "1"),
                "GITHUB_WORKSPACE": self.workspace,
                "RUNNER_TEMP": self.temp,
                "RUNNER_OS": "Linux",
                "RUNNER_ARCH": "X64",
            }
        )
        for k, v in (runner.workflow.get("env") or {}).items():
            self.env[k] = str(v)
        self.paths = []
        self.summary = []
        self.annotations = []
        self.steps_log = []
        # Every variable a step wrote to GITHUB_ENV, for the checks (the
        # daemon form's start hands the test integrations on there).
        self.github_env = {}
        # The output of each shell step (stdout and stderr), in order: what
        # the job's log shows.
        self.logs = []
        self.counter = 0

    def github(self, action_path=None):
        g = {"job": self.spec.get("__id", self.name), "workspace": self.workspace,
             "action_path": action_path or "", "run_attempt": self.env["GITHUB_RUN_ATTEMPT"]}
        return g

    def run(self):
        ctx_steps = {}
        failed = [False]
        for k, v in (self.spec.get("env") or {}).items():
            self.env[k] = str(v)
        for i, step in enumerate(self.spec.get("steps") or []):
            self.step(step, ctx_steps, failed, scope=f"{i}", action_path=None, inputs={},
                      substitute=True)
        return "failure" if failed[0] else "success"

    def status(self, failed):
        return lambda fn: {
            "always": True,
            "success": not failed[0],
            "failure": failed[0],
            "cancelled": False,
        }[fn]

    def context(self, ctx_steps, inputs, action_path):
        return {
            "inputs": inputs,
            "steps": ctx_steps,
            "github": self.github(action_path),
            "runner": {"temp": self.temp, "os": "Linux", "arch": "X64"},
            "strategy": {"job-index": self.index, "job-total": self.total},
            "matrix": self.matrix,
            "env": dict(self.env),
        }

    def step(self, step, ctx_steps, failed, scope, action_path, inputs, substitute):
        status = self.status(failed)
        ctx = self.context(ctx_steps, inputs, action_path)
        sid = step.get("id") or f"__{scope}"
        label = step.get("name") or step.get("id") or step.get("uses") or step.get("run", "")[:40]
        record = {"job": self.name, "scope": scope, "id": step.get("id"), "name": label}
        if not condition(step.get("if"), ctx, status):
            record["outcome"] = "skipped"
            ctx_steps[sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            self.steps_log.append(record)
            return
        env = {k: as_text(interpolate(v, ctx, status)) for k, v in (step.get("env") or {}).items()}
        if "run" in step:
            script = step["run"]
            if substitute:
                for old, new in self.runner.substitutions:
                    script = script.replace(old, new)
            script = interpolate(script, ctx, status)
            ok, code, outputs = self.shell(script, env, action_path, label)
        elif "uses" in step:
            with_ = {k: as_text(interpolate(v, ctx, status)) for k, v in (step.get("with") or {}).items()}
            ok, code, outputs = self.uses(step["uses"], with_, env, scope, label)
        else:
            raise ValueError(f"step without run or uses: {step}")
        record.update({"outcome": "success" if ok else "failure", "exit_code": code})
        self.steps_log.append(record)
        ctx_steps[sid] = {
            "outputs": outputs,
            "outcome": "success" if ok else "failure",
            "conclusion": "success" if ok or step.get("continue-on-error") else "failure",
        }
        if not ok and not step.get("continue-on-error"):
            failed[0] = True

    def shell(self, script, step_env, action_path, label):
        self.counter += 1
        n = self.counter
        files = {k: os.path.join(self.files, f"{k.lower()}-{n}") for k in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        path = os.path.join(self.temp, f"step-{n}.sh")
        with open(path, "w") as f:
            f.write(script)
        for f in list(files.values()) + [path]:
            open(f, "a").close()
            if self.runner.user:
                os.chown(f, self.runner.user.pw_uid, self.runner.user.pw_gid)
        env = dict(self.env)
        env["PATH"] = os.pathsep.join(self.paths + [self.env.get("PATH", "")])
        env.update(files)
        if action_path:
            env["GITHUB_ACTION_PATH"] = action_path
        env.update(step_env)
        print(f"::group::[{self.name}] {label}", flush=True)
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", path],
            cwd=self.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            preexec_fn=self.runner.become_user,
        )
        # The job log holds both streams, as GitHub's does; workflow
        # commands are read from stdout only (what the scripts print them to).
        log = []

        def drain_stderr():
            for line in proc.stderr:
                sys.stderr.write(line)
                log.append(line)

        errs = threading.Thread(target=drain_stderr)
        errs.start()
        for line in proc.stdout:
            log.append(line)
            sys.stdout.write(line)
            m = re.match(r"::(error|warning|notice)(?: ([^:]*))?::(.*)", line.rstrip("\n"))
            if m:
                props = dict(
                    p.split("=", 1) for p in (m.group(2) or "").split(",") if "=" in p
                )
                self.annotations.append(
                    {"level": m.group(1), "properties": props, "message": m.group(3)}
                )
        try:
            code = proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        errs.join()
        self.logs.append("".join(log))
        sys.stdout.flush()
        print(f"::endgroup:: exit {code}", flush=True)
        outputs = read_kv_file(files["GITHUB_OUTPUT"])
        exported = read_kv_file(files["GITHUB_ENV"])
        self.env.update(exported)
        self.github_env.update(exported)
        added = [p for p in open(files["GITHUB_PATH"]).read().split("\n") if p]
        self.paths = list(reversed(added)) + self.paths
        summary = open(files["GITHUB_STEP_SUMMARY"]).read()
        if summary:
            self.summary.append(summary)
        return code == 0, code, outputs

    def uses(self, ref, with_, env, scope, label):
        name = ref.split("@", 1)[0]
        if ref in self.runner.actions:
            return self.composite(self.runner.actions[ref], with_, scope)
        if name == "actions/checkout":
            return True, 0, {}
        store = self.runner.artifacts
        if name == "actions/upload-artifact":
            src = with_["path"]
            src = src if os.path.isabs(src) else os.path.join(self.workspace, src)
            dest = os.path.join(store, with_["name"])
            if os.path.exists(dest):
                print(f"upload-artifact: an artifact named {with_['name']} exists already")
                return False, 1, {}
            if not os.path.exists(src):
                print(f"::warning::upload-artifact: no files at {src}")
                return with_.get("if-no-files-found", "warn") != "error", 0, {}
            if os.path.isdir(src):
                shutil.copytree(src, dest)
            else:
                os.makedirs(dest)
                shutil.copy2(src, dest)
            print(f"upload-artifact: {src} -> artifact {with_['name']}")
            return True, 0, {"artifact-id": "1", "artifact-url": "file://" + dest}
        if name == "actions/download-artifact":
            src = os.path.join(store, with_["name"])
            dest = with_.get("path") or self.workspace
            dest = dest if os.path.isabs(dest) else os.path.join(self.workspace, dest)
            if not os.path.isdir(src):
                print(f"download-artifact: no artifact named {with_['name']}")
                return False, 1, {}
            shutil.copytree(src, dest, dirs_exist_ok=True)
            # Artifacts keep no file modes; the job's user owns what it downloads.
            for root, dirs, names in os.walk(dest):
                for n in names:
                    os.chmod(os.path.join(root, n), 0o644)
                if self.runner.user:
                    for n in dirs + names + [""]:
                        os.chown(os.path.join(root, n), self.runner.user.pw_uid,
                                 self.runner.user.pw_gid)
            return True, 0, {"download-path": dest}
        if name in ("actions/cache/restore", "actions/cache/save"):
            key = with_["key"]
            if "/" in key or key.startswith("."):
                raise ValueError(f"cache key {key!r}")
            stored = os.path.join(self.runner.caches, key)
            path = with_["path"]
            if name.endswith("restore"):
                if not os.path.isdir(stored):
                    print(f"cache: no entry for {key}")
                    return True, 0, {"cache-hit": "false"}
                shutil.copytree(stored, path, dirs_exist_ok=True)
                if self.runner.user:
                    for root, dirs, names in os.walk(path):
                        for n in dirs + names + [""]:
                            os.chown(os.path.join(root, n), self.runner.user.pw_uid,
                                     self.runner.user.pw_gid)
                print(f"cache: restored {key} into {path}")
                return True, 0, {"cache-hit": "true", "cache-matched-key": key}
            if os.path.isdir(stored):
                print(f"cache: {key} exists already, not saved")
                return True, 0, {}
            shutil.copytree(path, stored)
            print(f"cache: saved {path} as {key}")
            return True, 0, {"cache-id": "1"}
        raise ValueError(f"no stand-in for `uses: {ref}`")

    def composite(self, action_dir, with_, scope):
        spec = yaml.safe_load(open(os.path.join(action_dir, "action.yml")))
        assert spec["runs"]["using"] == "composite", "only composite actions"
        outer_failed = [False]
        status = self.status(outer_failed)
        ctx = self.context({}, {}, action_dir)
        inputs = {}
        for key, meta in (spec.get("inputs") or {}).items():
            if key in with_:
                inputs[key] = with_[key]
            elif meta.get("required") and "default" not in meta:
                print(f"::error::input {key} is required")
                return False, 1, {}
            else:
                inputs[key] = as_text(interpolate(meta.get("default", ""), ctx, status))
        unknown = set(with_) - set(inputs)
        if unknown:
            print(f"::warning::unexpected inputs {sorted(unknown)}")
        steps, failed = {}, [False]
        for i, step in enumerate(spec["runs"]["steps"]):
            self.step(step, steps, failed, scope=f"{scope}.{i}", action_path=action_dir,
                      inputs=inputs, substitute=False)
        ctx = self.context(steps, inputs, action_dir)
        outputs = {
            k: as_text(interpolate(v.get("value", ""), ctx, self.status(failed)))
            for k, v in (spec.get("outputs") or {}).items()
        }
        return not failed[0], 1 if failed[0] else 0, outputs


class Runner:
    def __init__(self, args):
        self.workflow = yaml.safe_load(open(args.workflow))
        self.actions = dict(a.split("=", 1) for a in args.action)
        self.actions = {k: os.path.abspath(v) for k, v in self.actions.items()}
        self.substitutions = [s.split("=", 1) for s in args.substitute]
        self.work = os.path.abspath(args.work)
        self.artifacts = os.path.join(self.work, "artifacts")
        os.makedirs(self.artifacts, exist_ok=True)
        self.caches = os.path.join(self.work, "caches")
        os.makedirs(self.caches, exist_ok=True)
        # Steps run as this user (GitHub's hosted runners: `runner`, with
        # passwordless sudo); the stand-in itself stays root.
        self.user = pwd.getpwnam(args.user) if args.user else None
        self.base_env = dict(os.environ)
        for k in args.env:
            key, _, val = k.partition("=")
            self.base_env[key] = val

    def become_user(self):
        if self.user:
            os.setgid(self.user.pw_gid)
            os.initgroups(self.user.pw_name, self.user.pw_gid)
            os.setuid(self.user.pw_uid)

    def order(self, wanted):
        jobs = self.workflow["jobs"]
        done, out = set(), []

        def visit(name):
            if name in done:
                return
            needs = jobs[name].get("needs") or []
            for n in [needs] if isinstance(needs, str) else needs:
                if wanted is None:
                    visit(n)
            done.add(name)
            out.append(name)

        for name in wanted or jobs:
            visit(name)
        return out

    def legs(self, name, spec):
        """(name, leg) per matrix combination, or the job itself."""
        matrix = (spec.get("strategy") or {}).get("matrix")
        if not matrix:
            return [(name, None)]
        keys = list(matrix)
        if any(not isinstance(matrix[k], list) for k in keys):
            raise ValueError(f"job {name}: only a matrix of lists is supported")
        combos = [[]]
        for k in keys:
            combos = [c + [v] for c in combos for v in matrix[k]]
        return [(f"{name} ({', '.join(str(v) for v in c)})", (dict(zip(keys, c)), i, len(combos)))
                for i, c in enumerate(combos)]

    def run(self, wanted):
        results = {}
        legs = [(job_id, name, leg) for job_id in self.order(wanted)
                for name, leg in self.legs(job_id, self.workflow["jobs"][job_id])]
        for job_id, name, leg in legs:
            workdir = tempfile.mkdtemp(prefix=f"job-{job_id}-", dir=self.work)
            os.chmod(workdir, 0o755)
            spec = dict(self.workflow["jobs"][job_id], __id=job_id)
            job = Job(self, name, spec, workdir, leg)
            conclusion = job.run()
            results[name] = {
                "conclusion": conclusion,
                "steps": job.steps_log,
                "github_env": job.github_env,
                "summary": "".join(job.summary),
                "annotations": job.annotations,
                "log": "".join(job.logs),
                "workspace": job.workspace,
                "temp": job.temp,
            }
            print(f"[{name}] {conclusion}", flush=True)
        return results


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workflow", required=True)
    p.add_argument("--action", action="append", default=[], metavar="REF=DIR",
                   help="where a `uses:` reference's action.yml is")
    p.add_argument("--substitute", action="append", default=[], metavar="OLD=NEW")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--job", action="append", default=None,
                   help="run only these jobs (their needs are taken as done)")
    p.add_argument("--work", required=True, help="directory for workspaces and artifacts")
    p.add_argument("--result", required=True)
    p.add_argument("--as-runner-worker", action="store_true")
    p.add_argument("--user", help="run the steps as this user")
    args = p.parse_args()
    if args.as_runner_worker:
        # PR_SET_NAME: /proc/PID/comm, which daemon-start.sh's `job` scope reads.
        ctypes.CDLL(None).prctl(15, b"Runner.Worker", 0, 0, 0)
    results = Runner(args).run(args.job)
    with open(args.result, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
