//! The newest major of each JavaScript runner on every Node line still in
//! use: the same suites and assertions as jest.rs, mocha.rs, playwright.rs
//! and matrix.rs, on Node 22, 24 and 26 (the version matrix's official
//! builds, `matrix/node-<major>`) where those run on Debian's Node 20 —
//! which reached its end of life in 2026-04, so most projects run a later
//! one. The preload's seams are the runners' own (jest-circus's runner,
//! mocha's Runner events, Playwright's lib/globals.js, vitest's
//! `__vitest_required__`), but they are reached through Node's module
//! loaders (`Module._load`, `require` of an ES module from 22.12 on),
//! which change with Node's major: a Node line that breaks one fails here.
//!
//! vitest 5 runs on 24 in matrix.rs (both pools); its forks pool on 22 and
//! 26 here. Wall time on the 2-core test machine: 3 to 5 s a test.
use super::*;

#[test]
fn jest_30_on_node_22() {
    jest::names_both_tests(Node::Preload, Some("22"));
}

#[test]
fn jest_30_on_node_24() {
    jest::names_both_tests(Node::Preload, Some("24"));
}

#[test]
fn jest_30_on_node_26() {
    jest::names_both_tests(Node::Preload, Some("26"));
}

#[test]
fn mocha_12_parallel_on_node_22() {
    mocha::names_both_tests("12", true, Some("22"));
}

#[test]
fn mocha_12_parallel_on_node_24() {
    mocha::names_both_tests("12", true, Some("24"));
}

#[test]
fn mocha_12_parallel_on_node_26() {
    mocha::names_both_tests("12", true, Some("26"));
}

#[test]
fn playwright_1_on_node_22() {
    playwright::names_both_tests(Some("22"));
}

#[test]
fn playwright_1_on_node_24() {
    playwright::names_both_tests(Some("24"));
}

#[test]
fn playwright_1_on_node_26() {
    playwright::names_both_tests(Some("26"));
}

#[test]
fn vitest_5_forks_on_node_22() {
    matrix::vitest("5", "forks", Some("22"));
}

#[test]
fn vitest_5_forks_on_node_26() {
    matrix::vitest("5", "forks", Some("26"));
}
