#!/usr/bin/env python3
"""A local stand-in for a GitLab runner (shell executor): enough of it to run
the jobs of ci/gitlab/example.gitlab-ci.yml, and the templates it includes
from ci/gitlab/tracer.gitlab-ci.yml, the way GitLab would, so ci/test/e2e.sh
tests the YAML itself and not a copy of its commands.

As GitLab does: `include: local:` files merged in; `extends` resolved (maps
merged key by key, anything else replaced, the job's own keys last);
`!reference [job, key]` tags; variables (the pipeline's, then the job's, then
--var ones, which stand for project CI/CD variables and win) expanded
($VAR, ${VAR}) in variables and in artifacts paths; before_script and script
run as one bash script (`set -eo pipefail`), after_script in a second one
whose failure does not fail the job; the job's artifacts checked: every
`paths` entry and `reports` file must exist when the job ends, and an
`expose_as` job's paths must be literal (no variables) with directories
ending in /.

--dump-merged FILE writes the pipeline with includes, extends and
!reference resolved, for schema validation of what GitLab would run.

The result (each job's status, exit codes and artifact check) is written as
JSON to --result.
"""
import argparse
import copy
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

JOB_TIMEOUT = 900
RESERVED = {
    "default", "include", "stages", "variables", "workflow", "image",
    "services", "cache", "before_script", "after_script",
}


class Reference:
    def __init__(self, path):
        self.path = path


class Loader(yaml.SafeLoader):
    pass


Loader.add_constructor(
    "!reference", lambda loader, node: Reference(loader.construct_sequence(node))
)


def load(path):
    with open(path) as f:
        return yaml.load(f, Loader=Loader) or {}


