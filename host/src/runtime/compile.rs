//! Compiling an untrusted component with bounded time and memory.
//!
//! Cranelift cannot be interrupted, and a small component can ask it for a
//! lot: one function of a million instructions compiles for seconds and
//! takes hundreds of MiB. A plugin's CPU deadline and memory cap bound its
//! *calls*, not its compilation, so the engine compiles in a child process
//! ([`Compiler::Process`]): the engine's own binary, run with the hidden
//! `compile-component` subcommand ([`child_main`]), under `RLIMIT_DATA`
//! (the memory it may allocate) and a wall-clock deadline after which it is
//! killed. The child gets the component on stdin and answers the
//! precompiled code on stdout, which the parent deserializes with an engine
//! of the same configuration (and stores in the precompile cache).
//!
//! The child is the engine's own binary, run as the engine's own user, so
//! its output is trusted as the precompile cache is: only code the same
//! engine compiled is ever deserialized. A child that runs out of memory,
//! runs out of time, crashes or answers garbage is reported as a typed
//! [`Error`], and the load of that one plugin fails.
//!
//! [`Compiler::InProcess`] (the library's default, used by most tests)
//! compiles in the calling thread, bounded only by [`MAX_PLUGIN_BYTES`].
//!
//! [`MAX_PLUGIN_BYTES`]: super::MAX_PLUGIN_BYTES

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The name of the hidden subcommand that compiles one component.
pub const SUBCOMMAND: &str = "compile-component";

/// The default deadline of one compilation (`compileTimeout`).
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// The default memory a compilation may allocate (`compileMemoryLimit`).
pub const DEFAULT_COMPILE_MEMORY_LIMIT: u64 = 2 << 30;

/// The most stderr kept from a failed child.
const MAX_STDERR: u64 = 16 << 10;

/// The most precompiled code accepted from a child.
const MAX_CODE_BYTES: u64 = 1 << 30;

/// How a component is compiled.
#[derive(Debug, Clone, Default)]
pub enum Compiler {
    /// In the calling thread, with no bound but the file size.
    #[default]
    InProcess,
    /// In a child process: `exe compile-component`, with these limits.
    Process {
        /// The engine's binary (the running `nodestatus`).
        exe: PathBuf,
        /// Its deadline and memory.
        limits: CompileLimits,
    },
}

/// The bounds of one compilation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// The deadline, after which the child is killed (`compileTimeout`).
    pub timeout: Duration,
    /// The memory the child may allocate, in bytes (`compileMemoryLimit`),
    /// set as its `RLIMIT_DATA`.
    pub memory: u64,
}

impl Default for CompileLimits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_COMPILE_TIMEOUT,
            memory: DEFAULT_COMPILE_MEMORY_LIMIT,
        }
    }
}

/// Why a child compilation gave no code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The child could not be started.
    #[error("cannot start the compiler process {}", .exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The compilation ran past its deadline and was killed.
    #[error(
        "compiling it took longer than the {limit:?} limit and was stopped; raise `compileTimeout` in the config if this component is trusted and large"
    )]
    TimedOut {
        /// The deadline.
        limit: Duration,
    },
    /// The compilation asked for more memory than its limit.
    #[error(
        "compiling it needed more than the {limit}-byte limit and was stopped; raise `compileMemoryLimit` in the config if this component is trusted and large"
    )]
    OutOfMemory {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The component is not valid (the compiler's own message).
    #[error("{0}")]
    Invalid(String),
    /// The child died or answered something other than code.
    #[error("the compiler process failed ({status}): {stderr}")]
    Crashed {
        /// How it ended.
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
}

/// Exit status of the child for an invalid component (its stderr says why).
const EXIT_INVALID: i32 = 2;

/// Compiles `bytes` in a child process `exe compile-component` under
/// `limits`, and returns the precompiled code.
pub fn compile_in_child(
    exe: &std::path::Path,
    limits: CompileLimits,
    bytes: &[u8],
) -> Result<Vec<u8>, Error> {
    use std::os::unix::process::CommandExt;
    let memory = limits.memory;
    let mut command = Command::new(exe);
    command
        .arg(SUBCOMMAND)
        .env_clear()
        // Few malloc arenas: each reserves address space per thread.
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only async-signal-safe calls
    // (setrlimit, prctl) on values computed before the fork.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: memory,
                rlim_max: memory,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The child never outlives the engine.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| Error::Spawn {
        exe: exe.to_owned(),
        source,
    })?;
    let started = Instant::now();

    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (code, err_text) = std::thread::scope(|s| {
        // A child that dies early closes the pipe: the write error is
        // then the child's exit status's to explain.
        s.spawn(move || {
            let _ = stdin.write_all(bytes);
        });
        let out = s.spawn(move || {
            let mut code = Vec::new();
            let _ = (&mut stdout)
                .take(MAX_CODE_BYTES + 1)
                .read_to_end(&mut code);
            code
        });
        let err = s.spawn(move || {
            let mut text = Vec::new();
            let _ = (&mut stderr).take(MAX_STDERR).read_to_end(&mut text);
            String::from_utf8_lossy(&text).trim().to_owned()
        });
        let status = wait_until(&mut child, started + limits.timeout);
        (out.join(), (status, err.join()))
    });
    let code = code.unwrap_or_default();
    let (status, stderr) = err_text;
    let stderr = stderr.unwrap_or_default();
    let Some(status) = status else {
        return Err(Error::TimedOut {
            limit: limits.timeout,
        });
    };
    classify(status, code, stderr, limits)
}

/// Waits for `child` until `deadline`; kills it (and returns `None`) after.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => break,
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn classify(
    status: ExitStatus,
    code: Vec<u8>,
    stderr: String,
    limits: CompileLimits,
) -> Result<Vec<u8>, Error> {
    use std::os::unix::process::ExitStatusExt;
    // Rust aborts on a failed allocation ("memory allocation of N bytes
    // failed"); wasmtime reports a failed mmap as ENOMEM.
    let out_of_memory = stderr.contains("memory allocation of")
        || stderr.contains("Cannot allocate memory")
        || stderr.contains("out of memory");
    if status.success() {
        if code.is_empty() || code.len() as u64 > MAX_CODE_BYTES {
            return Err(Error::Crashed {
                status: format!("exit 0 with {} bytes of code", code.len()),
                stderr,
            });
        }
        return Ok(code);
    }
    if out_of_memory {
        return Err(Error::OutOfMemory {
            limit: limits.memory,
        });
    }
    if status.code() == Some(EXIT_INVALID) {
        return Err(Error::Invalid(stderr));
    }
    let status = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    };
    Err(Error::Crashed { status, stderr })
}

/// The child's side: reads a component from stdin, compiles it with the
/// engine's configuration, writes the precompiled code to stdout. Exits 0,
/// or [`EXIT_INVALID`] with the reason on stderr.
pub fn child_main() -> std::process::ExitCode {
    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin()
        .take(super::MAX_PLUGIN_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        eprintln!("cannot read the component from stdin: {err}");
        return std::process::ExitCode::from(EXIT_INVALID as u8);
    }
    let result = super::compile_engine()
        .map_err(|e| format!("{e:#}"))
        .and_then(|engine| {
            engine
                .precompile_component(&bytes)
                .map_err(|e| format!("{e:#}"))
        });
    match result {
        Ok(code) => match std::io::stdout().lock().write_all(&code) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("cannot write the code: {err}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("{message}");
            std::process::ExitCode::from(EXIT_INVALID as u8)
        }
    }
}
