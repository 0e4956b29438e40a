//! The `nodestatus` command: its definitions and dispatch. Each command
//! lives in its own file of [`nodestatus::cli`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nodestatus::cli::{self, LogFormat};
use nodestatus_runtime::compile;

/// In the compile child, a failed allocation exits with a status the
/// parent reads as out of memory.
#[global_allocator]
static ALLOCATOR: compile::ChildAllocator = compile::ChildAllocator;

/// A Kubernetes node status engine whose setters are sandboxed WebAssembly components.
#[derive(Parser)]
#[command(name = "nodestatus", version, about, long_about = None)]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Register this node and keep its status and lease current.
    ///
    /// Connects with --kubeconfig, $KUBECONFIG or the in-cluster config; with
    /// none of them, starts a local etcd and kube-apiserver on loopback (the
    /// embedded default) and registers this machine with a
    /// system:node:<name> identity.
    Run(Box<cli::run::Args>),
    /// Run N simulated nodes in one process against one apiserver.
    ///
    /// Each node runs the real setters over a simulated machine of its own.
    /// Needs a credential allowed to write nodes, nodes/status and leases
    /// (deploy/kubernetes/simulate/rbac.yaml), never a node's own.
    Simulate(Box<cli::simulate::Args>),
    /// Run every setter once over a node and print the resulting Node JSON.
    ///
    /// The node comes from --node, or is a fresh initial node named after
    /// --node-name (default: this machine's hostname). What each plugin
    /// changed, or why it failed, goes to stderr. The config's plugins with
    /// an `image:` run beside the plugin directory's, taken as `run` takes
    /// them (cache, else registry, signatures verified); one that cannot be
    /// had fails the command.
    Once(Box<cli::once::Args>),
    /// Check configuration, or print the embedded default.
    #[command(subcommand)]
    Config(cli::config::Command),
    /// Print the version of nodestatus, of its WIT package and of wasmtime.
    Version,
    /// Start a new setter: a directory that builds, tests and checks it with
    /// one command (`./build.sh`).
    New(cli::new::Args),
    /// Write the SDKs, WIT and build scripts that the setters of `nodestatus
    /// new` build with (their build.sh runs it), and print where.
    Kit(cli::new::KitArgs),
    /// Inspect plugins.
    #[command(subcommand)]
    Plugin(Box<cli::plugin::Command>),
}

fn main() -> ExitCode {
    // The engine compiles each plugin in a child of itself, bounded in time
    // and memory (nodestatus::runtime::compile); not a user command.
    if std::env::args_os().nth(1).as_deref() == Some(compile::SUBCOMMAND.as_ref()) {
        return compile::child_main();
    }
    let cli = Cli::parse();
    cli::init(
        cli.log_format,
        !matches!(cli.command, Command::Run(_) | Command::Simulate(_)),
    );
    cli::exit(match cli.command {
        Command::Run(args) => cli::run::execute(*args),
        Command::Simulate(args) => cli::simulate::execute(*args),
        Command::Once(args) => args.execute(),
        Command::Config(command) => command.execute(),
        Command::Version => cli::version::execute(),
        Command::New(args) => args.execute(),
        Command::Kit(args) => args.execute(),
        Command::Plugin(command) => command.execute(),
    })
}

#[test]
fn the_command_definitions_are_valid() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

/// The book's two pages written from the code: the command-line reference
/// (every command's long help) and the configuration reference (the list
/// of settings). A test fails when either file is not what the code
/// renders; `NODESTATUS_BLESS=1` writes them.
#[cfg(test)]
mod reference {
    use clap::CommandFactory;

    /// The command to write them again, said when they are stale.
    const BLESS: &str = "NODESTATUS_BLESS=1 cargo test -p nodestatus --bin nodestatus reference";

    /// docs/reference/cli.md: each command's long help (`nodestatus
    /// <command> --help`), as clap prints it at 100 columns.
    fn cli() -> String {
        fn walk(cmd: &mut clap::Command, path: &str, out: &mut String) {
            let help = cmd.render_long_help().to_string();
            let help: Vec<&str> = help.trim_end().lines().map(str::trim_end).collect();
            *out += &format!("\n## {path}\n\n```text\n{}\n```\n", help.join("\n"));
            for sub in cmd.get_subcommands_mut() {
                if sub.get_name() != "help" && !sub.is_hide_set() {
                    let path = format!("{path} {}", sub.get_name());
                    walk(sub, &path, out);
                }
            }
        }
        let mut cmd = super::Cli::command().term_width(100);
        cmd.build();
        let mut out = format!(
            "# Command-line reference\n\n\
             <!-- Written from the command's definitions (host/src/main.rs, \
             host/src/cli/) by `{BLESS}`; do not edit. -->\n\n\
             Each command's `--help`. The flags named after a config file key \
             are that key (flags over the file over the defaults): \
             [the configuration reference](config.md).\n"
        );
        walk(&mut cmd, "nodestatus", &mut out);
        out
    }

    #[test]
    fn the_references_are_what_the_code_renders() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference");
        let bless = std::env::var_os("NODESTATUS_BLESS").is_some_and(|v| v == "1");
        for (file, rendered) in [
            ("cli.md", cli()),
            ("config.md", nodestatus_engine::config::reference()),
        ] {
            let path = docs.join(file);
            if bless {
                std::fs::write(&path, &rendered).unwrap();
            }
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                written == rendered,
                "docs/reference/{file} is not what the code renders: write it with\n  {BLESS}"
            );
        }
    }
}
