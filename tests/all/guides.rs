//! The first-setter guides (docs/first-setter-{rust,python,javascript,c,go}.md)
//! run as written (issue 34): every ```sh block in order, in one shell, from
//! a fresh `HOME`, against this checkout (`$NS`) and this build's
//! `nodestatus` (installed by the guide's own `$NS/scripts/install.sh`).
//!
//! What the reader writes comes from the guide: an HTML comment just before
//! a block, invisible when the Markdown is rendered, says what the test
//! does with it:
//!
//! - `<!-- file: PATH -->`: the block is written to PATH (from the shell's
//!   directory at that point), with `/path/to/nodestatus` read as `$NS`.
//! - `<!-- skip: REASON -->`: the block is not run (a cluster, `sudo`).
//! - ``<!-- instead of `LINE`: COMMAND -->``: in the next ```sh block, the
//!   line that starts with LINE runs COMMAND instead (what needs the network
//!   or a cluster, replaced by the cached toolchains or by what it would
//!   leave behind).
//!
//! A ```rust, ```toml, ```python, ```js, ```c, ```go or ```gomod block with
//! no marker fails
//! the test: each must be written somewhere or skipped on purpose. Other
//! blocks (```yaml, ```json, bare output) are what the reader sees; the
//! test checks the parts of them that do not depend on the machine.
//!
//! The toolchains are the ones the guests' scripts install once under
//! `~/.cache/nodestatus/toolchains` (scripts/test.sh runs them before these
//! tests; the setters' `build.sh` in each guide's step 0 installs them on
//! first use too, as tests/all/scaffold.rs relies on).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The source checkout this test runs from (the guides' `$NS`).
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// This user's `$HOME`-derived directory `var`, else `$HOME/default`.
fn home_dir_of(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(default))
}

/// What a marker asks of the next block.
#[derive(Debug)]
enum Marker {
    File(String),
    Skip,
    Instead(String, String),
}

fn parse_marker(line: &str) -> Option<Marker> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(rest) = inner.strip_prefix("file:") {
        let path = rest.split_whitespace().next().expect("file: PATH");
        return Some(Marker::File(path.to_owned()));
    }
    if inner.starts_with("skip:") {
        return Some(Marker::Skip);
    }
    if let Some(rest) = inner.strip_prefix("instead of `") {
        let (line, cmd) = rest
            .split_once("`: ")
            .unwrap_or_else(|| panic!("instead of `LINE`: COMMAND, not {inner:?}"));
        return Some(Marker::Instead(line.to_owned(), cmd.trim().to_owned()));
    }
    None
}

/// The guide as one bash script: its ```sh blocks, with the marked lines
/// replaced, and its marked files written where the reader is at that point.
fn guide_script(doc: &str, ns: &Path) -> String {
    let mut script = String::new();
    let mut markers: Vec<Marker> = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        if let Some(m) = parse_marker(line) {
            markers.push(m);
            continue;
        }
        let Some(lang) = line.strip_prefix("```") else {
            assert!(
                line.trim().is_empty() || markers.is_empty(),
                "line {}: a marker ({markers:?}) not just before a block",
                n + 1
            );
            continue;
        };
        let mut body = String::new();
        for (_, l) in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        let at = format!("line {}: ```{lang}", n + 1);
        let file = markers.iter().find_map(|m| match m {
            Marker::File(p) => Some(p.clone()),
            _ => None,
        });
        let skip = markers.iter().any(|m| matches!(m, Marker::Skip));
        let instead: Vec<(String, String)> = markers
            .drain(..)
            .filter_map(|m| match m {
                Marker::Instead(l, c) => Some((l, c)),
                _ => None,
            })
            .collect();
        if skip {
            script.push_str(&format!("# {at}: skipped\n"));
            continue;
        }
        if let Some(path) = file {
            assert!(instead.is_empty(), "{at}: file and instead");
            let body = body.replace("/path/to/nodestatus", &ns.display().to_string());
            script.push_str(&format!(
                "echo '== {at}: {path}' >&2\nmkdir -p \"$(dirname '{path}')\"\ncat > '{path}' <<'NODESTATUS_GUIDE_FILE'\n{body}NODESTATUS_GUIDE_FILE\n"
            ));
            continue;
        }
        match lang {
            "sh" => {
                let mut body = body;
                for (line, cmd) in instead {
                    let found: Vec<&str> = body
                        .lines()
                        .filter(|l| l.trim_start().starts_with(line.as_str()))
                        .collect();
                    assert_eq!(found.len(), 1, "{at}: instead of `{line}`: {found:?}");
                    let found = found[0].to_owned();
                    body = body.replacen(&found, &cmd, 1);
                }
                script.push_str(&format!("echo '== {at}' >&2\n{body}"));
            }
            "rust" | "toml" | "python" | "js" | "c" | "go" | "gomod" => {
                panic!("{at} has no marker: <!-- file: PATH --> or <!-- skip: why -->")
            }
            _ => assert!(instead.is_empty(), "{at}: instead of, in a block not run"),
        }
    }
    assert!(markers.is_empty(), "markers at the end: {markers:?}");
    script
}

