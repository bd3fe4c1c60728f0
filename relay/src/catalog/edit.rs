//! A change of one destination, resolved against what it is *now*: the
//! pure half of every admin change. The queue engines read the current
//! value and call [`resolve`] under their lock (the local engine) or
//! against the very value their compare-and-set checks (the fleet's), so
//! a merge is never made onto a stale copy and no change answered 200 is
//! undone by one made meanwhile.
//!
//! - [`Edit::Replace`] is a `PUT`: the whole destination; a secret the
//!   destination has and the `PUT` leaves out is refused (give it, or
//!   `null`);
//! - [`Edit::Merge`] is a `PATCH` (RFC 7396): what it names changes, `null`
//!   removes, the rest stays; a destination that does not exist is 404,
//!   never made;
//! - [`Precondition`]: `If-Match` (one of these entity tags, or `*`: it
//!   exists) and `If-None-Match: *` (it does not): 412 when it no longer
//!   holds.
//!
//! A destination's entity tag ([`etag`]) is a digest of its fields as
//! kept (secrets included, so a changed secret changes it; the digest
//! shows nothing of them).

use sha2::{Digest, Sha256};

use crate::config::Fields;

/// What a change asks for (no `Debug`: it holds secrets).
// Fields is large, and these are few and short-lived (one per change):
// boxing it would cost every reader an indirection for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(crate) enum Edit {
    /// `PUT`: the whole destination. Its secrets are `None` when left out
    /// of the body, `Some(None)` when given as `null`.
    Replace(Replacement),
    /// `PATCH`: a JSON merge patch.
    Merge(serde_json::Map<String, serde_json::Value>),
}

/// A `PUT`'s body.
#[derive(Clone, Default)]
pub(crate) struct Replacement {
    /// Every field but the secrets (those below say how they were given).
    pub fields: Fields,
    /// `secret`: left out (`None`), `null` (`Some(None)`) or given.
    pub secret: Option<Option<String>>,
    /// `previous_secret`: left out, `null` or given.
    pub previous_secret: Option<Option<String>>,
}

/// The conditions a request puts on the destination's state
/// (`If-Match`, `If-None-Match`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Precondition {
    /// `If-Match`: the change applies only if the destination's tag is one
    /// of these (`*`: if it exists).
    pub if_match: Option<Vec<String>>,
    /// `If-None-Match: *`: the change applies only if it does not exist.
    pub if_none_match_any: bool,
}

impl Precondition {
    /// The conditions of an `If-Match` and an `If-None-Match` header's
    /// values, or why they do not read (`If-None-Match` takes only `*`).
    pub(crate) fn of(
        if_match: Option<&str>,
        if_none_match: Option<&str>,
    ) -> Result<Precondition, String> {
        // A weak tag is kept as it is: If-Match compares strongly (RFC
        // 9110), so it never matches one of ours.
        let quoted = |t: &str| t.len() >= 2 && t.starts_with('"') && t.ends_with('"');
        let tags = |v: &str| -> Result<Vec<String>, String> {
            v.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| match t == "*" || quoted(t.strip_prefix("W/").unwrap_or(t)) {
                    true => Ok(t.to_owned()),
                    false => Err(format!(
                        "If-Match: {t:?} is not an entity tag (a quoted one, as ETag gives it, or *)"
                    )),
                })
                .collect()
        };
        // Visible ASCII and spaces, as the document says.
        for (name, v) in [("If-Match", if_match), ("If-None-Match", if_none_match)] {
            if v.is_some_and(|v| !v.bytes().all(|b| (0x20..=0x7e).contains(&b))) {
                return Err(format!("{name}: not visible ASCII"));
            }
        }
        let if_none_match_any = match if_none_match.map(str::trim) {
            None | Some("") => false,
            Some("*") => true,
            Some(_) => {
                return Err(
                    "If-None-Match: only * (make it only if it does not exist) is taken here"
                        .into(),
                );
            }
        };
        // An empty one is no condition, as an empty If-None-Match is.
        let if_match = if_match.map(tags).transpose()?.filter(|t| !t.is_empty());
        Ok(Precondition {
            if_match,
            if_none_match_any,
        })
    }

    /// Whether the destination (`current`: its tag, `None` when it does
    /// not exist) meets the conditions.
    pub(crate) fn holds(&self, current: Option<&str>) -> bool {
        if self.if_none_match_any && current.is_some() {
            return false;
        }
        match (&self.if_match, current) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(tags), Some(tag)) => tags.iter().any(|t| t == "*" || t == tag),
        }
    }
}

/// Why a change cannot be made to the destination as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditError {
    /// 404: a `PATCH` of a destination that does not exist.
    Unknown,
    /// 412: `If-Match` or `If-None-Match` no longer holds.
    Precondition,
    /// 422: the body does not make a destination (its problem type and
    /// what is wrong).
    Unprocessable(&'static str, String),
}

