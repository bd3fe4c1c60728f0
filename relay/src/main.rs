//! `dripfeed-relay`: a webhook relay on dripfeed. It accepts webhooks over
//! HTTP, queues each for the destination it names in a leaky bucket of its
//! own, and delivers them at the rate each receiver can take; overload is
//! answered with 503 and an honest `Retry-After`, and every 202 is journaled
//! before it is sent.
//!
//! ```text
//! dripfeed-relay --demo                                  # the burst demo, built-in receiver
//! dripfeed-relay --downstream https://receiver.example/hooks
//! dripfeed-relay --config relay.toml                     # flags > DRIPFEED_* > file > defaults
//! dripfeed-relay check-config relay.toml                 # exit 0, or 2 with every error
//! dripfeed-relay print-config --config relay.toml        # the settings in force, with sources
//! echo "$KEY" | dripfeed-relay hash-key                # an API key's digest, for [[tenants.keys]]
//! dripfeed-relay health --config relay.toml              # exit 0 if its /readyz answers 200
//! dripfeed-relay completions bash                        # shell completions (bash, zsh, fish…)
//! dripfeed-relay man > dripfeed-relay.1                  # the manual page
//! ```
//!
//! The modules follow a webhook: `config` (settings and their sources, plain
//! data) → `domain` (the types every part shares: the job, problems, the
//! byte budget, a destination's limits) → `intake` (the HTTP request path)
//! → `queue` (one contract, two engines: the local destinations set with
//! its journal, or the fleet's Redis Streams) → `deliver` (the HTTP client
//! and signatures) → `dead_letter` (the file and redrive); `catalog` (the
//! destinations in force), `status` (webhook statuses), `admin` (metrics,
//! the admin API), `telemetry` (logs, recorder), `shutdown` (signals),
//! `demo`, and `serve`, which wires them and picks the engine.
//! Exit codes: 0 done, 1 failed while running, 2 configuration refused.

#![forbid(unsafe_code)]

/// `println!`, except that a stdout nobody reads any more (a closed pipe:
/// a supervisor's log reader gone, `| head`) drops the line rather than
/// panicking. A panic there at shutdown ended the relay before its drains
/// and its journal had finished.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod admin;
mod auth;
mod catalog;
mod config;
mod dead_letter;
mod deliver;
mod demo;
mod domain;
mod events;
mod intake;
mod listener;
mod openapi;
mod queue;
mod serve;
mod shutdown;
mod status;
mod telemetry;
mod tls;
mod trace;
mod util;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use config::{ConfigErrors, SourceFlags};
use serve::{Failure, Mode};

/// A webhook relay that protects fragile receivers with dripfeed throttles.
///
/// Every setting is also a key of the --config file and a DRIPFEED_*
/// environment variable; a flag beats a variable, which beats the file.
#[derive(Parser, Debug)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    sources: SourceFlags,
    /// Drive the classic burst (1,000 requests/s for 5 s) at the relay, print
    /// a summary and exit; without a destination it starts a fragile
    /// built-in receiver on a free loopback port.
    #[arg(long, conflicts_with = "demo_fanout")]
    demo: bool,
    /// Start three receivers (healthy, slow at 20/s, dead), flood each at
    /// 40/s for 10 s through the relay, print per destination what was
    /// accepted, delivered, refused and dead-lettered, and exit.
    #[arg(long)]
    demo_fanout: bool,
    /// Re-admit the webhooks of a dead-letter file (under their ids) at
    /// start, then serve; the file is only read (not this relay's own
    /// dead_letter_file).
    #[arg(long, value_name = "FILE")]
    redrive: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a configuration (a file, with the DRIPFEED_* variables set and
    /// any flags given; or those alone) without starting: exit 0, or 2 with
    /// every error.
    CheckConfig {
        /// The TOML file to check (or give it as --config FILE); none: the
        /// variables and flags alone.
        file: Option<PathBuf>,
        #[command(flatten)]
        sources: SourceFlags,
    },
    /// Print the settings in force, each with its source (default, file,
    /// environment, flag), secrets redacted, as a TOML file.
    PrintConfig {
        #[command(flatten)]
        sources: SourceFlags,
    },
    /// Read an API key (or the admin token) from standard input and print
    /// its hex SHA-256, for `sha256` in [[tenants.keys]] or
    /// `admin_token_sha256`: the configuration never holds a key in clear.
    /// Whitespace around the key (the newline of `echo`) is not part of it.
    HashKey,
    /// Print a listener's OpenAPI 3.1 document (`intake`, the default, or
    /// `admin`): what it serves at GET /openapi.json, and what
    /// relay/openapi.json and relay/openapi-admin.json hold.
    Openapi {
        /// `intake` or `admin`.
        #[arg(default_value = "intake")]
        listener: String,
    },
    /// Ask the relay this configuration describes whether it is ready: its
    /// admin listener's /readyz (on loopback when it listens on every
    /// address), within 3 s. Exit 0 when ready, 1 otherwise: a container
    /// HEALTHCHECK that needs no curl.
    Health {
        #[command(flatten)]
        sources: SourceFlags,
    },
    /// Print shell completions for `bash`, `zsh`, `fish`, `elvish` or
    /// `powershell` (for example into
    /// /usr/share/bash-completion/completions/dripfeed-relay).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), as relay/dripfeed-relay.1 holds it.
    Man,
}