/// What a guide's run left: its output and its reader's `HOME`.
struct Run {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    out: String,
}

impl Run {
    fn has(&self, text: &str) -> bool {
        self.out.contains(text)
    }

    /// Fails, with what the guide's commands printed, unless they printed
    /// `text`.
    #[track_caller]
    fn saw(&self, text: &str) {
        assert!(self.has(text), "not printed: {text}\n{}", self.out);
    }

    /// `nodestatus` with `args`, under the guide's `HOME`.
    fn nodestatus(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(args)
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }
}

/// Runs docs/`name` as written (see the module's doc), from a fresh `HOME`.
fn run_guide(name: &str) -> Run {
    let ns = checkout();
    let doc = std::fs::read_to_string(ns.join("docs").join(name)).unwrap();
    let script = guide_script(&doc, &ns);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    // The toolchains, installed once for every run, where the guides say.
    let cache = home_dir_of("NODESTATUS_CACHE", ".cache/nodestatus");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, home.join(".cache/nodestatus")).unwrap();
    let path = std::env::join_paths(
        std::iter::once(home.join(".local/bin"))
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&home)
        .env("HOME", &home)
        .env("PATH", path)
        .env("NODESTATUS_CHECKOUT", &ns)
        // install.sh installs this build: nothing is built.
        .env("NODESTATUS_BIN", env!("CARGO_BIN_EXE_nodestatus"))
        .env("NODESTATUS_CACHE", &cache)
        .env("CARGO_HOME", home_dir_of("CARGO_HOME", ".cargo"))
        .env("RUSTUP_HOME", home_dir_of("RUSTUP_HOME", ".rustup"))
        .env("CARGO_NET_OFFLINE", "true")
        // Where the Rust guide's crates build (their target/ links there),
        // so that their dependencies compile once for every run.
        .env(
            "GUIDE_CARGO_TARGET",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("guides-target"),
        )
        .env("NO_COLOR", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("NODESTATUS")
        .env_remove("NS")
        .env_remove("PLUGINS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("KUBECONFIG")
        .env_remove("NODESTATUS_RUN_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} failed after {:?}:\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- script\n{script}",
        started.elapsed()
    );
    eprintln!("{name}: {:?}", started.elapsed());
    Run {
        home,
        out: format!("{stdout}\n{stderr}"),
        _tmp: tmp,
    }
}

/// The guide's `nodestatus plugin check` found the component of WIT 0.2,
/// and `nodestatus new`'s setter built and labelled the node (step 0).
fn assert_checked_and_scaffolded(run: &Run) {
    run.saw("\"wit\": \"0.2\"");
    assert!(
        run.has("\"my-setter.nodestatus.io/kernel\""),
        "no label of step 0's setter:\n{}",
        run.out
    );
}

/// The dropped plugin, as the engine finds it in `$PLUGINS` with the config
/// the guide left (what `kubectl get node` would show): the node
/// `nodestatus once` prints.
fn once_in_plugins(run: &Run, config: Option<&str>) -> (String, String) {
    let plugins = run.home.join(".local/share/nodestatus/plugins");
    let mut args = vec![
        "once",
        "--strict",
        "--plugin-dir",
        plugins.to_str().unwrap(),
    ];
    let config = config.map(|c| run.home.join(c));
    if let Some(c) = &config {
        args.extend(["--config", c.to_str().unwrap()]);
    }
    let out = run.nodestatus(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn the_rust_guide_runs_as_written() {
    let run = run_guide("first-setter-rust.md");
    assert_checked_and_scaffolded(&run);
    // `once` on ~/try: stderr says what it set, the Node has the labels.
    run.saw("os-release-labels 0.1.0: set metadata.labels[");
    run.saw("\"feature.node.kubernetes.io/system-os_release.ID\"");
    let (node, _) = once_in_plugins(&run, None);
    assert!(
        node.contains("\"feature.node.kubernetes.io/system-os_release.VERSION_ID\""),
        "{node}"
    );
}

#[test]
fn the_python_guide_runs_as_written() {
    let run = run_guide("first-setter-python.md");
    assert_checked_and_scaffolded(&run);
    // The native run prints the setter's part.
    run.saw("{\"metadata\":{\"labels\":{\"example.com/reboot-required\":");
    run.saw("reboot-required 0.1.0: set metadata.labels[example.com/reboot-required], status.conditions[RebootRequired]");
    let node = std::fs::read_to_string(run.home.join("reboot-required/node.json")).unwrap();
    assert!(node.contains("\"type\": \"RebootRequired\""), "{node}");
    // The grant appended to the default config, as step 5 says, is a valid
    // config that grants /run to the dropped setter.
    let (node, stderr) = once_in_plugins(&run, Some(".config/nodestatus/config.yaml"));
    assert!(node.contains("\"type\": \"RebootRequired\""), "{node}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
    // Step 6's reactor: its tests, and `plugin check` with the kmsg grant.
    run.saw("test_a_read_only_remount_makes_the_condition_true_with_an_event");
    run.saw("\"source\": \"kmsg\"");
}

#[test]
fn the_javascript_guide_runs_as_written() {
    let run = run_guide("first-setter-javascript.md");
    assert_checked_and_scaffolded(&run);
    // node --test: the guide's three tests pass.
    assert!(run.has("# pass 3") || run.has("ℹ pass 3"), "{}", run.out);
    // jco: the component exports the setter of WIT 0.2.
    run.saw("nodestatus:plugin/setter@0.2.1");
    run.saw("\"message\": \"no reboot is required\"");
    run.saw("reboot-required 0.1.0: set metadata.labels[example.com/reboot-required], status.conditions[RebootRequired]");
    let (node, stderr) = once_in_plugins(&run, Some(".config/nodestatus/config.yaml"));
    assert!(node.contains("\"reason\": \"NoRebootRequired\""), "{node}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
    // Step 7's reactor: built with the world reactor-plugin, and `plugin
    // check` with the kmsg grant.
    run.saw("world: reactor-plugin");
    run.saw("\"source\": \"kmsg\"");
}

#[test]
fn the_c_guide_runs_as_written() {
    let run = run_guide("first-setter-c.md");
    assert_checked_and_scaffolded(&run);
    // The native runs: without the file, then with /tmp/rr and its packages.
    run.saw("\"reason\":\"NoRebootRequired\",\"message\":\"\"}]}}");
    assert!(
        run.has(
            "\"message\":\"a package update needs a reboot: linux-image-6.1.0-28-amd64,libc6\"}]}}"
        ),
        "{}",
        run.out
    );
    // plugin check without a config: /run is withheld.
    run.saw("\"path /run\"");
    // `once` over ~/one with the config step 6 appended to.
    run.saw("reboot-required 0.1.0: set status.conditions[RebootRequired]");
    // Step 7's reactor: its native test, and `plugin check` with the kmsg grant.
    run.saw("oom-kill: all 6 checks passed");
    run.saw("\"source\": \"kmsg\"");
    let (node, stderr) = once_in_plugins(&run, Some(".config/nodestatus/config.yaml"));
    assert!(node.contains("\"type\": \"RebootRequired\""), "{node}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_go_guide_runs_as_written() {
    let run = run_guide("first-setter-go.md");
    assert_checked_and_scaffolded(&run);
    // go test -v: the part without the file, then with /tmp/rr and its
    // packages, and the Warning event the FakeHost kept.
    run.saw("\"reason\":\"NoRebootRequired\",\"message\":\"\"}]}}");
    run.saw(
        "\"message\":\"a package update needs a reboot: linux-image-6.1.0-28-amd64,libc6\"}]}}",
    );
    run.saw(
        "[{1 RebootRequired a package update needs a reboot: linux-image-6.1.0-28-amd64,libc6}]",
    );
    // plugin check without a config: /run is withheld.
    run.saw("\"path /run\"");
    // `once` over ~/one with the config step 6 appended to.
    run.saw("reboot-required 0.1.0: set metadata.labels[example.com/reboot-required], status.conditions[RebootRequired]");
    // Step 7's reactor: its test, and `plugin check` with the kmsg grant.
    run.saw("--- PASS: TestAHungTaskMakesTheConditionTrueWithAnEvent");
    run.saw("\"source\": \"kmsg\"");
    let (node, stderr) = once_in_plugins(&run, Some(".config/nodestatus/config.yaml"));
    assert!(node.contains("\"type\": \"RebootRequired\""), "{node}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

/// Each guide's "React to the kernel log" shows its language's reacting
/// test component (tests/all/guests.rs, `reacts_in_the_runtime`) as it is,
/// but for the JavaScript component's imports of the repository's SDK
/// (`../../../../sdk/js/`), which the guide's folder holds at `./`.
#[test]
fn the_guides_show_the_reacting_test_components_as_they_are() {
    let ns = checkout();
    for (guide, files) in [
        (
            "first-setter-javascript.md",
            &[
                "tests/components/js/nvme-reset/setter.js",
                "tests/components/js/nvme-reset/setter.test.js",
            ][..],
        ),
        (
            "first-setter-go.md",
            &[
                "tests/components/go/hung-task/main.go",
                "tests/components/go/hung-task/main_test.go",
            ][..],
        ),
        (
            "first-setter-python.md",
            &[
                "tests/components/python/readonly-fs/app.py",
                "tests/components/python/readonly-fs/test_app.py",
            ][..],
        ),
        (
            "first-setter-c.md",
            &[
                "tests/components/c/oom-kill/setter.c",
                "tests/components/c/oom-kill/test_setter.c",
            ][..],
        ),
    ] {
        let doc = std::fs::read_to_string(ns.join("docs").join(guide)).unwrap();
        let section = doc
            .split_once("React to the kernel log\n")
            .unwrap_or_else(|| panic!("{guide} has no section React to the kernel log"))
            .1;
        for f in files {
            let code = std::fs::read_to_string(ns.join(f))
                .unwrap()
                .replace("'../../../../sdk/js/", "'./");
            assert!(
                section.contains(&code),
                "{guide} does not show {f} as it is"
            );
        }
    }
}
