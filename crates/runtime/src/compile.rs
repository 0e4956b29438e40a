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
//! The child says how it ended by its exit status alone, never by a message
//! the parent would have to read: 0 with the code on stdout,
//! [`EXIT_INVALID`] for a component that does not compile (the compiler's
//! reason on stderr, for people), [`EXIT_OUT_OF_MEMORY`] when it reached
//! its memory limit. Rust's own answer to a failed allocation is an abort,
//! which looks like any crash, so the engine's allocator
//! ([`ChildAllocator`]) exits with [`EXIT_OUT_OF_MEMORY`] instead when an
//! allocation fails in the child; a failed `mmap` in wasmtime is recognized
//! by its error's type (an `ENOMEM` errno).
//!
//! [`Compiler::InProcess`] (the library's default, used by most tests)
//! compiles in the calling thread, bounded only by [`MAX_PLUGIN_BYTES`].
//!
//! [`MAX_PLUGIN_BYTES`]: super::MAX_PLUGIN_BYTES

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
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
    #[error(
        "the compiler process failed ({status}){}",
        if stderr.is_empty() { String::new() } else { format!(": {stderr}") }
    )]
    Crashed {
        /// How it ended.
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
}

/// Exit status of the child for an invalid component (its stderr says why).
pub const EXIT_INVALID: i32 = 2;

/// Exit status of the child that reached its memory limit
/// (`compileMemoryLimit`).
pub const EXIT_OUT_OF_MEMORY: i32 = 3;

/// Set once the process is the compiler child ([`child_main`]).
static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// The engine's allocator: the system's, except that in the compiler child
/// a failed allocation ends the process at once with
/// [`EXIT_OUT_OF_MEMORY`], which the parent reads as
/// [`Error::OutOfMemory`]. (Rust's default answer, an abort, cannot be told
/// from a crash.) Anywhere else a failed allocation is left to Rust, as with
/// the system allocator. The `nodestatus` binary installs it as its
/// `#[global_allocator]` (a library does not choose its users' allocator).
pub struct ChildAllocator;

impl ChildAllocator {
    fn checked(ptr: *mut u8) -> *mut u8 {
        if ptr.is_null() && IN_CHILD.load(Ordering::Relaxed) {
            // SAFETY: `_exit` ends the process without running any more
            // code of it (no destructor, no allocation).
            unsafe { libc::_exit(EXIT_OUT_OF_MEMORY) }
        }
        ptr
    }
}

// SAFETY: every call is the system allocator's, with the same arguments;
// only a null answer in the child is turned into an exit.
unsafe impl GlobalAlloc for ChildAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::checked(unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::checked(unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::checked(unsafe { System.realloc(ptr, layout, new_size) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Compiles `bytes` with `tier`'s compiler in a child process `exe
/// compile-component <tier>` under `limits`, and returns the precompiled
/// code.
pub fn compile_in_child(
    exe: &std::path::Path,
    limits: CompileLimits,
    tier: crate::Tier,
    bytes: &[u8],
) -> Result<Vec<u8>, Error> {
    use std::os::unix::process::CommandExt;
    let memory = limits.memory;
    let mut command = Command::new(exe);
    command
        .arg(SUBCOMMAND)
        .arg(tier.as_str())
        .env_clear()
        // Few malloc arenas: each reserves address space per thread.
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only async-signal-safe calls
    // (setrlimit, prctl, open, write, close) on values computed before the
    // fork.
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
            // Under the memory limit of a cgroup the two share (a pod's),
            // the kernel's out-of-memory killer takes the compile, not the
            // engine: its load fails (or, behind Winch's code, the plugin
            // stays on it) and the node goes on. Raising one's own score
            // needs no privilege; a failure leaves the default.
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, b"1000".as_ptr().cast(), 4);
                libc::close(fd);
            }
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

/// The child's outcome, from its exit status (see the module docs); its
/// stderr is only carried into the message.
fn classify(
    status: ExitStatus,
    code: Vec<u8>,
    stderr: String,
    limits: CompileLimits,
) -> Result<Vec<u8>, Error> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        if code.is_empty() || code.len() as u64 > MAX_CODE_BYTES {
            return Err(Error::Crashed {
                status: format!("exit 0 with {} bytes of code", code.len()),
                stderr,
            });
        }
        return Ok(code);
    }
    match status.code() {
        Some(EXIT_OUT_OF_MEMORY) => {
            return Err(Error::OutOfMemory {
                limit: limits.memory,
            });
        }
        Some(EXIT_INVALID) => return Err(Error::Invalid(stderr)),
        _ => {}
    }
    let status = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        // nodestatus kills only a child past its deadline (TimedOut): a
        // SIGKILL from elsewhere is, in practice, the kernel's OOM killer
        // under the memory limit of the cgroup (the pod) both processes
        // share, which compileMemoryLimit cannot see coming.
        (None, Some(libc::SIGKILL)) => format!(
            "killed by signal {} (SIGKILL, not sent by nodestatus: most likely the out-of-memory killer, under the memory limit of the container or cgroup nodestatus runs in; compiling a Python or JavaScript plugin takes about 360 MB)",
            libc::SIGKILL
        ),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    };
    Err(Error::Crashed { status, stderr })
}

