//! Findings as OTLP log records: OpenTelemetry semantic-convention
//! attributes where they exist (`process.*`, `host.name`, `k8s.*`,
//! `cicd.pipeline.*`), `tracer.*` for the rest, the finding's JSON (as
//! report.json has it) as the body, severity by rank.
use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceRequest,
    common::v1::{any_value::Value, AnyValue, ArrayValue, InstrumentationScope, KeyValue},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber},
    resource::v1::Resource,
};
use serde::Serialize;

use crate::{
    analysis::{Certificate, ForeignSignal, Leftover, NearMiss, ProcRef, Rank},
    eventlog::Header,
    live::Findings,
};

/// Who is exporting: the resource every record of a run shares.
#[derive(Debug, Clone)]
pub struct Context {
    pub resource: Vec<KeyValue>,
}

impl Context {
    /// From the log's header and the CI system's environment variables.
    pub fn from_env(header: &Header) -> Self {
        Self::from_vars(header, |k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    pub fn from_vars(header: &Header, env: impl Fn(&str) -> Option<String>) -> Self {
        let mut r = vec![
            kv("service.name", s("tracer")),
            kv("service.version", s(&header.tracer_version)),
            kv("host.name", s(&header.hostname)),
            kv("os.type", s("linux")),
            kv("os.version", s(&header.kernel)),
            kv("tracer.mode", s(&header.mode)),
        ];
        let mut add = |key: &str, v: Option<String>| {
            if let Some(v) = v {
                r.push(kv(key, s(&v)));
            }
        };
        // Kubernetes: what the downward API is usually mapped to.
        add(
            "k8s.pod.name",
            env("K8S_POD_NAME").or_else(|| env("POD_NAME")),
        );
        add(
            "k8s.namespace.name",
            env("K8S_NAMESPACE").or_else(|| env("POD_NAMESPACE")),
        );
        add(
            "k8s.node.name",
            env("K8S_NODE_NAME").or_else(|| env("NODE_NAME")),
        );
        if env("GITHUB_ACTIONS").as_deref() == Some("true") {
            let run_url = match (
                env("GITHUB_SERVER_URL"),
                env("GITHUB_REPOSITORY"),
                env("GITHUB_RUN_ID"),
            ) {
                (Some(server), Some(repo), Some(id)) => {
                    Some(format!("{server}/{repo}/actions/runs/{id}"))
                }
                _ => None,
            };
            add("cicd.pipeline.name", env("GITHUB_WORKFLOW"));
            add("cicd.pipeline.run.id", env("GITHUB_RUN_ID"));
            add("cicd.pipeline.run.url.full", run_url);
            add("cicd.pipeline.task.name", env("GITHUB_JOB"));
            add("vcs.repository.name", env("GITHUB_REPOSITORY"));
            add("vcs.ref.head.revision", env("GITHUB_SHA"));
        } else if env("GITLAB_CI").as_deref() == Some("true") {
            add(
                "cicd.pipeline.name",
                env("CI_PIPELINE_NAME").or_else(|| env("CI_PROJECT_PATH")),
            );
            add("cicd.pipeline.run.id", env("CI_PIPELINE_ID"));
            add("cicd.pipeline.run.url.full", env("CI_PIPELINE_URL"));
            add("cicd.pipeline.task.name", env("CI_JOB_NAME"));
            add("cicd.pipeline.task.run.id", env("CI_JOB_ID"));
            add("cicd.pipeline.task.run.url.full", env("CI_JOB_URL"));
            add("vcs.repository.name", env("CI_PROJECT_PATH"));
            add("vcs.ref.head.revision", env("CI_COMMIT_SHA"));
        }
        // The standard variable for anything else (`k=v,k2=v2`).
        for (k, v) in super::parse_headers(&env("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default()) {
            r.retain(|a| a.key != k);
            r.push(kv(&k, s(&v)));
        }
        Self { resource: r }
    }

    /// One request holding every finding (empty when there are none).
    pub fn request(&self, f: &Findings, boot_to_wall_ns: i64) -> Option<ExportLogsServiceRequest> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let wall = |t: u64| (t as i128 + boot_to_wall_ns as i128).max(0) as u64;
        let mut logs: Vec<LogRecord> = Vec::new();
        for c in &f.certificates {
            logs.push(certificate(
                c,
                f.parent_pid(c.victim.ancestry),
                wall(c.victim.end_t),
            ));
        }
        for n in &f.near_misses {
            logs.push(near_miss(n, f.entry(n.sender_id)));
        }
        for x in &f.foreign_signals {
            logs.push(foreign(x, wall(x.signal.t)));
        }
        for l in &f.leaks {
            logs.push(leak(l, f.parent_pid(l.ancestry)));
        }
        if logs.is_empty() {
            return None;
        }
        for l in &mut logs {
            l.observed_time_unix_nano = now;
        }
        Some(ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: self.resource.clone(),
                    ..Default::default()
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "tracer".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    log_records: logs,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        })
    }
}

fn certificate(c: &Certificate, parent: Option<u32>, time: u64) -> LogRecord {
    let (severity, text) = match c.rank {
        Rank::Unexpected => (SeverityNumber::Error, "ERROR"),
        Rank::NonzeroExit | Rank::Consequence => (SeverityNumber::Warn, "WARN"),
        Rank::Expected => (SeverityNumber::Info, "INFO"),
    };
    let mut a = process(&c.victim.process, parent);
    a.push(kv("tracer.rank", s(c.rank.as_str())));
    a.push(kv("tracer.cause", s(c.cause.kind.as_str())));
    a.push(kv("tracer.headline", s(&c.headline)));
    if let Some(sig) = &c.cause.signal {
        a.push(kv("tracer.signal", s(&sig.sig_name)));
    }
    if let Some(m) = &c.cause.mechanism {
        a.push(kv("tracer.mechanism", s(m.kind.as_str())));
    }
    if let crate::eventlog::ExitStatus::Exited { code } = c.victim.status {
        a.push(kv("process.exit.code", i(code as i64)));
    }
    if let Some(k) = &c.killer {
        a.push(kv("tracer.killer.pid", i(k.process.pid as i64)));
        a.push(kv("tracer.killer.command", s(&k.process.command)));
        a.push(kv("tracer.killer.relation", s(k.relation.as_str())));
        a.push(kv("tracer.killer.call", s(&k.call)));
        if let Some(t) = &k.test {
            a.push(kv("tracer.killer.test.case.name", s(&t.test.full_name())));
        }
    }
    // The victim's test, per the semantic conventions' `test.*` attributes
    // (log attributes only: never a metric label, a test name is unbounded).
    if let Some(t) = &c.victim.test {
        a.push(kv("test.case.name", s(&t.test.full_name())));
        if let Some(f) = &t.test.file {
            a.push(kv("test.suite.name", s(f)));
        }
    }
    record("tracer.death", time, severity, text, a, c)
}

/// A near miss as the body holds it: report.json's entry, with its sender
/// named in place of the entry the report's `ancestors` table would give.
#[derive(Serialize)]
struct MissBody<'a> {
    #[serde(flatten)]
    miss: &'a NearMiss,
    sender: Option<&'a ProcRef>,
}

