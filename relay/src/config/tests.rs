//! The sources, merged without a process: a map for the environment, a
//! string for the file, argv for the flags.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Argv {
    #[command(flatten)]
    flags: SourceFlags,
}

fn flags(argv: &[&str]) -> SourceFlags {
    let cmd = describe_flags(<Argv as clap::CommandFactory>::command());
    let matches = cmd.try_get_matches_from(std::iter::once("relay").chain(argv.iter().copied()));
    let matches = matches.unwrap_or_else(|e| panic!("{e}"));
    <Argv as clap::FromArgMatches>::from_arg_matches(&matches)
        .unwrap()
        .flags
}

fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn load_with(
    argv: &[&str],
    vars: &[(&str, &str)],
    file: Option<&str>,
) -> Result<Config, ConfigErrors> {
    let f = flags(argv);
    let env = env(vars);
    load(Sources {
        file: file.map(|t| (Path::new("relay.toml"), t)),
        env: &env,
        flags: f.settings,
        destination_flags: &f.destination,
        destinations_file: None,
        places: &super::paths::Places {
            cwd: "/srv".into(),
            state_directory: None,
            holds: |_| false,
            same: |a, b| a == b,
            link: |_| false,
        },
    })
}

/// print-config's values, without the sources.
fn values(cfg: &Config) -> String {
    render(cfg)
        .lines()
        .map(|l| l.split("  #").next().unwrap_or(l).trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_default_reads() {
    let cfg = load_with(&[], &[], None).unwrap();
    assert_eq!(cfg.settings.drain_rate, 200.0);
    assert_eq!(
        cfg.settings.latency_budget,
        std::time::Duration::from_secs(2)
    );
    assert!(!cfg.settings.adaptive);
    assert!(cfg.origins.iter().all(|(_, o)| *o == Origin::Default));
    assert!(cfg.destinations.is_empty());
    assert!(require_destination(&cfg).is_err());
}

#[test]
fn flags_variables_and_a_file_give_the_same_settings() {
    let by_flags = load_with(
        &[
            "--drain-rate",
            "50",
            "--latency-budget",
            "500ms",
            "--adaptive",
            "--no-journal=true",
            "--overflow",
            "head-drop",
            "--downstream",
            "http://127.0.0.1:9/hooks",
            "--tenant-rate",
            "5",
        ],
        &[],
        None,
    )
    .unwrap();
    let by_env = load_with(
        &[],
        &[
            ("DRIPFEED_DRAIN_RATE", "50"),
            ("DRIPFEED_LATENCY_BUDGET", "500ms"),
            ("DRIPFEED_ADAPTIVE", "true"),
            ("DRIPFEED_NO_JOURNAL", "1"),
            ("DRIPFEED_OVERFLOW", "head-drop"),
            ("DRIPFEED_DOWNSTREAM", "http://127.0.0.1:9/hooks"),
            ("DRIPFEED_TENANT_RATE", "5"),
        ],
        None,
    )
    .unwrap();
    let file = "drain_rate = 50\nlatency_budget = \"500ms\"\nadaptive = true\nno_journal = true\n\
                overflow = \"head-drop\"\ndownstream = \"http://127.0.0.1:9/hooks\"\ntenant_rate = 5.0\n";
    let by_file = load_with(&[], &[], Some(file)).unwrap();
    assert_eq!(values(&by_flags), values(&by_env));
    assert_eq!(values(&by_flags), values(&by_file));
    assert_eq!(by_flags.destinations[0].name, "default");
    assert_eq!(
        by_flags.origin("drain_rate"),
        Some(&Origin::Flag("--drain-rate".into()))
    );
    assert_eq!(
        by_env.origin("drain_rate"),
        Some(&Origin::Env("DRIPFEED_DRAIN_RATE".into()))
    );
    assert_eq!(
        by_file
            .origin("drain_rate")
            .map(ToString::to_string)
            .as_deref(),
        Some("file relay.toml:1")
    );
}

#[test]
fn a_flag_beats_a_variable_beats_the_file_beats_the_default() {
    let file = "drain_rate = 10\nmax_in_flight = 10\nretries = 10\n";
    let vars = [
        ("DRIPFEED_DRAIN_RATE", "20"),
        ("DRIPFEED_MAX_IN_FLIGHT", "20"),
    ];
    let cfg = load_with(&["--drain-rate", "30"], &vars, Some(file)).unwrap();
    let s = &cfg.settings;
    assert_eq!(
        (s.drain_rate, s.max_in_flight, s.retries, s.fleet_size),
        (30.0, 20, 10, 1)
    );
    let from: Vec<String> = ["drain_rate", "max_in_flight", "retries", "fleet_size"]
        .iter()
        .map(|k| cfg.origin(k).unwrap().to_string())
        .collect();
    assert_eq!(
        from,
        [
            "flag --drain-rate",
            "environment DRIPFEED_MAX_IN_FLIGHT",
            "file relay.toml:3",
            "default"
        ]
    );
}

#[test]
fn every_error_is_collected_and_names_its_key() {
    let file = "drain_rate = 0\nfloor = 500\nmax_in_flight = \"many\"\n\n[[destinations]]\nname = \"a\"\nurl = \"gopher://x\"\n";
    let err = load_with(
        &["--fleet-size", "0"],
        &[("DRIPFEED_TENANT_RAET", "1")],
        Some(file),
    )
    .unwrap_err();
    let shown: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    let want = [
        "relay.toml:3: max_in_flight: expected a whole number, found string",
        "relay.toml:5: destinations[0].url: \"gopher://x\" is not http:// or https://",
        "environment DRIPFEED_TENANT_RAET: unknown variable (did you mean DRIPFEED_TENANT_RATE?)",
        "relay.toml:1: drain_rate: must be a number above 0",
        "--fleet-size: must be at least 1",
        "relay.toml:2: floor: 500 is above ceiling 400",
    ];
    assert_eq!(shown, want);
}

#[test]
fn values_that_would_overflow_or_allocate_without_bound_are_refused() {
    let err = load_with(
        &[
            "--shutdown-grace",
            "10000000000000000000s",
            "--deliver-timeout",
            "18446744073709551615s",
            "--metrics-busiest",
            "1000000000000",
            "--max-connections",
            "18446744073709551615",
        ],
        &[],
        None,
    )
    .unwrap_err();
    let shown: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    let want = [
        "--deliver-timeout: must be at most 100 years",
        "--shutdown-grace: must be at most 100 years",
        "--metrics-busiest: must be at most 1000",
        "--max-connections: must be at most 16777216",
    ];
    assert_eq!(shown, want);
}

#[test]
fn print_config_redacts_secrets_and_passwords() {
    let file = "redis = \"redis://:hunter2@127.0.0.1:1/\"\n\n[[destinations]]\nname = \"a\"\n\
                url = \"https://user:pw@receiver.example/x\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n";
    let cfg = load_with(&[], &[], Some(file)).unwrap();
    let printed = render(&cfg);
    for hidden in ["hunter2", "pw@", "MfKQ9r8"] {
        assert!(!printed.contains(hidden), "{hidden} shown:\n{printed}");
    }
    assert!(
        printed.contains("redis = \"redis://:***@127.0.0.1:1/\"  # file relay.toml:1"),
        "{printed}"
    );
    assert!(printed.contains("secret = \"(redacted)\""), "{printed}");
    // What it prints reads back as the same configuration, once what it
    // hid is written back; before, its passwords are refused, not taken.
    let hidden = load_with(&[], &[], Some(&printed)).unwrap_err().to_string();
    assert!(hidden.contains("write the real one"), "{hidden}");
    let again = load_with(
        &[],
        &[],
        Some(
            &printed
                .replace("(redacted)", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                .replace("redis://:***@", "redis://:hunter2@")
                .replace("user:***@", "user:pw@"),
        ),
    );
    assert_eq!(values(&again.unwrap()), values(&cfg));
}

#[test]
fn print_config_of_a_fleet_reads_back() {
    let file = "queue = \"redis\"\nredis = \"redis://127.0.0.1:1/\"\n";
    let cfg = load_with(&[], &[], Some(file)).unwrap();
    let printed = render(&cfg);
    // The default `open` is in force for quotas but refused when named.
    assert!(!printed.contains("\nredis_failure ="), "{printed}");
    assert!(printed.contains("# redis_failure = \"open\""), "{printed}");
    let again = load_with(&[], &[], Some(&printed)).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(values(&again), values(&cfg));
    // Named, it is printed as it is.
    let closed = load_with(
        &[],
        &[],
        Some(&format!("{file}redis_failure = \"closed\"\n")),
    )
    .unwrap();
    assert!(render(&closed).contains("\nredis_failure = \"closed\"  # file relay.toml:3"));
}

#[test]
fn the_example_file_lists_every_key_with_its_default() {
    let example = include_str!("../../relay.example.toml");
    let defaults = load_with(&[], &[], None).unwrap();
    let cfg = load_with(&[], &[], Some(example)).unwrap_or_else(|e| panic!("{e}"));
    let shown = cfg.settings.shown();
    for (key, (name, value)) in KEYS.iter().zip(defaults.settings.shown()) {
        assert_eq!(key.name, name);
        match &value {
            Some(v) => {
                let line = format!("\n{name} = {v}\n");
                assert!(
                    example.contains(&line),
                    "relay.example.toml lacks the line `{name} = {v}`"
                );
            }
            None => {
                let line = format!("\n# {name} = ");
                assert!(
                    example.contains(&line),
                    "relay.example.toml lacks a commented `# {name} = …`"
                );
            }
        }
        let in_example = shown.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
        assert_eq!(
            in_example,
            Some(&value),
            "{name} in relay.example.toml is not its default"
        );
    }
}

#[test]
fn the_help_names_each_variable_and_default() {
    let mut cmd = describe_flags(<Argv as clap::CommandFactory>::command());
    let help = cmd.render_help().to_string();
    assert!(
        help.contains("[default: 200] [env: DRIPFEED_DRAIN_RATE]"),
        "{help}"
    );
    assert!(help.contains("[env: DRIPFEED_DOWNSTREAM]"), "{help}");
    assert!(flags(&["--adaptive"]).settings.adaptive == Some(true));
    assert!(flags(&["--adaptive=false"]).settings.adaptive == Some(false));
}