/// Whether a compile error is the child's memory running out: wasmtime's
/// own [`wasmtime::OutOfMemory`], or an `ENOMEM` from a system call (a
/// failed `mmap` of the code).
fn out_of_memory(err: &wasmtime::Error) -> bool {
    err.chain().any(|c| {
        c.is::<wasmtime::OutOfMemory>()
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::OutOfMemory)
            || c.downcast_ref::<rustix::io::Errno>() == Some(&rustix::io::Errno::NOMEM)
    })
}

/// The child's side: reads a component from stdin, compiles it with the
/// engine's configuration for the tier its argument names (`cranelift`,
/// the default, or `winch`), writes the precompiled code to stdout. Exits
/// 0, [`EXIT_INVALID`] with the reason on stderr, or
/// [`EXIT_OUT_OF_MEMORY`].
pub fn child_main() -> std::process::ExitCode {
    IN_CHILD.store(true, Ordering::Relaxed);
    let arg = std::env::args().nth(2);
    let Some(tier) = crate::Tier::from_arg(arg.as_deref()) else {
        eprintln!("unknown compiler {arg:?}: cranelift or winch");
        return std::process::ExitCode::from(EXIT_INVALID as u8);
    };
    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin()
        .take(super::MAX_PLUGIN_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        eprintln!("cannot read the component from stdin: {err}");
        return std::process::ExitCode::from(EXIT_INVALID as u8);
    }
    let result =
        crate::tier::compile_engine(tier).and_then(|engine| engine.precompile_component(&bytes));
    match result {
        Ok(code) => match std::io::stdout().lock().write_all(&code) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("cannot write the code: {err}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(err) => {
            eprintln!("{err:#}");
            let status = match out_of_memory(&err) {
                true => EXIT_OUT_OF_MEMORY,
                false => EXIT_INVALID,
            };
            std::process::ExitCode::from(status as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn outcome(raw_status: i32, stderr: &str) -> Result<Vec<u8>, Error> {
        let limits = CompileLimits::default();
        classify(
            ExitStatus::from_raw(raw_status),
            Vec::new(),
            stderr.into(),
            limits,
        )
    }

    #[test]
    fn the_exit_status_alone_says_how_the_child_ended() {
        let exit = |code: i32| code << 8;
        assert!(matches!(
            outcome(exit(EXIT_OUT_OF_MEMORY), ""),
            Err(Error::OutOfMemory { limit }) if limit == DEFAULT_COMPILE_MEMORY_LIMIT
        ));
        assert!(matches!(
            outcome(exit(EXIT_INVALID), "failed to parse WebAssembly module"),
            Err(Error::Invalid(m)) if m == "failed to parse WebAssembly module"
        ));
        // What a message says never decides the outcome: an abort that
        // mentions memory is a crash, an invalid component that mentions it
        // is invalid.
        assert!(matches!(
            outcome(libc::SIGABRT, "memory allocation of 4096 bytes failed"),
            Err(Error::Crashed { status, .. }) if status == "killed by signal 6"
        ));
        assert!(matches!(
            outcome(exit(EXIT_INVALID), "Cannot allocate memory (out of memory)"),
            Err(Error::Invalid(_))
        ));
        let killed = outcome(libc::SIGKILL, "").unwrap_err();
        assert!(
            matches!(&killed, Error::Crashed { status, .. } if status.starts_with("killed by signal 9 (SIGKILL, not sent by nodestatus: most likely the out-of-memory killer")),
            "{killed}"
        );
        // No stderr, no trailing colon.
        assert!(killed.to_string().ends_with("about 360 MB))"), "{killed}");
        assert!(matches!(
            outcome(exit(101), "thread 'main' panicked"),
            Err(Error::Crashed { status, .. }) if status == "exit status 101"
        ));
    }

    #[test]
    fn an_enomem_anywhere_in_the_chain_is_out_of_memory() {
        let io = wasmtime::Error::new(std::io::Error::from(std::io::ErrorKind::OutOfMemory))
            .context("mmap failed");
        assert!(out_of_memory(&io));
        let errno = wasmtime::Error::new(rustix::io::Errno::NOMEM).context("mmap failed");
        assert!(out_of_memory(&errno));
        let other = wasmtime::Error::msg("out of memory").context("failed to parse");
        assert!(!out_of_memory(&other), "text is never read");
    }
}
