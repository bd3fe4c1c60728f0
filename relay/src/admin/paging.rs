//! The query of a paged listing (`limit`, `cursor`, and the filters each
//! listing names), read strictly: a parameter given twice, or a limit
//! that is not a number in range, is a 400; an unknown parameter is left
//! alone.

use axum::http::StatusCode;
use axum::response::Response;

use crate::domain::problem::problem;

/// A listing's query.
pub(crate) struct PageQuery {
    /// Items in the page.
    pub limit: usize,
    /// Where to start, as an earlier page gave it.
    pub cursor: Option<String>,
    /// The filters given, by name (each one the listing names).
    pub filters: Vec<(&'static str, String)>,
}

impl PageQuery {
    /// The filter `name`, if given.
    pub(crate) fn filter(&self, name: &str) -> Option<&str> {
        self.filters
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A 400 naming what is wrong with the query.
pub(crate) fn bad(what: &str) -> Box<Response> {
    Box::new(problem(
        StatusCode::BAD_REQUEST,
        "bad-query",
        format!("the {what}"),
        Vec::new(),
    ))
}

/// 422: well formed for the document, but not a cursor this relay gave.
pub(crate) fn bad_cursor() -> Response {
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad-cursor",
        "the cursor is not one this relay gave".to_owned(),
        Vec::new(),
    )
}

/// A numeric cursor: 1 to 20 digits (as the documents' pattern says), and
/// one past any u64 is read as `u64::MAX` (beyond every place); anything
/// else is a 422.
pub(crate) fn place(raw: Option<&str>) -> Result<Option<u64>, Box<Response>> {
    match raw {
        None => Ok(None),
        Some(c) if (1..=20).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Some(c.parse::<u64>().unwrap_or(u64::MAX)))
        }
        Some(_) => Err(Box::new(bad_cursor())),
    }
}

/// Reads `raw`: `limit` (1 to `max`, else `default`), `cursor`, and the
/// `filters` named.
pub(crate) fn parse(
    raw: Option<&str>,
    default: usize,
    max: usize,
    filters: &[&'static str],
) -> Result<PageQuery, Box<Response>> {
    let mut q = PageQuery {
        limit: default,
        cursor: None,
        filters: Vec::new(),
    };
    let mut seen = Vec::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if seen.contains(&key) {
            return Err(bad(&format!("parameter {key} is given twice")));
        }
        match &*key {
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| bad(&format!("limit must be 1 to {max}")))?;
            }
            "cursor" => q.cursor = Some(value.to_string()),
            other => {
                if let Some(name) = filters.iter().find(|f| **f == other) {
                    q.filters.push((name, value.to_string()));
                }
            }
        }
        seen.push(key);
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_read_strictly() {
        let q = parse(
            Some("destination=billing&limit=5&x=1"),
            100,
            1000,
            &["destination"],
        )
        .ok()
        .unwrap();
        assert_eq!((q.filter("destination"), q.limit), (Some("billing"), 5));
        assert_eq!(q.filter("x"), None, "not a filter of this listing");
        for bad in ["limit=0", "limit=1001", "limit=x", "limit=1&limit=2"] {
            assert!(parse(Some(bad), 100, 1000, &[]).is_err(), "{bad}");
        }
        assert_eq!(parse(None, 100, 1000, &[]).ok().unwrap().limit, 100);
    }

    #[test]
    fn a_place_is_one_to_twenty_digits() {
        assert_eq!(place(None).ok(), Some(None));
        assert_eq!(place(Some("42")).ok(), Some(Some(42)));
        // Past any u64 but in the pattern: beyond every place.
        assert_eq!(
            place(Some("99999999999999999999")).ok(),
            Some(Some(u64::MAX))
        );
        for bad in ["", "x", "-1", "1.5", "123456789012345678901"] {
            assert!(place(Some(bad)).is_err(), "{bad}");
        }
    }
}
