#!/usr/bin/env python3
"""Lint and validate the CI integrations in ci/, offline. Run with the venv
ci/test/venv.sh makes (its tools are pinned in requirements.txt):

    VENV/bin/python ci/test/lint.py

What is checked, and against what:
- yamllint (ci/.yamllint.yml) on every YAML file under ci/ and
  .github/workflows/.
- check-jsonschema's bundled SchemaStore schemas: ci/github/action.yml
  against vendor.github-actions, the example workflow and this
  repository's own workflows (.github/workflows/: the release) against
  vendor.github-workflows, both GitLab files against vendor.gitlab-ci, and
  also the pipeline GitLab would run: the example with the template
  included, extends and !reference resolved (glci.py --dump-merged).
- kubernetes-validate --strict (the Kubernetes 1.37 OpenAPI schemas it
  bundles; unknown fields are errors) on ci/kubernetes/*.yaml, but for the
  Prometheus Operator's PodMonitor (a custom resource it has no schema for):
  that one is checked against the DaemonSet it scrapes (selector, port name,
  path, the --metrics-listen port) and for fields the CRD does not have.
  The NetworkPolicy is checked against the DaemonSet too (it selects its
  pods and admits named peers to the metrics port only), and every tracer
  container must have a memory request and limit.
- the Grafana dashboard: valid JSON, every panel on the dashboard's
  datasource variable, every metric its queries name documented in
  docs/metrics.md (tracer-user/tests/kernel/metrics.rs runs each query against a
  real Prometheus).
- shellcheck on every script under ci/, and on the shell embedded in the
  YAML: the action's and every workflow's `run:` steps, the GitLab jobs'
  script lines, the CI pod's container commands.
- the release workflow's shape: it runs on version tags only, reads by
  default (`permissions: contents: read`), and each job asks only for what
  its steps need (id-token and attestations where provenance is attested,
  packages where the image is pushed, contents: write where the release is
  made); every tarball is attested and uploaded with its .sha256.
- ci/release.env, the release every integration installs by default: the
  four keys, its version the workspace's, each checksum 64 hex digits, or
  `unpublished` / an empty one (no such build), listed as to fill in.
- ci/container/release.Containerfile: `scratch` only, copying exactly what
  release-context.sh puts in its context.
- the Containerfile, by reading it (there is no engine here to build it):
  each COPY --from names an earlier stage, each RUN'd script and COPY'd
  source exists, and .dockerignore keeps target/ out of the context.
- pins: every `uses:` (the action, the workflow, ci/README.md) names a full
  40-hex commit SHA with its release in a comment (`@<sha> # v4.2.2`), and
  every image (the Containerfile's FROM lines, the manifests' `image:`) a
  `@sha256:` digest. The tracer action of the user's own copy
  (`OWNER/tracer/...@<commit-sha>`) and image digests this repository cannot
  look up (`@sha256:<digest>`) are placeholders the user fills in: they are
  accepted in that exact form and listed, never silently.
- Canaries: one deliberately broken copy per validator must be rejected,
  so a validator that checks nothing cannot pass for one that works.

Exit status 0 when everything passes; every failure is printed.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CI = os.path.join(ROOT, "ci")
BIN = os.path.dirname(sys.executable)
sys.path.insert(0, os.path.dirname(__file__))
import glci  # noqa: E402

failures = []
passed = []


def tool(name):
    return os.path.join(BIN, name)


def run(label, cmd, expect_ok=True):
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    ok = (proc.returncode == 0) == expect_ok
    what = label if expect_ok else f"{label} (canary: must be rejected)"
    if ok:
        passed.append(what)
        print(f"ok    {what}")
    else:
        failures.append(what)
        print(f"FAIL  {what}\n{proc.stdout}{proc.stderr}")
    return proc


def rel(path):
    return os.path.relpath(path, ROOT)


def files(sub, *exts):
    out = []
    for base, _, names in os.walk(os.path.join(CI, sub)):
        out += [os.path.join(base, n) for n in sorted(names) if n.endswith(exts)]
    return sorted(out)


def dump(doc, tmp, name):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


def shellcheck(label, script, shell, tmp, n, expect_ok=True):
    path = os.path.join(tmp, f"snippet-{n}.sh")
    with open(path, "w") as f:
        f.write(f"#!/bin/{shell}\n{script}\n")
    return run(label, [tool("shellcheck"), "-s", shell, path], expect_ok)


def check_containerfile(path):
    problems = []
    stages, lines = [], open(path).read().splitlines()
    for line in lines:
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            stages.append(m.group(2))
            continue
        m = re.match(r"COPY\s+--from=(\S+)\s", line, re.I)
        if m and m.group(1) not in stages:
            problems.append(f"COPY --from={m.group(1)}: no earlier stage of that name")
        elif re.match(r"COPY\s+(?!--)", line, re.I):
            for src in line.split()[1:-1]:
                if not os.path.exists(os.path.join(ROOT, src)):
                    problems.append(f"COPY source {src} is not in the repository")
        m = re.match(r"RUN\s+(ci/\S+)", line, re.I)
        if m and not os.access(os.path.join(ROOT, m.group(1)), os.X_OK):
            problems.append(f"RUN {m.group(1)}: no such executable script")
    if len(stages) < 2:
        problems.append("expected a build stage and a runtime stage")
    ignore = os.path.join(ROOT, ".dockerignore")
    if not os.path.exists(ignore) or "target/" not in open(ignore).read().split():
        problems.append(".dockerignore does not keep target/ out of the build context")
    return problems


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)\s*(?:#\s*(.*))?$")
PINNED_ACTION = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}$")
RELEASE = re.compile(r"^v\d+(?:\.\d+)*$")
OWN_ACTION = "OWNER/tracer/ci/github@<commit-sha>"
PINNED_IMAGE = re.compile(r"^[\w./:-]+@sha256:(?:[0-9a-f]{64}|<digest>)$")


def check_uses(text):
    """Problems and placeholders among the `uses:` lines of a YAML or
    Markdown text (commented-out lines are prose)."""
    problems, placeholders = [], []
    for n, line in enumerate(text.splitlines(), 1):
        m = USES.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        ref, comment = m.group(1), (m.group(2) or "").strip()
        if ref.startswith("./") or ref == OWN_ACTION:
            if ref == OWN_ACTION:
                placeholders.append(f"line {n}: {ref}")
            continue
        if not PINNED_ACTION.match(ref):
            problems.append(f"line {n}: `uses: {ref}` is not pinned by a full commit SHA")
        elif not RELEASE.match(comment.split()[0] if comment else ""):
            problems.append(f"line {n}: `uses: {ref}` lacks its release in a comment (# v1.2.3)")
    return problems, placeholders


def check_images(images):
    problems, placeholders = [], []
    for where, image in images:
        if not PINNED_IMAGE.match(image):
            problems.append(f"{where}: image {image} is not pinned by a sha256 digest")
        elif image.endswith("@sha256:<digest>"):
            placeholders.append(f"{where}: {image}")
    return problems, placeholders


def containerfile_images(path):
    # `scratch` is the empty base, not an image: nothing to pin.
    return [(f"{rel(path)} FROM", m.group(1)) for m in
            re.finditer(r"^FROM\s+(\S+)", open(path).read(), re.I | re.M)
            if m.group(1) != "scratch"]


def manifest_images(path):
    out = []
    for doc in yaml.safe_load_all(open(path)):
        spec = (doc or {}).get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            out.append((f"{rel(path)} container {c['name']}", c["image"]))
    return out


PODMONITOR_SPEC = {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel",
                   "podTargetLabels", "sampleLimit"}
PODMONITOR_ENDPOINT = {"port", "path", "interval", "scrapeTimeout", "relabelings",
                       "metricRelabelings", "honorLabels", "scheme"}


def is_custom(path):
    return any((doc or {}).get("apiVersion", "").startswith("monitoring.coreos.com/")
               for doc in yaml.safe_load_all(open(path)))


def check_podmonitor(pm, ds):
    problems = []
    if (pm.get("apiVersion"), pm.get("kind")) != ("monitoring.coreos.com/v1", "PodMonitor"):
        problems.append("not a monitoring.coreos.com/v1 PodMonitor")
    spec = pm.get("spec", {})
    problems += [f"spec.{k}: no such PodMonitor field" for k in set(spec) - PODMONITOR_SPEC]
    pod = ds["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    for k, v in spec.get("selector", {}).get("matchLabels", {}).items():
        if labels.get(k) != v:
            problems.append(f"selector {k}={v} matches no DaemonSet pod (labels {labels})")
    if pm["metadata"].get("namespace") != ds["metadata"].get("namespace"):
        problems.append("not in the DaemonSet's namespace")
    containers = pod["spec"]["containers"]
    ports = {p.get("name"): p["containerPort"] for c in containers for p in c.get("ports", [])}
    args = containers[0].get("args", [])
    listen = args[args.index("--metrics-listen") + 1] if "--metrics-listen" in args else None
    for ep in spec.get("podMetricsEndpoints", []) or [{}]:
        problems += [f"podMetricsEndpoints.{k}: no such field" for k in set(ep) - PODMONITOR_ENDPOINT]
        if ep.get("port") not in ports:
            problems.append(f"port {ep.get('port')!r} is no named port of the DaemonSet ({sorted(ports)})")
        elif listen is None or not listen.endswith(f":{ports[ep['port']]}"):
            problems.append(f"the DaemonSet's --metrics-listen ({listen}) is not on port "
                            f"{ports[ep['port']]}")
        if ep.get("path", "/metrics") != "/metrics":
            problems.append(f"path {ep['path']}: tracer serves /metrics")
    return problems


def check_networkpolicy(np, ds):
    """The policy admits only named peers, only to the DaemonSet's metrics
    port, and selects the DaemonSet's pods."""
    problems = []
    spec = np.get("spec", {})
    pod = ds["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    selector = spec.get("podSelector", {}).get("matchLabels", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"podSelector {selector} does not select the DaemonSet's pods ({labels})")
    if np["metadata"].get("namespace") != ds["metadata"].get("namespace"):
        problems.append("not in the DaemonSet's namespace")
    if "Ingress" not in spec.get("policyTypes", []):
        problems.append("policyTypes lacks Ingress: ingress stays open")
    ports = {(p.get("name"), p["containerPort"]) for c in pod["spec"]["containers"]
             for p in c.get("ports", [])}
    metrics = {v for pair in ports if pair[0] == "metrics" for v in pair}
    for i, rule in enumerate(spec.get("ingress", [])):
        if not rule.get("from"):
            problems.append(f"ingress[{i}] admits every peer (no `from`)")
        if not rule.get("ports"):
            problems.append(f"ingress[{i}] admits every port (no `ports`)")
        for p in rule.get("ports", []):
            if p.get("port") not in metrics:
                problems.append(f"ingress[{i}] admits port {p.get('port')!r}, not the metrics port")
    return problems


def check_memory(docs):
    """Every tracer container has a memory request and limit."""
    problems = []
    for where, doc in docs:
        spec = doc.get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        for c in spec.get("containers", []):
            if c["name"] != "tracer":
                continue
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                if "memory" not in res.get(kind, {}):
                    problems.append(f"{where}: container tracer has no memory {kind[:-1]}")
    return problems


def documented_metrics():
    text = open(os.path.join(ROOT, "docs", "metrics.md")).read()
    return set(re.findall(r"`((?:tracer|process)_[a-z_]+)", text))


def check_dashboard(dash, documented):
    problems = []
    for key in ("uid", "title", "panels", "templating"):
        if key not in dash:
            problems.append(f"no {key}")
    for p in dash.get("panels", []):
        if p.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"panel {p.get('title')}: not on the $datasource variable")
        if not p.get("targets"):
            problems.append(f"panel {p.get('title')}: no query")
        for t in p.get("targets", []):
            for name in re.findall(r"\b((?:tracer|process)_[a-z_]+)", t.get("expr", "")):
                if name not in documented:
                    problems.append(f"panel {p.get('title')}: {name} is not in docs/metrics.md")
    return problems