def merge(base, over):
    """GitLab's extends merge: maps deep-merged, other values replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def load_pipeline(path, root):
    doc = load(path)
    includes = doc.pop("include", []) or []
    if isinstance(includes, (str, dict)):
        includes = [includes]
    merged = {}
    for inc in includes:
        local = inc if isinstance(inc, str) else inc.get("local")
        if not local:
            raise ValueError(f"only local includes are supported here: {inc}")
        merged = merge(merged, load_pipeline(os.path.join(root, local.lstrip("/")), root))
    return merge(merged, doc)


def resolve_extends(config, name, seen=()):
    job = config[name]
    parents = job.get("extends", [])
    if isinstance(parents, str):
        parents = [parents]
    if name in seen:
        raise ValueError(f"extends loop through {name}")
    out = {}
    for parent in parents:
        out = merge(out, resolve_extends(config, parent, seen + (name,)))
    own = {k: v for k, v in job.items() if k != "extends"}
    return merge(out, own)


def resolve_references(config, value):
    if isinstance(value, Reference):
        target = config
        for part in value.path:
            target = target[part]
        return resolve_references(config, target)
    if isinstance(value, list):
        out = []
        for item in value:
            r = resolve_references(config, item)
            # A referenced list inside a script list is spliced in.
            if isinstance(item, Reference) and isinstance(r, list):
                out.extend(r)
            else:
                out.append(r)
        return out
    if isinstance(value, dict):
        return {k: resolve_references(config, v) for k, v in value.items()}
    return value


def resolved(config):
    """Every job with extends and !reference resolved (hidden ones too)."""
    with_refs = {}
    for name in config:
        if isinstance(config[name], dict) and name not in RESERVED:
            with_refs[name] = resolve_extends(config, name)
        else:
            with_refs[name] = config[name]
    return {k: resolve_references(with_refs, v) for k, v in with_refs.items()}


VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(text, env, depth=0):
    if depth > 10:
        return text
    out = VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)
    return expand(out, env, depth + 1) if VAR.search(out) else out


def job_env(config, name, job, project_dir, extra):
    env = dict(os.environ)
    job_id = str(abs(hash(name)) % 100000 + 1)
    env.update(
        {
            "CI": "true",
            "GITLAB_CI": "true",
            "CI_JOB_NAME": name,
            "CI_JOB_ID": job_id,
            "CI_PROJECT_DIR": project_dir,
            "CI_BUILDS_DIR": os.path.dirname(project_dir),
            "CI_PROJECT_URL": "https://gitlab.invalid/group/project",
            "CI_JOB_URL": f"https://gitlab.invalid/group/project/-/jobs/{job_id}",
        }
    )
    raw = {}
    for scope in (config.get("variables") or {}, job.get("variables") or {}):
        for k, v in scope.items():
            raw[k] = v["value"] if isinstance(v, dict) else str(v)
    raw.update(extra)
    # Expanded against the final set: a variable may name one set later.
    lookup = dict(env)
    lookup.update(raw)
    for k, v in raw.items():
        env[k] = expand(v, lookup)
    return env


def as_script(lines):
    if lines is None:
        return []
    return [lines] if isinstance(lines, str) else list(lines)


def run_script(lines, env, cwd, label):
    body = "set -eo pipefail\n" + "".join(
        # GitLab echoes each line before it runs it.
        f"printf '%s\\n' {shlex.quote('$ ' + line)}\n{line}\n" for line in lines
    )
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False, dir=cwd) as f:
        f.write(body)
        path = f.name
    print(f"--- [{label}]", flush=True)
    try:
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", path],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=JOB_TIMEOUT,
        )
        return proc.returncode
    except subprocess.TimeoutExpired:
        return 124
    finally:
        os.unlink(path)


def check_artifacts(job, project_dir, env):
    problems = []
    art = job.get("artifacts") or {}
    paths = art.get("paths") or []
    if art.get("expose_as"):
        for p in paths:
            if "$" in p:
                problems.append(f"expose_as: path {p} uses a variable")
            if p.startswith("./"):
                problems.append(f"expose_as: path {p} starts with ./")
            if os.path.isdir(os.path.join(project_dir, p)) and not p.endswith("/"):
                problems.append(f"expose_as: directory {p} lacks its trailing /")
    for p in paths:
        if not glob.glob(os.path.join(project_dir, expand(p, env))):
            problems.append(f"artifacts:paths {p} matched nothing")
    for kind, files in (art.get("reports") or {}).items():
        for f in [files] if isinstance(files, str) else files:
            if not os.path.isfile(os.path.join(project_dir, expand(f, env))):
                problems.append(f"artifacts:reports:{kind} {f} is missing")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipeline", required=True)
    p.add_argument("--root", required=True, help="where `include: local:` paths start")
    p.add_argument("--job", action="append", default=None)
    p.add_argument("--var", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--substitute", action="append", default=[], metavar="OLD=NEW",
                   help="replace text in the jobs' script lines")
    p.add_argument("--work", help="directory for the jobs' project directories")
    p.add_argument("--result")
    p.add_argument("--dump-merged")
    args = p.parse_args()

    config = resolved(load_pipeline(args.pipeline, args.root))
    if args.dump_merged:
        with open(args.dump_merged, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
    if not args.work:
        return
    extra = dict(v.split("=", 1) for v in args.var)
    subs = [s.split("=", 1) for s in args.substitute]
    jobs = args.job or [
        k for k, v in config.items()
        if isinstance(v, dict) and k not in RESERVED and not k.startswith(".")
    ]
    results = {}
    for name in jobs:
        job = config[name]
        project_dir = tempfile.mkdtemp(prefix=f"{name}-", dir=args.work)
        env = job_env(config, name, job, project_dir, extra)

        def lines(key):
            out = []
            for line in as_script(job.get(key)):
                for old, new in subs:
                    line = line.replace(old, new)
                out.append(line)
            return out

        code = run_script(lines("before_script") + lines("script"), env, project_dir,
                          f"{name}: before_script + script")
        after = run_script(lines("after_script"), env, project_dir, f"{name}: after_script")
        problems = check_artifacts(job, project_dir, env)
        for problem in problems:
            print(f"[{name}] {problem}", file=sys.stderr)
        results[name] = {
            "status": "success" if code == 0 else "failed",
            "script_exit": code,
            "after_script_exit": after,
            "artifact_problems": problems,
            "project_dir": project_dir,
        }
        print(f"[{name}] {results[name]['status']} (script exit {code})", flush=True)
    with open(args.result, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
