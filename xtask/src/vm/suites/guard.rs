//! The guard against a VM matrix that rots unseen: read from the kernel
//! test sources (no root, no VM, no build), for x86-64 and arm64 alike,
//! which tests the binary has, then ask `vm/suite.sh --select` what each
//! suite runs of them. Once `compat` ran nothing anywhere for months: its
//! only x86-64 test is in the `#[cfg(target_arch)]` submodule
//! `compat::ia32`, and the suite ran a module's own tests only.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use syn::{Attribute, Item, Meta};

use super::{host_only_module, refuse_host_only, select, CORE_TESTS, HOST_ONLY, X86_64_ONLY};

/// The architectures the VMs run, as `cfg(target_arch)` names them.
const ARCHES: &[&str] = &["x86_64", "aarch64"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// Every test of the kernel test binary compiled for `arch`, by the full
/// name libtest lists (`compat::ia32::ia32_calls_…`), without the
/// `#[ignore]`d ones (the suite never runs those).
fn tests_for(arch: &str) -> Vec<String> {
    let main = root().join("tracer-user/tests/kernel/main.rs");
    let mut out = Vec::new();
    scan_file(&main, main.parent().unwrap(), "", arch, &mut out);
    out
}

fn scan_file(file: &Path, children: &Path, prefix: &str, arch: &str, out: &mut Vec<String>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let here = file.parent().expect("a source file lies in a directory");
    scan_items(&ast.items, children, here, prefix, arch, out);
}

/// `children`: where the files of this scope's `mod x;` lie; `here`: the
/// directory of the file the items are in (a `#[path]` is relative to it).
fn scan_items(
    items: &[Item],
    children: &Path,
    here: &Path,
    prefix: &str,
    arch: &str,
    out: &mut Vec<String>,
) {
    for item in items {
        match item {
            Item::Fn(f)
                if compiled(&f.attrs, arch) && is(&f.attrs, "test") && !is(&f.attrs, "ignore") =>
            {
                out.push(format!("{prefix}{}", f.sig.ident));
            }
            Item::Mod(m) if compiled(&m.attrs, arch) => {
                let name = m.ident.to_string();
                let prefix = format!("{prefix}{name}::");
                let dir = children.join(&name);
                match &m.content {
                    Some((_, items)) => scan_items(items, &dir, here, &prefix, arch, out),
                    None if path_attr(&m.attrs).is_some() => {
                        let file = here.join(path_attr(&m.attrs).unwrap_or_default());
                        scan_file(&file, &dir, &prefix, arch, out)
                    }
                    None => {
                        let file = children.join(format!("{name}.rs"));
                        match file.exists() {
                            true => scan_file(&file, &dir, &prefix, arch, out),
                            false => scan_file(&dir.join("mod.rs"), &dir, &prefix, arch, out),
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// A module's `#[path = "…"]`, when it has one.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn is(attrs: &[Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

/// Every `#[cfg(…)]` of the item holds for `arch` (`target_arch`, `not`,
/// `all`, `any`; any other predicate, e.g. `test`, holds).
fn compiled(attrs: &[Attribute], arch: &str) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .all(|a| holds(&a.parse_args::<Meta>().expect("a cfg predicate"), arch))
}

fn holds(meta: &Meta, arch: &str) -> bool {
    match meta {
        Meta::NameValue(nv) if nv.path.is_ident("target_arch") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => s.value() == arch,
            _ => true,
        },
        Meta::List(list) => {
            let inner: Vec<Meta> = list
                .parse_args_with(
                    syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
                )
                .expect("cfg operands")
                .into_iter()
                .collect();
            let mut each = inner.iter().map(|m| holds(m, arch));
            match list.path.get_ident().map(|i| i.to_string()).as_deref() {
                Some("not") => !inner.first().is_some_and(|m| holds(m, arch)),
                Some("all") => each.all(|h| h),
                Some("any") => each.any(|h| h),
                _ => true,
            }
        }
        _ => true,
    }
}

/// The top-level module of a test name.
fn module(test: &str) -> &str {
    test.split("::").next().unwrap_or(test)
}

fn skips() -> Vec<String> {
    HOST_ONLY.iter().map(|(p, _)| format!("skip={p}")).collect()
}

/// What `vm/suite.sh` runs of `module` on `arch`, with every host-only
/// path handed to it, as `vm-test` hands them.
fn suite_runs(tests: &[String], module: &str) -> Vec<String> {
    let list: String = tests.iter().map(|t| format!("{t}: test\n")).collect();
    select(&root().join("vm/suite.sh"), &list, module, &skips()).expect("suite.sh --select")
}

fn host_only(test: &str) -> bool {
    HOST_ONLY
        .iter()
        .any(|(p, _)| test == *p || test.starts_with(&format!("{p}::")))
}

/// Each VM suite runs, on each architecture it runs on, every test of its
/// module but the host-only ones, and at least one.
#[test]
fn each_vm_suite_runs_its_tests_on_each_architecture() {
    for arch in ARCHES {
        let tests = tests_for(arch);
        for m in CORE_TESTS {
            if *arch != "x86_64" && X86_64_ONLY.iter().any(|(x, _)| x == m) {
                continue;
            }
            let want: Vec<String> = tests
                .iter()
                .filter(|t| module(t) == *m && !host_only(t))
                .cloned()
                .collect();
            let runs = suite_runs(&tests, m);
            assert!(
                !runs.is_empty(),
                "the VM suite `{m}` runs no test on {arch}"
            );
            assert_eq!(runs, want, "what `{m}` runs on {arch}");
        }
    }
}

/// Every module with a test is a VM suite or host-only with a reason, not
/// both; every host-only path names a module or test that exists.
#[test]
fn every_kernel_test_module_is_in_the_vm_suite_or_host_only() {
    let all: BTreeSet<String> = ARCHES.iter().flat_map(|a| tests_for(a)).collect();
    let modules: BTreeSet<&str> = all.iter().map(|t| module(t)).collect();
    for m in &modules {
        let core = CORE_TESTS.contains(m);
        let host = host_only_module(m);
        assert!(
            core || host.is_some(),
            "kernel test module `{m}` is neither a VM suite (CORE_TESTS) nor host-only with \
             a reason (HOST_ONLY in xtask/src/vm/suites.rs)"
        );
        assert!(
            !(core && host.is_some()),
            "`{m}` is both a VM suite and host-only"
        );
    }
    for (path, why) in HOST_ONLY {
        assert!(!why.is_empty(), "host-only `{path}` without a reason");
        assert!(
            all.iter()
                .any(|t| t == path || t.starts_with(&format!("{path}::"))),
            "host-only `{path}` names no kernel test"
        );
    }
    for m in CORE_TESTS {
        assert!(
            modules.contains(m),
            "VM suite `{m}` is no kernel test module"
        );
    }
}

/// The source reading itself: the cfg'd submodules land on their own
/// architecture only, nested file modules are found.
#[test]
fn the_source_scan_sees_cfg_submodules_and_nested_files() {
    let x86 = tests_for("x86_64");
    let arm = tests_for("aarch64");
    let has = |v: &[String], p: &str| v.iter().any(|t| t.starts_with(p));
    assert!(has(&x86, "compat::ia32::") && !has(&x86, "compat::aarch32::"));
    assert!(has(&arm, "compat::aarch32::") && !has(&arm, "compat::ia32::"));
    assert!(has(&x86, "crash_stacks::deleted::"));
    assert!(has(&x86, "security::tiocsti::"));
    assert!(!has(&x86, "common::"), "helpers have no tests");
}

/// `--test kernel_causes` once ran 14 tests in guests without python3, all
/// failing after the build and both boots: a host-only module is refused
/// before anything is built, with its reason; the VM suites pass.
#[test]
fn a_host_only_module_is_refused_before_the_build() {
    let err = refuse_host_only(&["capture".into(), "kernel_causes".into()])
        .expect_err("kernel_causes is host-only");
    let msg = err.to_string();
    assert!(
        msg.contains("`kernel_causes` runs on the host only (python3)"),
        "{msg}"
    );
    assert!(msg.contains("--test kernel -- kernel_causes::"), "{msg}");
    let core: Vec<String> = CORE_TESTS.iter().map(|s| s.to_string()).collect();
    refuse_host_only(&core).expect("every VM suite runs in the VMs");
    // A host-only test inside a VM suite is skipped there, not refused.
    refuse_host_only(&["last_words".into()]).expect("last_words runs in the VMs");
}
