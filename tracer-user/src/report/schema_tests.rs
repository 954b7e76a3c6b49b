//! report.json's JSON Schema, derived from the report types (schemars), is
//! the checked-in docs/report.schema.json, and every fixture's report
//! validates against it (jsonschema). The two cannot drift: a field added to
//! a type changes the derived schema, and this test fails until the file is
//! regenerated: `TRACER_BLESS=1 cargo test -p tracer-user --lib report::schema`.
use std::path::{Path, PathBuf};

use schemars::{
    generate::SchemaSettings,
    transform::{RecursiveTransform, Transform},
    Schema,
};
use serde_json::Value;

use super::*;
use crate::eventlog::read_log;

const SCHEMA_FILE: &str = "../docs/report.schema.json";

/// Objects are closed: a field the schema does not name fails validation.
#[derive(Clone)]
struct Closed;

impl Transform for Closed {
    fn transform(&mut self, s: &mut Schema) {
        if let Some(obj) = s.as_object_mut() {
            if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
                obj.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
    }
}

/// The schema of report.json as the types serialize it.
fn derived() -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(Closed))
        .into_generator()
        .into_root_schema_for::<Report>();
    schema.insert(
        "title".into(),
        format!("tracer report.json, schema {REPORT_SCHEMA_VERSION}").into(),
    );
    let mut schema = schema.to_value();
    // The one value `report_schema` may take in reports of this version.
    schema["properties"]["report_schema"]["const"] = REPORT_SCHEMA_VERSION.into();
    schema
}

fn path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE)
}

#[test]
fn the_checked_in_schema_is_the_one_the_types_derive() {
    let want = serde_json::to_string_pretty(&derived()).unwrap() + "\n";
    if std::env::var_os("TRACER_BLESS").is_some() {
        std::fs::write(path(), &want).unwrap();
    }
    let have = std::fs::read_to_string(path()).unwrap();
    assert!(
        have == want,
        "docs/report.schema.json is not the schema the report types derive: regenerate it with \
         `TRACER_BLESS=1 cargo test -p tracer-user --lib report::schema` and commit it"
    );
}

#[test]
fn every_fixture_report_validates() {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path()).unwrap()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("a valid JSON Schema");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "ndjson") {
            continue;
        }
        let r = build_report(&read_log(&path).unwrap(), &ReportOptions::default());
        let json: Value = serde_json::from_str(&render_json(&r)).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{path:?}:\n{}", errors.join("\n"));
        n += 1;
    }
    assert!(n >= 9, "fixtures missing");
}

/// The schema really is strict: a field it does not name is refused.
#[test]
fn an_unknown_field_is_refused() {
    let validator = jsonschema::draft202012::new(&derived()).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exits.ndjson");
    let r = build_report(&read_log(&path).unwrap(), &ReportOptions::default());
    let mut json: Value = serde_json::from_str(&render_json(&r)).unwrap();
    assert!(validator.is_valid(&json));
    json["log"]["lost"]["invented"] = 1.into();
    assert!(!validator.is_valid(&json));
}

/// Every field the schema names has a description (its doc comment) and is
/// in the prose: docs/report.md, or docs/event-log.md for a snapshot's
/// processes (the same shape as the log's snapshot record).
#[test]
fn every_field_is_described() {
    let read = |f: &str| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../docs")
                .join(f),
        )
        .unwrap()
    };
    let (report_md, event_log_md) = (read("report.md"), read("event-log.md"));
    let schema = derived();
    let mut missing = Vec::new();
    let mut check = |def: &str, s: &Value| {
        let doc = match SNAPSHOT_DEFS.contains(&def) {
            true => &event_log_md,
            false => &report_md,
        };
        let props = s.get("properties").and_then(Value::as_object);
        for (k, p) in props.into_iter().flatten() {
            // A tag (`const`) or an enum variant's only field, described at
            // the variant, needs no words of its own.
            let variant = props.is_some_and(|p| p.len() == 1) && s.get("description").is_some();
            let described = p.get("description").is_some() || p.get("const").is_some() || variant;
            if !described || !doc.contains(&format!("`{k}`")) {
                missing.push(format!("{def}.{k}"));
            }
        }
    };
    objects(&schema, &mut |s| check("Report", s), true);
    for (def, s) in schema["$defs"].as_object().unwrap() {
        objects(s, &mut |o| check(def, o), false);
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "without a doc comment or not in the docs: {missing:?}"
    );
}

const SNAPSHOT_DEFS: [&str; 7] = [
    "ProcSnapshot",
    "ThreadSnapshot",
    "SyscallState",
    "FdEntry",
    "FdKind",
    "Holder",
    "Access",
];

/// Every object schema in `s`, not descending into `$defs` (each is visited
/// on its own) when `top`.
fn objects(s: &Value, f: &mut impl FnMut(&Value), top: bool) {
    match s {
        Value::Object(map) => {
            if map.contains_key("properties") {
                f(s);
            }
            for (k, v) in map {
                if !(top && k == "$defs") {
                    objects(v, f, false);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| objects(v, f, false)),
        _ => {}
    }
}
