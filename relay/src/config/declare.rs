//! The generator behind the one table of settings (`settings.rs`).
//!
//! Each setting is declared once, as `/// doc` `name: Type = "default";`
//! (or without a default: then it is optional; a list may add
//! `, repeat "flag-name"`: its flag is then that name, given once per item).
//! From that line the macro makes everything a setting needs, so no key is
//! written twice:
//!
//! - a field of [`Settings`](super::Settings), the values in force
//!   (`Option<Type>` for a setting without a default);
//! - a field of [`SettingFlags`](super::SettingFlags), the clap flag
//!   `--name-with-dashes` (always `Option`, so "not given" is seen);
//! - a field of `Layer`, what one source said and where;
//! - an entry of [`KEYS`](super::KEYS): the file key, its default as text,
//!   what it accepts; from it come the variable `DRIPFEED_NAME`, the help
//!   suffix, print-config and the example file's check;
//! - the arms that read a key from text (flag, variable) or TOML, and the
//!   merge: flag, else variable, else file, else default.

/// A setting's name and default, as the file, the environment and the help know it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    /// The file key (`drain_rate`).
    pub name: &'static str,
    /// The default as text, read like any other value; `None`: not set by default.
    pub default: Option<&'static str>,
    /// `--name` alone means `true`.
    pub switch: bool,
    /// A list whose flag is this name, given once per item
    /// (`--allow-destination-cidr A --allow-destination-cidr B`).
    pub repeat: Option<&'static str>,
    /// The setting's doc comment, one line per comment line: its meaning,
    /// as `--help` and the configuration reference give it.
    #[cfg_attr(not(test), allow(dead_code))] // read where the reference is generated: a test
    pub doc: &'static str,
}

impl Key {
    /// The environment variable: `DRIPFEED_` and the key in upper case.
    pub(crate) fn env(&self) -> String {
        format!("DRIPFEED_{}", self.name.to_ascii_uppercase())
    }
}

/// The flag as written for the setting `name` (`--drain-rate`), or its
/// `repeat` name for a list.
pub(super) fn flag_of(name: &str, repeat: Option<&str>) -> String {
    match repeat {
        Some(flag) => format!("--{flag}"),
        None => format!("--{}", name.replace('_', "-")),
    }
}

/// The type a setting has in force: its own with a default, else `Option`.
macro_rules! resolved {
    ($ty:ty, $default:literal) => { $ty };
    ($ty:ty) => { Option<$ty> };
}
pub(super) use resolved;

/// The value in force from what the sources said (`found`), or the default.
macro_rules! pick {
    ($found:expr, $name:ident, $ty:ty, $default:literal) => {
        match $found {
            Some(given) => given,
            None => match <$ty as $crate::config::value::Value>::from_text($default) {
                Ok(v) => (v, $crate::config::Origin::Default),
                Err(e) => {
                    return Err(format!(
                        "the default of {} does not read: {e}",
                        stringify!($name)
                    ))
                }
            },
        }
    };
    ($found:expr, $name:ident, $ty:ty) => {
        match $found {
            Some((v, origin)) => (Some(v), origin),
            None => (None, $crate::config::Origin::Default),
        }
    };
}
pub(super) use pick;

/// A setting's default as text, if it has one.
macro_rules! default_text {
    ($default:literal) => {
        Some($default)
    };
    () => {
        None::<&'static str>
    };
}
pub(super) use default_text;

/// A setting's value as TOML, `None` when it is not set.
macro_rules! show {
    ($value:expr, $ty:ty, $default:literal) => {
        Some($crate::config::value::Value::show(&$value))
    };
    ($value:expr, $ty:ty) => {
        $value.as_ref().map($crate::config::value::Value::show)
    };
}
pub(super) use show;