/// The command line, with each setting's help naming its default and variable.
fn command() -> clap::Command {
    let mut cmd = config::describe_flags(Cli::command());
    for sub in ["check-config", "print-config", "health"] {
        cmd = cmd.mut_subcommand(sub, config::describe_flags);
    }
    cmd
}

/// The command line as given.
fn parse() -> Cli {
    let matches = command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // List flags given several times: every item, not only the first.
    cli.sources.settings.gather(&matches);
    match (&mut cli.command, matches.subcommand()) {
        (Some(Command::CheckConfig { sources, .. }), Some((_, sub)))
        | (Some(Command::PrintConfig { sources }), Some((_, sub)))
        | (Some(Command::Health { sources }), Some((_, sub))) => sources.settings.gather(sub),
        _ => {}
    }
    cli
}

/// `hash-key`: the digest of the key on standard input; exit 2 when there
/// is none.
fn hash_key() -> ExitCode {
    use std::io::Read as _;
    let mut key = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut key) {
        eprintln!("dripfeed-relay hash-key: reading standard input: {e}");
        return ExitCode::from(2);
    }
    let key = key.trim_ascii();
    if key.is_empty() {
        eprintln!(
            "dripfeed-relay hash-key: no key on standard input (try: head -c 32 /dev/urandom | base64 | tee key.txt | dripfeed-relay hash-key)"
        );
        return ExitCode::from(2);
    }
    say!("{}", config::digest::KeyDigest::of(key).hex());
    ExitCode::SUCCESS
}

/// The manual page: every flag with its default and variable, and the
/// commands.
fn manual() -> std::io::Result<String> {
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    // The subcommands on this page: clap_mangen names a page for each
    // (dripfeed-relay-check-config(1)…), and none is shipped; each says
    // more with --help.
    out.extend_from_slice(b".SH SUBCOMMANDS\n");
    let mut subs: Vec<_> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    subs.sort_by_key(|s| s.get_display_order());
    for sub in subs {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let name = roff_text(&format!("dripfeed-relay {}", sub.get_name()));
        out.extend_from_slice(format!(".TP\n\\fB{name}\\fR\n").as_bytes());
        for line in about.lines() {
            out.extend_from_slice(format!("{}\n", roff_text(line)).as_bytes());
        }
    }
    man.render_version_section(&mut out)?;
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// `text` as a line of roff: backslashes and hyphens escaped, a leading
/// dot or quote kept from reading as a request.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.starts_with(['.', '\'']) {
        true => format!("\\&{escaped}"),
        false => escaped,
    }
}

/// Prints every configuration error; exit code 2.
fn refuse(errors: &ConfigErrors) -> ExitCode {
    eprintln!("dripfeed-relay: configuration refused:");
    for e in &errors.0 {
        eprintln!("  {e}");
    }
    ExitCode::from(2)
}

/// How long the runtime may take to end once `main` is done (a name
/// lookup or a file write still running on a blocking thread).
const RUNTIME_END: std::time::Duration = std::time::Duration::from_millis(250);

