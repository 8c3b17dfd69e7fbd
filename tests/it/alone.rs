//! A python3 whose file pages no process outside one server's tree maps,
//! for the tests that hold two readers of one server's memory to 1 MiB.
//!
//! memrel reads a tree's host memory as the sum of its processes' `Pss`: a
//! page shared with a process outside the tree counts a share, and that
//! share moves whenever any other process on the machine maps or unmaps the
//! same file (another test's python3 starting, libpython's pages). Two
//! readings of the same server state a millisecond apart, one by `memrel
//! watch`, one by `memrel drive`, then differ by up to 2.3 MiB on a busy
//! machine, for a reason outside both. Here the server runs on private
//! copies of the interpreter and of every library and extension module it
//! maps (found by starting it once with the machine's python3 and reading
//! its `/proc/PID/maps`), so only the dynamic loader and locale files stay
//! shared, and the two readings must agree on the whole host.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::children_of;
use super::drive::{start_server_with, stop, Server};
use super::watch_servers::Killed;

/// The private interpreter: `bin/python3`, the libraries under `lib/`
/// (`LD_LIBRARY_PATH`), the extension modules under `dynload/`
/// (`PYTHONPATH`, ahead of the stdlib's), the stdlib itself found through
/// `PYTHONHOME`. A server's children started from `sys.executable` inherit it.
pub(crate) struct PrivatePython {
    python: PathBuf,
    env: Vec<(&'static str, OsString)>,
}

impl PrivatePython {
    /// Copies python3 and what a server of `script ARGS` maps once started
    /// into `dir`.
    pub(crate) fn for_server(dir: &Path, script: &str, args: &[&str]) -> PrivatePython {
        let (probe, _) = start_server_with(&mut Command::new("python3"), script, args);
        // Its workers too (the v2-shaped server starts one that outlives it).
        let workers = Killed(children_of(probe.id()));
        let python = PrivatePython::of_tree(dir, probe.id());
        stop(probe);
        drop(workers);
        python
    }

    /// Copies the python3 of the process `root` and every library it and
    /// its descendants map into `dir`, but those of a `site-packages`
    /// (a venv's, which no process outside the tree maps).
    pub(crate) fn of_tree(dir: &Path, root: u32) -> PrivatePython {
        let exe = std::fs::read_link(format!("/proc/{root}/exe")).expect("the root's python3");
        let mut maps = String::new();
        let mut tree = vec![i64::from(root)];
        while let Some(pid) = tree.pop() {
            tree.extend(children_of(u32::try_from(pid).expect("a pid")));
            maps += &std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        }
        let (bin, lib, dynload) = (dir.join("bin"), dir.join("lib"), dir.join("dynload"));
        for d in [&bin, &lib, &dynload] {
            std::fs::create_dir_all(d).expect("the private python's directories");
        }
        let python = bin.join("python3");
        std::fs::copy(&exe, &python).expect("copy python3");
        let mapped: std::collections::BTreeSet<&str> = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|path| path.contains(".so") && !path.contains("/ld-linux"))
            .filter(|path| !path.contains("/site-packages/"))
            .collect();
        for path in mapped {
            let from = Path::new(path);
            let name = from.file_name().expect("a library's name");
            let into = if path.contains("/lib-dynload/") {
                &dynload
            } else {
                &lib
            };
            std::fs::copy(from, into.join(name)).expect("copy a library");
            // The loader asks for the soname (libz.so.1 for libz.so.1.2.13).
            let name = name.to_str().expect("a utf-8 library name");
            let mut short = name;
            while let Some((head, tail)) = short.rsplit_once('.') {
                if !tail.bytes().all(|b| b.is_ascii_digit()) || !head.contains(".so") {
                    break;
                }
                short = head;
                let link = into.join(short);
                if !link.exists() {
                    std::os::unix::fs::symlink(name, link).expect("a soname link");
                }
            }
        }
        let home = Command::new(&exe)
            .args(["-c", "import sys; print(sys.base_prefix)"])
            .output()
            .expect("python3 says its prefix");
        let home = String::from_utf8(home.stdout).expect("a utf-8 prefix");
        PrivatePython {
            python,
            env: vec![
                ("LD_LIBRARY_PATH", lib.into_os_string()),
                ("PYTHONPATH", dynload.into_os_string()),
                ("PYTHONHOME", home.trim().into()),
            ],
        }
    }

    /// The private python3 with its environment; `paths` go on
    /// `PYTHONPATH` after its extension modules (a venv's site-packages).
    pub(crate) fn command(&self, paths: &[&Path]) -> Command {
        let mut command = Command::new(&self.python);
        for (key, value) in &self.env {
            let mut value = value.clone();
            if *key == "PYTHONPATH" {
                for path in paths {
                    value.push(":");
                    value.push(path);
                }
            }
            command.env(key, value);
        }
        command
    }

    /// The private python3.
    pub(crate) fn path(&self) -> &Path {
        &self.python
    }

    /// Its environment, on `command` (a memrel that starts the server).
    pub(crate) fn env_on<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command.envs(self.env.iter().map(|(k, v)| (k, v)))
    }

    /// `drive::start_server` on this interpreter.
    pub(crate) fn start_server(&self, script: &str, args: &[&str]) -> (Server, u16) {
        start_server_with(&mut self.command(&[]), script, args)
    }
}

/// The private interpreter shares no library with the machine's python3: a
/// server started on it maps nothing under the machine's python3's prefix
/// and no library but the loader from outside its directory.
#[test]
fn a_server_on_the_private_python_maps_only_its_own_copies() {
    let work = tempfile::tempdir().expect("tempdir");
    let script = super::drive::VLLM_LIKE;
    let args = ["--weights-mib", "8", "--kv-mib", "8"];
    let python = PrivatePython::for_server(work.path(), script, &args);
    let (server, _) = python.start_server(script, &args);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.id())).expect("maps");
    stop(server);
    let outside: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains(".so") && !p.contains("/ld-linux"))
        .filter(|p| !p.starts_with(work.path().to_str().expect("utf-8 tempdir")))
        .collect();
    assert!(outside.is_empty(), "shared with the machine: {outside:?}");
    assert!(
        maps.contains(&format!("{}/bin/python3", work.path().display())),
        "{maps}"
    );
}