/// See the [module](self) docs.
macro_rules! declare_settings {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty $(= $default:literal)? $(, repeat $flag:literal)? ; )+) => {
        /// Every setting in force, each from the highest source that gave it
        /// (flag, environment, file, default).
        #[derive(Clone, Debug)]
        pub(crate) struct Settings {
            $( $(#[doc = $doc])+ pub(crate) $name: $crate::config::declare::resolved!($ty $(, $default)?), )+
        }

        /// The settings as command-line flags, each optional: a flag given
        /// beats every other source.
        #[derive(clap::Args, Clone, Debug, Default)]
        pub(crate) struct SettingFlags {
            $(
                $(#[doc = $doc])+
                #[arg(long, value_parser = $crate::config::value::parse_text::<$ty>)]
                pub(crate) $name: Option<$ty>,
            )+
        }

        /// Every setting's key, default and kind, in declaration order.
        pub(crate) const KEYS: &[$crate::config::declare::Key] = &[
            $( $crate::config::declare::Key {
                name: stringify!($name),
                default: $crate::config::declare::default_text!($($default)?),
                switch: <$ty as $crate::config::value::Value>::SWITCH,
                repeat: $crate::config::declare::default_text!($($flag)?),
                doc: concat!($($doc, "\n"),+),
            }, )+
        ];

        impl SettingFlags {
            /// Reads every item of a list flag given several times: clap's
            /// derive keeps only the first value of an `Option` field.
            pub(crate) fn gather(&mut self, matches: &clap::ArgMatches) {
                $( if $crate::config::declare::default_text!($($flag)?).is_some()
                    && let Ok(Some(all)) = matches.try_get_many::<$ty>(stringify!($name))
                {
                    self.$name = all.cloned().reduce(<$ty as $crate::config::value::Value>::join_repeated);
                } )+
            }
        }

        /// What one source said, each value with where it was said.
        #[derive(Clone, Debug, Default)]
        pub(super) struct Layer {
            $( pub(super) $name: Option<($ty, $crate::config::Origin)>, )+
        }

        impl Layer {
            /// The flags given on the command line.
            pub(super) fn from_flags(flags: SettingFlags) -> Layer {
                Layer {
                    $( $name: flags.$name.map(|v| {
                        let flag = $crate::config::declare::flag_of(
                            stringify!($name),
                            $crate::config::declare::default_text!($($flag)?),
                        );
                        (v, $crate::config::Origin::Flag(flag))
                    }), )+
                }
            }

            /// Sets `key` from text; `Ok(false)` if no setting has that key.
            pub(super) fn set_text(&mut self, key: &str, text: &str, origin: $crate::config::Origin) -> Result<bool, String> {
                $( if key == stringify!($name) {
                    self.$name = Some((<$ty as $crate::config::value::Value>::from_text(text)?, origin));
                    return Ok(true);
                } )+
                Ok(false)
            }

            /// Sets `key` from a TOML value; `Ok(false)` if no setting has that key.
            pub(super) fn set_toml(&mut self, key: &str, value: &toml::de::DeValue<'_>, origin: $crate::config::Origin) -> Result<bool, String> {
                $( if key == stringify!($name) {
                    self.$name = Some((<$ty as $crate::config::value::Value>::from_toml(value)?, origin));
                    return Ok(true);
                } )+
                Ok(false)
            }

            /// The settings in force from the flags, the environment and the
            /// file (highest first), with each one's origin.
            pub(super) fn merge(
                flags: Layer,
                env: Layer,
                file: Layer,
            ) -> Result<(Settings, Vec<(&'static str, $crate::config::Origin)>), String> {
                let mut origins = Vec::with_capacity(KEYS.len());
                let settings = Settings {
                    $( $name: {
                        let found = flags.$name.or(env.$name).or(file.$name);
                        let (value, origin) = $crate::config::declare::pick!(found, $name, $ty $(, $default)?);
                        origins.push((stringify!($name), origin));
                        value
                    }, )+
                };
                Ok((settings, origins))
            }
        }

        impl Settings {
            /// Each setting as a TOML value (secrets redacted), `None`
            /// when not set, in declaration order.
            pub(crate) fn shown(&self) -> Vec<(&'static str, Option<String>)> {
                vec![ $( (stringify!($name), $crate::config::declare::show!(self.$name, $ty $(, $default)?)), )+ ]
            }
        }
    };
}
pub(super) use declare_settings;