/// `fields`' entity tag: a quoted digest of the destination as kept.
///
/// The same fields give the same tag on every relay and across restarts.
pub(crate) fn etag(fields: &Fields) -> String {
    let text = serde_json::to_vec(fields).unwrap_or_default();
    let digest = Sha256::digest(&text);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Application `app`'s entity tag (its description and its first event
/// id: one made again under the name has another).
pub(crate) fn app_etag(app: &crate::catalog::App) -> String {
    let text = serde_json::to_vec(app).unwrap_or_default();
    let digest = Sha256::digest(&text);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// What `name` becomes when `edit` is made to `current` (its fields as
/// kept, `None` when it does not exist) under `pre`: the preconditions
/// first, then the edit.
pub(crate) fn resolve(
    name: &str,
    current: Option<&Fields>,
    edit: Edit,
    pre: &Precondition,
) -> Result<Fields, EditError> {
    let tag = current.map(etag);
    if !pre.holds(tag.as_deref()) {
        return Err(EditError::Precondition);
    }
    let mut fields = match edit {
        Edit::Replace(put) => replace(current, put)?,
        Edit::Merge(patch) => {
            let Some(now) = current else {
                return Err(EditError::Unknown);
            };
            let mut fields = now.clone();
            merge(&mut fields, patch)
                .map_err(|detail| EditError::Unprocessable("bad-destination", detail))?;
            fields
        }
    };
    fields.name = Some(name.to_owned());
    Ok(fields)
}

/// A `PUT` over `current`: a secret it has is never dropped by leaving it out.
fn replace(current: Option<&Fields>, put: Replacement) -> Result<Fields, EditError> {
    if let Some(now) = current {
        for (field, has, given) in [
            ("secret", now.secret.is_some(), &put.secret),
            (
                "previous_secret",
                now.previous_secret.is_some(),
                &put.previous_secret,
            ),
        ] {
            if has && given.is_none() {
                let detail = format!(
                    "{field}: the destination has one and the PUT leaves it out; give it again \
                     (a PUT replaces the whole destination), or \"{field}\": null to remove it, \
                     or PATCH only what changes"
                );
                return Err(EditError::Unprocessable("secret-left-out", detail));
            }
        }
    }
    Ok(Fields {
        secret: put.secret.flatten(),
        previous_secret: put.previous_secret.flatten(),
        ..put.fields
    })
}

/// `patch` merged into `fields` (RFC 7396), or what is wrong with it.
pub(crate) fn merge(
    fields: &mut Fields,
    patch: serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    use serde_json::Value;
    let text = |k: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(format!("{k}: a string or null")),
    };
    let flag = |k: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        _ => Err(format!("{k}: true, false or null")),
    };
    let number = |k: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_f64().map(Some).ok_or_else(|| format!("{k}: a number")),
        _ => Err(format!("{k}: a number or null")),
    };
    for (k, v) in patch {
        match k.as_str() {
            "url" => match v {
                Value::String(url) => fields.url = Some(url),
                _ => return Err("url: a string (it cannot be removed)".into()),
            },
            "rate" => fields.rate = number("rate", v)?,
            "ceiling" => fields.ceiling = number("ceiling", v)?,
            "budget" => fields.budget = text("budget", v)?,
            "secret" => fields.secret = text("secret", v)?,
            "previous_secret" => fields.previous_secret = text("previous_secret", v)?,
            "metrics" => fields.metrics = flag("metrics", v)?,
            "disabled" => fields.disabled = flag("disabled", v)?,
            "description" => fields.description = text("description", v)?,
            "application" => match v {
                Value::String(app) if fields.application.as_deref() == Some(app.as_str()) => {}
                _ => {
                    return Err(
                        "application: it cannot be changed (delete the endpoint and \
                                make it under the other application)"
                            .into(),
                    );
                }
            },
            "event_types" => {
                fields.event_types = match v {
                    Value::Null => None,
                    Value::Array(items) => Some(
                        items
                            .into_iter()
                            .map(|i| match i {
                                Value::String(s) => Ok(s),
                                _ => Err("event_types: an array of strings, or null".to_owned()),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    _ => return Err("event_types: an array of strings, or null".into()),
                }
            }
            "filter" => {
                fields.filter = match v {
                    Value::Null => None,
                    Value::Object(m) => Some(m),
                    _ => return Err("filter: an object, or null".into()),
                }
            }
            other => return Err(format!("{other}: not a destination's field")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(url: &str, rate: Option<f64>, secret: Option<&str>) -> Fields {
        Fields {
            name: Some("a".into()),
            url: Some(url.into()),
            rate,
            secret: secret.map(str::to_owned),
            ..Fields::default()
        }
    }

    fn patch(v: serde_json::Value) -> Edit {
        Edit::Merge(v.as_object().cloned().unwrap())
    }

    #[test]
    fn a_merge_applies_to_the_value_it_is_given() {
        let now = fields("http://a/", Some(5.0), None);
        let got = resolve(
            "a",
            Some(&now),
            patch(json!({"rate": 9})),
            &Precondition::default(),
        )
        .unwrap();
        assert_eq!(
            (got.rate, got.url.as_deref()),
            (Some(9.0), Some("http://a/"))
        );
        // Two merges in turn: the second keeps what the first changed.
        let budget = resolve(
            "a",
            Some(&got),
            patch(json!({"budget": "3s"})),
            &Precondition::default(),
        )
        .unwrap();
        assert_eq!(
            (budget.rate, budget.budget.as_deref()),
            (Some(9.0), Some("3s"))
        );
        let removed = resolve(
            "a",
            Some(&budget),
            patch(json!({"rate": null})),
            &Precondition::default(),
        )
        .unwrap();
        assert_eq!(removed.rate, None);
    }

    #[test]
    fn a_merge_never_makes_a_destination() {
        let refused = resolve(
            "a",
            None,
            patch(json!({"url": "http://a/"})),
            &Precondition::default(),
        );
        assert_eq!(refused.unwrap_err(), EditError::Unknown);
    }

    #[test]
    fn url_cannot_be_removed_or_retyped() {
        let now = fields("http://a/", None, None);
        for bad in [json!({"url": null}), json!({"url": 3})] {
            let e = resolve("a", Some(&now), patch(bad), &Precondition::default()).unwrap_err();
            assert!(
                matches!(e, EditError::Unprocessable("bad-destination", ref d) if d.starts_with("url:")),
                "{e:?}"
            );
        }
        let unknown = resolve(
            "a",
            Some(&now),
            patch(json!({"colour": 1})),
            &Precondition::default(),
        );
        assert!(matches!(unknown, Err(EditError::Unprocessable(_, d)) if d.contains("colour")));
    }

    #[test]
    fn a_put_keeps_no_secret_by_leaving_it_out() {
        let now = fields("http://a/", None, Some("whsec_abcd"));
        let put = Replacement {
            fields: fields("http://b/", None, None),
            ..Replacement::default()
        };
        let e = resolve(
            "a",
            Some(&now),
            Edit::Replace(put.clone()),
            &Precondition::default(),
        );
        assert!(matches!(
            e,
            Err(EditError::Unprocessable("secret-left-out", _))
        ));
        let dropped = Replacement {
            secret: Some(None),
            ..put.clone()
        };
        let got = resolve(
            "a",
            Some(&now),
            Edit::Replace(dropped),
            &Precondition::default(),
        )
        .unwrap();
        assert_eq!((got.url.as_deref(), got.secret), (Some("http://b/"), None));
        // A new destination has no secret to keep.
        assert!(resolve("a", None, Edit::Replace(put), &Precondition::default()).is_ok());
    }

    #[test]
    fn preconditions_are_checked_against_the_current_tag() {
        let now = fields("http://a/", Some(5.0), None);
        let tag = etag(&now);
        let other = etag(&fields("http://a/", Some(6.0), None));
        assert_ne!(tag, other, "a change changes the tag");
        assert_eq!(tag, etag(&now.clone()), "the same fields, the same tag");
        let edit = || patch(json!({"rate": 7}));
        let pre = Precondition::of(Some(&tag), None).unwrap();
        assert!(resolve("a", Some(&now), edit(), &pre).is_ok());
        let stale = Precondition::of(Some(&format!("{other}, W/{other}")), None).unwrap();
        assert_eq!(
            resolve("a", Some(&now), edit(), &stale).unwrap_err(),
            EditError::Precondition
        );
        let any = Precondition::of(Some("*"), None).unwrap();
        assert!(resolve("a", Some(&now), edit(), &any).is_ok());
        assert_eq!(
            resolve("a", None, edit(), &any).unwrap_err(),
            EditError::Precondition
        );
        let create_only = Precondition::of(None, Some("*")).unwrap();
        let put = || {
            Edit::Replace(Replacement {
                fields: now.clone(),
                ..Replacement::default()
            })
        };
        assert_eq!(
            resolve("a", Some(&now), put(), &create_only).unwrap_err(),
            EditError::Precondition
        );
        assert!(resolve("a", None, put(), &create_only).is_ok());
        assert!(Precondition::of(None, Some("\"x\"")).is_err());
        assert!(
            Precondition::of(Some(""), None).unwrap().if_match.is_none(),
            "an empty If-Match is no condition"
        );
        assert!(
            !Precondition::of(None, Some("")).unwrap().if_none_match_any,
            "no condition"
        );
        assert!(Precondition::of(Some("\"a\"\t"), None).is_err(), "a tab");
        assert!(
            Precondition::of(Some(" , "), None)
                .unwrap()
                .if_match
                .is_none()
        );
        // Strong comparison: the current tag made weak does not match.
        let weak = Precondition::of(Some(&format!("W/{tag}")), None).unwrap();
        assert_eq!(
            resolve("a", Some(&now), edit(), &weak).unwrap_err(),
            EditError::Precondition
        );
        // Not a tag at all: a 400, not a 412.
        let e = Precondition::of(Some("garbage"), None).unwrap_err();
        assert!(e.contains("not an entity tag"), "{e}");
        assert!(Precondition::of(Some(&format!("{tag}, garbage")), None).is_err());
    }
}
