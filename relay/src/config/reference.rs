//! The configuration reference of the book
//! (`docs/src/reference/configuration.md`), generated from the settings
//! table and the command line, so that it cannot drift from them: a test
//! fails when the page's generated part differs from what this module makes
//! (`UPDATE_DOCS=1 cargo test -p dripfeed-relay reference` rewrites it).

use std::fmt::Write as _;

use super::declare::flag_of;
use super::settings::KEYS;

/// The line before the generated part of the page.
pub(super) const BEGIN: &str = "<!-- generated from relay/src/config/settings.rs: UPDATE_DOCS=1 cargo test -p dripfeed-relay reference -->";
/// The line after it.
pub(super) const END: &str = "<!-- end of the generated part -->";

/// A doc comment as one line of a Markdown table cell.
fn cell(doc: &str) -> String {
    let words: Vec<&str> = doc
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // `*` outside code spans would be read as emphasis.
    let text = words.join(" ").replace('|', "\\|");
    let parts: Vec<String> = text
        .split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            0 => part.replace('*', "\\*"),
            _ => part.to_string(),
        })
        .collect();
    parts.join("`")
}

/// Every setting (key, flag, variable, default, meaning), then the flags
/// that are not settings and the subcommands, as Markdown.
pub(super) fn markdown(cmd: &clap::Command) -> String {
    let mut out = String::new();
    out.push_str("## Settings\n\n");
    out.push_str("| key | flag, variable | default | meaning |\n|---|---|---|---|\n");
    for key in KEYS {
        let flag = flag_of(key.name, key.repeat);
        let flag = match (key.switch, key.repeat) {
            (true, _) => format!("`{flag}[=true\\|false]`"),
            (false, Some(_)) => format!("`{flag} VALUE` (repeatable)"),
            (false, None) => format!("`{flag} VALUE`"),
        };
        let default = key
            .default
            .map_or("unset".to_string(), |d| format!("`{d}`"));
        let _ = writeln!(
            out,
            "| <a id=\"{name}\"></a>`{name}` | {flag}<br>`{env}` | {default} | {doc} |",
            name = key.name,
            env = key.env(),
            doc = cell(key.doc),
        );
    }
    out.push_str("\n## Flags that are not settings\n\n");
    out.push_str("These are given on the command line only.\n\n");
    out.push_str("| flag | meaning |\n|---|---|\n");
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let setting = KEYS
            .iter()
            .any(|k| k.name == long.replace('-', "_") || k.repeat == Some(long));
        if setting || matches!(long, "help" | "version") {
            continue;
        }
        let value = match arg.get_value_names() {
            Some(names) if arg.get_action().takes_values() => format!(" {}", names.join(" ")),
            _ => String::new(),
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string);
        let _ = writeln!(
            out,
            "| `--{long}{value}` | {} |",
            cell(&help.unwrap_or_default())
        );
    }
    out.push_str("\n## Commands\n\n| command | what it does |\n|---|---|\n");
    for sub in cmd.get_subcommands() {
        let args: Vec<String> = sub
            .get_positionals()
            .map(|a| {
                let name = a.get_id().as_str().to_ascii_uppercase();
                match a.is_required_set() {
                    true => name,
                    false => format!("[{name}]"),
                }
            })
            .collect();
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(ToString::to_string);
        let _ = writeln!(
            out,
            "| `dripfeed-relay {}{}{}` | {} |",
            sub.get_name(),
            if args.is_empty() { "" } else { " " },
            args.join(" "),
            cell(&about.unwrap_or_default()),
        );
    }
    out
}

/// The page with its generated part replaced by `generated`; `None` when
/// the page lacks the two marker lines.
pub(super) fn splice(page: &str, generated: &str) -> Option<String> {
    let start = page.find(BEGIN)? + BEGIN.len();
    let end = start + page[start..].find(END)?;
    Some(format!(
        "{}\n\n{generated}\n{}",
        &page[..start],
        &page[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's configuration reference is what the code generates: a
    /// setting added, removed or described anew without the page fails here.
    #[test]
    fn the_configuration_reference_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/src/reference/configuration.md");
        let page = std::fs::read_to_string(&path).unwrap_or_default();
        let now = splice(&page, &markdown(&crate::command()))
            .expect("the page has the generated part's two marker lines");
        if std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &now).unwrap();
            return;
        }
        assert!(
            page == now,
            "docs/src/reference/configuration.md differs from the settings table: run \
             `UPDATE_DOCS=1 cargo test -p dripfeed-relay reference` and commit it"
        );
    }

    /// Every setting, flag and command is in the generated part, each with
    /// a meaning of a sentence or more.
    #[test]
    fn every_setting_has_a_line_with_its_meaning() {
        let text = markdown(&crate::command());
        for key in KEYS {
            assert!(
                cell(key.doc).len() >= 20,
                "{} needs a doc comment",
                key.name
            );
            assert!(text.contains(&format!("`{}`", key.env())), "{}", key.name);
            assert!(
                text.contains(&format!("<a id=\"{}\"></a>", key.name)),
                "{}",
                key.name
            );
        }
        for flag in [
            "--config FILE",
            "--destination NAME=URL",
            "--demo`",
            "--redrive FILE",
        ] {
            assert!(text.contains(flag), "{flag} missing from:\n{text}");
        }
        for sub in [
            "check-config [FILE]",
            "print-config",
            "hash-key",
            "openapi [LISTENER]",
        ] {
            assert!(text.contains(&format!("`dripfeed-relay {sub}")), "{sub}");
        }
    }

    /// Every key of a destination, tenant and tenant key table has its row
    /// in the page's hand-written tables.
    #[test]
    fn every_table_key_has_a_row() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/src/reference/configuration.md");
        let page = std::fs::read_to_string(&path).unwrap_or_default();
        let section = |title: &str| {
            let from = page
                .find(title)
                .unwrap_or_else(|| panic!("{title} missing"));
            let rest = &page[from + title.len()..];
            rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
        };
        let destinations = section("## Destinations");
        for field in super::super::destinations::FIELDS {
            assert!(destinations.contains(&format!("| `{field}` |")), "{field}");
        }
        let tenants = section("## Tenants");
        for field in super::super::tenants::FIELDS
            .iter()
            .chain(&super::super::tenants::KEY_FIELDS)
        {
            assert!(tenants.contains(&format!("| `{field}` |")), "{field}");
        }
    }

    /// The splice keeps what is around the markers and fails without them.
    #[test]
    fn splice_replaces_only_the_generated_part() {
        let page = format!("# Title\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
        let new = splice(&page, "NEW\n").unwrap();
        assert_eq!(
            new,
            format!("# Title\n\nbefore\n{BEGIN}\n\nNEW\n\n{END}\nafter\n")
        );
        assert_eq!(splice(&new, "NEW\n").unwrap(), new, "stable");
        assert!(splice("no markers", "x").is_none());
    }
}