fn near_miss(n: &NearMiss, sender: Option<&ProcRef>) -> LogRecord {
    let mut a = sender.map(|p| process(p, None)).unwrap_or_default();
    a.push(kv("tracer.count", i(n.count as i64)));
    a.push(kv("tracer.syscall", s(&n.syscall)));
    a.push(kv("tracer.signal", s(&n.sig_name)));
    a.push(kv("tracer.target", s(&n.aimed_at)));
    if let Some(e) = &n.errno {
        a.push(kv("tracer.errno", s(e)));
    }
    // A near miss has no kernel time of its own in the report: the
    // collector's observed time stands in.
    let body = MissBody { miss: n, sender };
    record(
        "tracer.near_miss",
        0,
        SeverityNumber::Warn,
        "WARN",
        a,
        &body,
    )
}

fn foreign(x: &ForeignSignal, time: u64) -> LogRecord {
    let mut a = process(&x.target, None);
    a.push(kv("tracer.direction", s(x.direction.as_str())));
    a.push(kv("tracer.signal", s(&x.signal.sig_name)));
    a.push(kv("tracer.sender.pid", i(x.sender.pid as i64)));
    a.push(kv("tracer.sender.command", s(&x.sender.command)));
    record(
        "tracer.foreign_signal",
        time,
        SeverityNumber::Warn,
        "WARN",
        a,
        x,
    )
}

fn leak(l: &Leftover, parent: Option<u32>) -> LogRecord {
    let a = process(&l.process, parent);
    record("tracer.leak", 0, SeverityNumber::Warn, "WARN", a, l)
}

/// The `process.*` attributes of a process as a report names it.
fn process(p: &ProcRef, parent: Option<u32>) -> Vec<KeyValue> {
    let mut a = vec![kv("process.pid", i(p.pid as i64))];
    if let Some(ppid) = parent {
        a.push(kv("process.parent_pid", i(ppid as i64)));
    }
    if !p.argv.is_empty() {
        let args = p.argv.iter().map(|x| s(x)).collect();
        a.push(kv(
            "process.command_args",
            AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values: args })),
            },
        ));
    }
    if let Some(f) = &p.filename {
        a.push(kv("process.executable.path", s(f)));
    }
    if let Some(c) = &p.comm {
        a.push(kv("process.executable.name", s(c)));
    }
    a
}

fn record<T: Serialize>(
    event: &str,
    time: u64,
    severity: SeverityNumber,
    text: &str,
    mut attributes: Vec<KeyValue>,
    body: &T,
) -> LogRecord {
    attributes.push(kv("event.name", s(event)));
    LogRecord {
        time_unix_nano: time,
        severity_number: severity as i32,
        severity_text: text.into(),
        event_name: event.into(),
        body: Some(s(&serde_json::to_string(body).unwrap_or_default())),
        attributes,
        ..Default::default()
    }
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(value),
        ..Default::default()
    }
}

fn s(v: &str) -> AnyValue {
    AnyValue {
        value: Some(Value::StringValue(v.into())),
    }
}

fn i(v: i64) -> AnyValue {
    AnyValue {
        value: Some(Value::IntValue(v)),
    }
}