WORKFLOWS = os.path.join(ROOT, ".github", "workflows")


def own_workflows():
    if not os.path.isdir(WORKFLOWS):
        return []
    return sorted(os.path.join(WORKFLOWS, n) for n in os.listdir(WORKFLOWS)
                  if n.endswith((".yml", ".yaml")))


def steps_of(job):
    return job.get("steps") or []


def check_release_workflow(wf):
    """The release workflow's triggers and permissions, job by job."""
    problems = []
    on = wf.get("on") or wf.get(True) or {}
    if set(on) != {"push"} or set(on["push"]) != {"tags"}:
        problems.append(f"runs on {sorted(on)}: a release runs on version tags only")
    if wf.get("permissions") != {"contents": "read"}:
        problems.append(f"top-level permissions {wf.get('permissions')}: contents: read by default")
    for name, job in wf.get("jobs", {}).items():
        perms = job.get("permissions") or {}
        uses = [st.get("uses", "").split("@")[0] for st in steps_of(job)]
        runs = "\n".join(st.get("run", "") for st in steps_of(job))
        attests = "actions/attest-build-provenance" in uses
        want = {"contents": "read"}
        if attests:
            want.update({"id-token": "write", "attestations": "write"})
        if "docker buildx" in runs and "push=true" in runs:
            want["packages"] = "write"
        if "gh release create" in runs:
            want["contents"] = "write"
        if perms != want and not (not perms and want == {"contents": "read"}):
            problems.append(f"job {name}: permissions {perms}, its steps need exactly {want}")
        for st in steps_of(job):
            if st.get("uses", "").startswith("actions/upload-artifact") and name == "dist":
                if not attests:
                    problems.append(f"job {name} uploads a build it did not attest")
        if name == "dist":
            if "cargo xtask dist" not in runs:
                problems.append("job dist does not build with cargo xtask dist")
            if "sha256" not in runs:
                problems.append("job dist ships no .sha256 files")
    return problems


