//! Interpreters: their own words lead; a native module is named.
use super::*;

/// Python's `ctypes.string_at(0)` faults in libc (strlen, under ctypes):
/// the interpreter's headline stays its own and names the native module
/// the fault fell in; with faulthandler on, Python's own words lead
/// (its last words quote "Fatal Python error") and no module is named.
#[test]
fn a_python_native_crash_names_its_module_unless_faulthandler_speaks() {
    assert!(
        have("python3"),
        "python3 is needed: the kernel tests fail rather than skip"
    );
    let cmd = ["python3", "-c", "import ctypes; ctypes.string_at(0)"];
    let r = record(&[], &cmd);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let h = headline(&r);
    assert!(
        h.contains("crashed: SIGSEGV (SEGV_MAPERR)") && h.contains(", in native module libc.so.6"),
        "{h}\n{:#?}",
        the_crash(&r)
    );
    let r = record_env(&[], &cmd, &[("PYTHONFAULTHANDLER", "1")]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let h = headline(&r);
    assert!(!h.contains("native module"), "{h}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    assert!(
        json["certificates"][0]
            .to_string()
            .contains("Fatal Python error"),
        "{json:#}"
    );
}
