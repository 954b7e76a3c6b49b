//! The runtime: what runs while a command or a CI job is watched — the
//! capture session, the supervisor, leaks, the terminal, privilege
//! dropping, last words, the watchdog, the run's cgroup and the test
//! integrations `--tests` hands the command (`inject/`).
pub mod clock;
pub mod crash_maps;
pub mod event_loop;
pub mod header;
pub mod inject;
pub mod interpreter;
pub mod last_words;
pub mod leaks;
pub mod nofile;
pub mod options;
pub mod pidfd;
pub mod procs;
pub mod run_as;
pub mod run_cgroup;
pub mod scope;
pub mod session;
pub mod signals;
pub mod spawn;
pub mod supervise;
pub mod terminal;
pub mod watchdog;