RELEASE_KEYS = ("TRACER_RELEASE_VERSION", "TRACER_RELEASE_URL", "TRACER_RELEASE_SHA256_X86_64",
                "TRACER_RELEASE_SHA256_AARCH64")


def check_release_env(text, workspace_version):
    problems, placeholders = [], []
    values = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Z0-9_]+)=([^\s'\"$`;&|<>()]*)", line)
        if not m:
            problems.append(f"line {n}: not a NAME=VALUE line a shell reads as data: {line}")
            continue
        values[m.group(1)] = m.group(2)
    if tuple(sorted(values)) != tuple(sorted(RELEASE_KEYS)):
        problems.append(f"keys {sorted(values)}, expected {sorted(RELEASE_KEYS)}")
        return problems, placeholders
    if values["TRACER_RELEASE_VERSION"] != workspace_version:
        problems.append(f"version {values['TRACER_RELEASE_VERSION']}, the workspace's is {workspace_version}")
    url = values["TRACER_RELEASE_URL"]
    if not re.fullmatch(r"https://[\w.-]+/[\w./-]+", url):
        problems.append(f"releases URL {url!r} is not https://HOST/PATH")
    elif "/OWNER/" in url:
        placeholders.append(f"TRACER_RELEASE_URL={url}")
    for key in RELEASE_KEYS[2:]:
        v = values[key]
        if v == "unpublished" or v == "":
            placeholders.append(f"{key}={v or '(empty: no build for it)'}")
        elif not re.fullmatch(r"[0-9a-f]{64}", v):
            problems.append(f"{key}={v}: not 64 lowercase hex digits")
    return problems, placeholders


def check_release_containerfile(text, context_script):
    problems = []
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    if froms != ["scratch"]:
        problems.append(f"FROM {froms}: the release image is scratch alone")
    copies = re.findall(r"^COPY\s+(?!--)(\S+)\s", text, re.M)
    for src in copies:
        if f'"$out/{src}"' not in context_script:
            problems.append(f"COPY {src}: release-context.sh puts no such file in the context")
    if sorted(copies) != ["busybox", "tracer"]:
        problems.append(f"copies {copies}: exactly tracer and busybox")
    return problems


def report(label, problems, placeholders=()):
    (failures if problems else passed).append(label)
    print(("FAIL  " if problems else "ok    ") + label + "".join(f"\n      {p}" for p in problems)
          + "".join(f"\n      to fill in: {p}" for p in placeholders))


def main():
    tmp = tempfile.mkdtemp(prefix="ci-lint-")
    snippet = 0
    yamls = files("", ".yml", ".yaml") + own_workflows()

    # --- yamllint
    run("yamllint ci/", [tool("yamllint"), "-s", "-c", os.path.join(CI, ".yamllint.yml")] + yamls)
    bad = os.path.join(tmp, "bad-indent.yml")
    with open(bad, "w") as f:
        f.write("a:\n   b: 1\n  c: 2\n")
    run("yamllint", [tool("yamllint"), "-c", os.path.join(CI, ".yamllint.yml"), bad], False)

    # --- GitHub
    action = os.path.join(CI, "github", "action.yml")
    workflow = os.path.join(CI, "github", "example-workflow.yml")
    cj = tool("check-jsonschema")
    run("action.yml: vendor.github-actions", [cj, "--builtin-schema", "vendor.github-actions", action])
    run("example-workflow.yml: vendor.github-workflows",
        [cj, "--builtin-schema", "vendor.github-workflows", workflow])
    broken = yaml.safe_load(open(action))
    del broken["runs"]["steps"][1]["shell"]  # a composite run step needs its shell
    run("action.yml without a step's shell: vendor.github-actions",
        [cj, "--builtin-schema", "vendor.github-actions", dump(broken, tmp, "action.yml")], False)
    broken = yaml.safe_load(open(workflow))
    broken["jobs"]["daemon"]["runs_on"] = broken["jobs"]["daemon"].pop("runs-on")
    run("workflow with runs_on: vendor.github-workflows",
        [cj, "--builtin-schema", "vendor.github-workflows", dump(broken, tmp, "wf.yml")], False)
    for wf in own_workflows():
        run(f"{rel(wf)}: vendor.github-workflows",
            [cj, "--builtin-schema", "vendor.github-workflows", wf])
    release = os.path.join(WORKFLOWS, "release.yml")
    broken = yaml.safe_load(open(release))
    del broken["jobs"]["dist"]["runs-on"]
    run("release workflow with a job lacking runs-on: vendor.github-workflows",
        [cj, "--builtin-schema", "vendor.github-workflows", dump(broken, tmp, "release.yml")], False)
    release_wf = yaml.safe_load(open(release))
    report("release workflow: version tags only, least privilege per job, attested and checksummed",
           check_release_workflow(release_wf))
    for canary, edit_ in (("write-all permissions",
                           lambda b: b.update(permissions="write-all")),
                          ("a pull_request trigger",
                           lambda b: (b.get("on") or b[True]).update(pull_request=None)),
                          ("the attestation step removed",
                           lambda b: b["jobs"]["dist"]["steps"].pop(
                               next(i for i, st in enumerate(b["jobs"]["dist"]["steps"])
                                    if "attest" in st.get("uses", "")))),
                          ("packages: write on the dist job",
                           lambda b: b["jobs"]["dist"]["permissions"].update(packages="write"))):
        broken = copy.deepcopy(release_wf)
        edit_(broken)
        report(f"release workflow with {canary} (canary: must be rejected)",
               [] if check_release_workflow(broken) else ["accepted"])
    cargo_version = re.search(r'^version = "(.*)"', open(os.path.join(ROOT, "Cargo.toml")).read(),
                              re.M).group(1)
    pinned = open(os.path.join(CI, "release.env")).read()
    report("ci/release.env: the pinned release, its version the workspace's",
           *check_release_env(pinned, cargo_version))
    for canary, text in (("a shell command", pinned + "TRACER_RELEASE_URL=$(id)\n"),
                         ("a short checksum", pinned.replace(
                             "TRACER_RELEASE_SHA256_AARCH64=", "TRACER_RELEASE_SHA256_AARCH64=abc123")),
                         ("another version", pinned.replace(
                             f"TRACER_RELEASE_VERSION={cargo_version}", "TRACER_RELEASE_VERSION=9.9.9"))):
        problems, _ = check_release_env(text, cargo_version)
        report(f"ci/release.env with {canary} (canary: must be rejected)",
               [] if problems else ["accepted"])
    release_cf = open(os.path.join(CI, "container", "release.Containerfile")).read()
    context_sh = open(os.path.join(CI, "container", "release-context.sh")).read()
    report("release.Containerfile: scratch, exactly what release-context.sh makes",
           check_release_containerfile(release_cf, context_sh))
    report("release.Containerfile with a base image (canary: must be rejected)",
           [] if check_release_containerfile("FROM debian\n" + release_cf, context_sh)
           else ["accepted"])
    for doc, where in ((yaml.safe_load(open(action))["runs"]["steps"], "action.yml"),
                       *((job["steps"], f"{rel(path)} job {name}")
                         for path in [workflow] + own_workflows()
                         for name, job in yaml.safe_load(open(path))["jobs"].items())):
        for step in doc:
            if "run" in step:
                snippet += 1
                # ${{ }} is replaced before the shell sees it.
                script = re.sub(r"\$\{\{.*?\}\}", "x", step["run"])
                shellcheck(f"shellcheck: {where} step {step.get('id') or step.get('name')}",
                           script, "bash", tmp, snippet)

    # --- GitLab
    template = os.path.join(CI, "gitlab", "tracer.gitlab-ci.yml")
    example = os.path.join(CI, "gitlab", "example.gitlab-ci.yml")
    gl = [cj, "--builtin-schema", "vendor.gitlab-ci", "--data-transform", "gitlab-ci"]
    run("GitLab template and example: vendor.gitlab-ci", gl + [template, example])
    merged_path = os.path.join(tmp, "merged.gitlab-ci.yml")
    merged = glci.resolved(glci.load_pipeline(example, ROOT))
    with open(merged_path, "w") as f:
        yaml.safe_dump(merged, f, sort_keys=False)
    run("GitLab example with the template included and resolved: vendor.gitlab-ci",
        gl + [merged_path])
    broken = copy.deepcopy(merged)
    broken["test"]["artifacts"]["when"] = "sometimes"
    run("GitLab artifacts:when sometimes: vendor.gitlab-ci",
        gl + [dump(broken, tmp, "broken.gitlab-ci.yml")], False)
    for name, job in merged.items():
        if not isinstance(job, dict) or name.startswith(".") or name in glci.RESERVED:
            continue
        for key in ("before_script", "script", "after_script"):
            if job.get(key):
                snippet += 1
                shellcheck(f"shellcheck: GitLab job {name} {key}",
                           "\n".join(glci.as_script(job[key])), "bash", tmp, snippet)

    # --- Kubernetes
    manifests = files("kubernetes", ".yaml")
    core = [m for m in manifests if not is_custom(m)]
    run("Kubernetes manifests: kubernetes-validate --strict",
        [tool("kubernetes-validate"), "--strict", "--quiet"] + core)
    ds = next(d for d in yaml.safe_load_all(open(os.path.join(CI, "kubernetes", "daemonset.yaml")))
              if d["kind"] == "DaemonSet")
    pm = yaml.safe_load(open(os.path.join(CI, "kubernetes", "podmonitor.yaml")))
    report("PodMonitor scrapes the DaemonSet's metrics port", check_podmonitor(pm, ds))
    for canary, edit in (("a port name the DaemonSet lacks",
                          lambda b: b["spec"]["podMetricsEndpoints"][0].update(port="metric")),
                         ("a misspelt field",
                          lambda b: b["spec"]["podMetricsEndpoints"][0].update(intervall="30s")),
                         ("a selector no pod matches",
                          lambda b: b["spec"]["selector"]["matchLabels"].update(app="x"))):
        broken = copy.deepcopy(pm)
        edit(broken)
        problems = check_podmonitor(broken, ds)
        report(f"PodMonitor with {canary} (canary: must be rejected)",
               [] if problems else ["accepted"])
    np = yaml.safe_load(open(os.path.join(CI, "kubernetes", "networkpolicy.yaml")))
    report("NetworkPolicy admits only Prometheus to the DaemonSet's metrics port",
           check_networkpolicy(np, ds))
    for canary, edit in (("a rule open to every peer",
                          lambda b: b["spec"]["ingress"][0].pop("from")),
                         ("another port",
                          lambda b: b["spec"]["ingress"][0]["ports"][0].update(port=22)),
                         ("a selector no pod matches",
                          lambda b: b["spec"]["podSelector"]["matchLabels"].update(app="x"))):
        broken = copy.deepcopy(np)
        edit(broken)
        report(f"NetworkPolicy with {canary} (canary: must be rejected)",
               [] if check_networkpolicy(broken, ds) else ["accepted"])
    pod = yaml.safe_load(open(os.path.join(CI, "kubernetes", "ci-pod.yaml")))
    report("tracer containers have a memory request and limit",
           check_memory([("daemonset.yaml", ds), ("ci-pod.yaml", pod)]))
    broken = copy.deepcopy(ds)
    broken["spec"]["template"]["spec"]["containers"][0]["resources"].pop("limits")
    report("DaemonSet without a memory limit (canary: must be rejected)",
           [] if check_memory([("daemonset.yaml", broken)]) else ["accepted"])
    documented = documented_metrics()
    dash = json.load(open(os.path.join(CI, "kubernetes", "grafana-dashboard.json")))
    report("Grafana dashboard: queries name documented metrics only",
           check_dashboard(dash, documented))
    broken = copy.deepcopy(dash)
    broken["panels"][0]["targets"][0]["expr"] = "sum(tracer_death_total)"
    report("Grafana dashboard naming tracer_death_total (canary: must be rejected)",
           [] if check_dashboard(broken, documented) else ["accepted"])
    pod = yaml.safe_load(open(os.path.join(CI, "kubernetes", "ci-pod.yaml")))
    broken = copy.deepcopy(pod)
    broken["spec"]["containers"][0]["securityContext"]["privilegd"] = True
    run("Pod with a misspelt securityContext field: kubernetes-validate --strict",
        [tool("kubernetes-validate"), "--strict", "--quiet", dump(broken, tmp, "pod.yaml")], False)
    for c in pod["spec"]["containers"]:
        if c.get("command", [None])[:2] == ["sh", "-c"]:
            snippet += 1
            shellcheck(f"shellcheck: CI pod container {c['name']} command",
                       c["command"][2], "sh", tmp, snippet)

    # --- scripts
    scripts = files("", ".sh")
    run("shellcheck ci/**/*.sh", [tool("shellcheck")] + scripts)
    snippet += 1
    shellcheck("shellcheck", 'x="a b"\nrm $x', "sh", tmp, snippet, expect_ok=False)

    # --- Containerfile
    containerfile = os.path.join(CI, "container", "Containerfile")
    problems = check_containerfile(containerfile)
    report("Containerfile: stages, COPY sources, RUN scripts, .dockerignore", problems)

    # --- pins
    for path in (action, workflow, os.path.join(CI, "README.md"), *own_workflows()):
        report(f"pins: every `uses:` of {rel(path)} by commit SHA", *check_uses(open(path).read()))
    images = containerfile_images(containerfile)
    for path in manifests:
        images += manifest_images(path)
    report("pins: every image by sha256 digest", *check_images(images))
    for canary, text in (("a tag", "  - uses: actions/checkout@v4"),
                         ("a short SHA", "  - uses: actions/checkout@11bd719 # v4.2.2"),
                         ("no release comment",
                          "  - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683")):
        problems, _ = check_uses(text)
        report(f"pins: `uses:` with {canary} (canary: must be rejected)",
               [] if problems else [f"accepted: {text.strip()}"])
    for canary in ("docker.io/library/debian:bookworm-slim",
                   "docker.io/library/debian:bookworm-slim@sha256:abc",
                   "docker.io/library/debian@sha256:<fill-me>"):
        problems, _ = check_images([("canary", canary)])
        report(f"pins: image {canary} (canary: must be rejected)",
               [] if problems else [f"accepted: {canary}"])

    print(f"\nci lint: {len(passed)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
