//! The commands roofline measures: finding the program the way `execvp` will, once, before
//! anything starts, so that every backend refuses a missing or unrunnable command with the same
//! cause and hint; the exit code a finished one passes on.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::error::{Error, Result};

/// The search path when the environment has no PATH.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A command line to run: under counters, under the tracer or natively.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// `argv[0]` as [`resolve_program`](crate::counters::command::resolve_program) found it,
    /// once, before anything started; the child gets this path as its `argv[0]`.
    pub program: PathBuf,
    /// The command line, `argv[0]` as the user wrote it.
    pub argv: Vec<String>,
    /// Variables added to the command's environment.
    pub env: Vec<(String, String)>,
}

impl CommandSpec {
    /// The command line as a [`std::process::Command`] (no shell): its resolved program, its
    /// arguments, its added variables; stdio inherited unless the caller sets it.
    pub fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command
            .args(self.argv.get(1..).unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Start `command` (made by [`CommandSpec::command`]) and wait for it to end: a command
    /// that cannot start is an input error naming the program.
    pub fn run_to_end(&self, command: &mut std::process::Command) -> Result<ExitStatus> {
        let mut child = command.spawn().map_err(|e| {
            Error::input(
                format!("cannot run {}: {e}", self.program.display()),
                "check the command and its permissions",
            )
        })?;
        child.wait().map_err(|e| Error::io("waiting for the command", e))
    }

    /// `argv` with its program resolved ([`resolve_program`]) and no variables added: a
    /// missing, non-executable or empty command is an input error here, before anything runs.
    pub fn resolve(argv: &[String]) -> Result<CommandSpec> {
        let Some(program) = argv.first() else {
            return Err(Error::input("no command given", "roofline measure -- CMD [ARGS…]"));
        };
        Ok(CommandSpec {
            program: resolve_program(program)?,
            argv: argv.to_vec(),
            env: Vec::new(),
        })
    }
}

/// Resolve CMD the way execvp will, so a missing or non-executable command is reported with
/// its path before anything starts: "PATH is a directory", "PATH is not executable", "CMD: no
/// such file", "command not found: CMD (not in PATH)". A CMD with a slash is taken as a path;
/// otherwise each PATH directory is tried in order, non-executable matches skipped (as execvp
/// does) and reported only when nothing executable is found.
pub fn resolve_program(cmd: &str) -> Result<PathBuf> {
    if cmd.is_empty() {
        return Err(Error::input("no command given", "roofline measure -- CMD [ARGS…]"));
    }
    if cmd.contains('/') {
        let p = Path::new(cmd);
        return program_at(p).unwrap_or_else(|| Err(Error::input(format!("{cmd}: no such file"), "check the command's path")));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    let mut first_refusal = None;
    for dir in std::env::split_paths(&path) {
        match program_at(&dir.join(cmd)) {
            Some(Ok(p)) => return Ok(p),
            Some(Err(e)) => {
                first_refusal.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first_refusal.unwrap_or_else(|| {
        Error::input(
            format!("command not found: {cmd} (not in PATH)"),
            "give the program's full path (commands run without a shell)",
        )
    }))
}

/// What is at `p`: nothing (`None`), a program execve would run, or why it would refuse it.
fn program_at(p: &Path) -> Option<Result<PathBuf>> {
    let md = std::fs::metadata(p).ok()?;
    if md.is_dir() {
        return Some(Err(Error::input(
            format!("{} is a directory", p.display()),
            "give the path of a program, not of a directory",
        )));
    }
    if md.permissions().mode() & 0o111 == 0 {
        return Some(Err(Error::input(
            format!("{} is not executable", p.display()),
            "give the path of a program (chmod +x if it is yours)",
        )));
    }
    Some(Ok(p.to_path_buf()))
}

/// The exit code to pass through for a finished command: its status, or 128 + signal.
pub fn exit_code(status: &ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        _ => (1, None),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_program;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn resolve_says_what_is_wrong_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "text").unwrap();
        let e = resolve_program(plain.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("not executable") && e.contains("plain.txt"), "{e}");
        let d = resolve_program(dir.path().to_str().unwrap()).unwrap_err().to_string();
        assert!(d.contains("is a directory") && d.contains(dir.path().to_str().unwrap()), "{d}");
        let m = resolve_program("/no/such/prog").unwrap_err().to_string();
        assert!(m.contains("/no/such/prog: no such file"), "{m}");
        let exe = dir.path().join("run.sh");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve_program(exe.to_str().unwrap()).unwrap(), exe);
    }

    #[test]
    fn programs_resolve_like_execvp() {
        assert!(resolve_program("sh").is_ok());
        let e = resolve_program("surely-not-a-command-xyz").unwrap_err().to_string();
        assert!(e.contains("command not found: surely-not-a-command-xyz"), "{e}");
        assert!(e.contains("hint:"), "{e}");
        assert!(resolve_program("/etc/passwd").is_err());
        let e = resolve_program("").unwrap_err().to_string();
        assert!(e.contains("no command given"), "{e}");
    }
}