fn main() -> ExitCode {
    // Before anything else: a signal from now on is kept, never taken by
    // its default action.
    let caught = match shutdown::catch() {
        Ok(caught) => caught,
        Err(e) => {
            eprintln!("dripfeed-relay: SIGINT, SIGTERM and SIGHUP cannot be handled: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("dripfeed-relay: the runtime cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(caught));
    runtime.shutdown_timeout(RUNTIME_END);
    code
}

/// The command line's command, run.
async fn run(caught: shutdown::Caught) -> ExitCode {
    let cli = parse();
    if cli.command.is_some() {
        caught.for_command();
        return command_run(cli).await;
    }
    serve_run(cli, caught).await
}

/// A command that does not serve.
async fn command_run(cli: Cli) -> ExitCode {
    match cli.command {
        Some(Command::HashKey) => hash_key(),
        Some(Command::Openapi { listener }) => match openapi::Listener::parse(&listener) {
            Some(l) => {
                std::io::Write::write_all(
                    &mut std::io::stdout().lock(),
                    serve::openapi::generate(l).as_bytes(),
                )
                .ok();
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("dripfeed-relay openapi: give intake or admin, not {listener:?}");
                ExitCode::from(2)
            }
        },
        Some(Command::CheckConfig { file, mut sources }) => {
            let file = match (file, sources.config.take()) {
                (Some(f), None) | (None, Some(f)) => Some(f),
                (Some(a), Some(b)) if a == b => Some(a),
                (Some(_), Some(_)) => {
                    eprintln!(
                        "dripfeed-relay: check-config checks one file: give it as FILE or --config FILE, not both"
                    );
                    return ExitCode::from(2);
                }
                // The variables and flags alone.
                (None, None) => None,
            };
            sources.config = file;
            let mut cfg = match config::from_process(sources) {
                Ok(cfg) => cfg,
                Err(e) => return refuse(&e),
            };
            if let Err(e) = kept_changes(&mut cfg) {
                return refuse(&e);
            }
            let guard = deliver::guard::AddressGuard::from_config(&cfg);
            let errors = serve::check(&cfg, &guard).await;
            if !errors.is_empty() {
                return refuse(&ConfigErrors(errors));
            }
            if let Err(e) = config::require_destination(&cfg)
                && !config::may_start_empty(&cfg)
            {
                say!("note: {e} (needed to serve)");
            }
            let n = cfg.destinations.len();
            say!(
                "configuration ok: {} settings, {n} destination{}",
                config::KEYS.len(),
                if n == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        }
        Some(Command::Health { sources }) => match config::from_process(sources) {
            Ok(cfg) => serve::health::check(&cfg).await,
            Err(e) => refuse(&e),
        },
        Some(Command::Completions { shell }) => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command(), "dripfeed-relay", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script).ok();
            ExitCode::SUCCESS
        }
        Some(Command::Man) => match manual() {
            Ok(page) => {
                std::io::Write::write_all(&mut std::io::stdout().lock(), page.as_bytes()).ok();
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dripfeed-relay man: {e}");
                ExitCode::FAILURE
            }
        },
        Some(Command::PrintConfig { sources }) => match config::from_process(sources) {
            Ok(mut cfg) => {
                if let Err(e) = kept_changes(&mut cfg) {
                    return refuse(&e);
                }
                std::io::Write::write_all(
                    &mut std::io::stdout().lock(),
                    config::render(&cfg).as_bytes(),
                )
                .ok();
                ExitCode::SUCCESS
            }
            Err(e) => refuse(&e),
        },
        None => ExitCode::SUCCESS,
    }
}

/// Serves (or runs a demo) until stopped.
async fn serve_run(cli: Cli, caught: shutdown::Caught) -> ExitCode {
    // SIGINT and SIGTERM stop the relay gracefully once it serves, even if
    // they came while it started; SIGHUP reloads.
    let hangups = match shutdown::listen(caught) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("dripfeed-relay: signals cannot be read: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = match config::from_process(cli.sources.clone()) {
        Ok(cfg) => cfg,
        Err(e) => return refuse(&e),
    };
    telemetry::init_logs(cfg.settings.log_format, cfg.settings.log_filter.as_deref());
    telemetry::return_freed_pages();
    let mode = match (cli.demo, cli.demo_fanout) {
        (true, _) => Mode::Demo,
        (_, true) => Mode::DemoFanout,
        _ => Mode::Serve,
    };
    let reload = serve::Reload {
        flags: cli.sources,
        hangups,
    };
    match serve::run(cfg, mode, cli.redrive, reload).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Config(e)) => refuse(&e),
        Err(Failure::Run(e)) => {
            eprintln!("dripfeed-relay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The admin API's changes kept in the registry (or a state file not yet
/// migrated), applied over `cfg` as a start would apply them (for
/// `check-config` and `print-config`).
fn kept_changes(cfg: &mut config::Config) -> Result<(), ConfigErrors> {
    let Some(dir) = catalog::state::dir_of(cfg) else {
        return Ok(());
    };
    match catalog::registry::apply_kept(&dir, cfg) {
        Ok(Some(note)) => {
            eprintln!("note: {note}");
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(errors) => Err(ConfigErrors(errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// relay/dripfeed-relay.1 is the page `man` prints, and names every
    /// command.
    #[test]
    fn the_checked_in_manual_page_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dripfeed-relay.1");
        let now = manual().expect("the page renders");
        for command in [
            "check\\-config",
            "health",
            "completions",
            "man",
            "hash\\-key",
        ] {
            assert!(now.contains(command), "the page names {command}");
        }
        // Each on this page: no other page is shipped to refer to.
        assert!(
            now.contains("\\fBdripfeed\\-relay check\\-config\\fR"),
            "{now}"
        );
        assert!(!now.contains("config(1)"), "a page of its own: {now}");
        if std::env::var_os("UPDATE_MAN").is_some_and(|v| v == "1") {
            std::fs::write(&path, &now).expect("write the page");
            return;
        }
        let had = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            had == now,
            "relay/dripfeed-relay.1 differs from the page the code renders: run \
             `UPDATE_MAN=1 cargo test -p dripfeed-relay manual` (or `dripfeed-relay man > \
             relay/dripfeed-relay.1`) and commit it"
        );
    }

    /// Completions for each shell name the commands and the flags.
    #[test]
    fn completions_name_commands_and_flags() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command(), "dripfeed-relay", &mut out);
            let text = String::from_utf8(out).expect("text");
            for word in ["check-config", "health", "drain-rate", "redis"] {
                assert!(text.contains(word), "{shell}: {word} missing");
            }
        }
    }
}
