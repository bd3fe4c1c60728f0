//! The SQL of [`PgBuckets`](super::PgBuckets): the table, its index and the
//! statements, with all bucket arithmetic done by the server on its own
//! clock (`clock_timestamp()`), so concurrent processes never race.
//!
//! One row per key: `debt` as of `updated_at`, the instant `empty_at` when
//! that debt drains to zero (indexed, for pruning), and whether the last
//! admission on the row was `admitted`.

/// The longest `empty_at` lies ahead, in seconds (about 31 years), so a huge
/// debt or a tiny rate never overflows an interval.
const MAX_EMPTY_SECS: &str = "1e9";

/// Whether `table` is a name [`Statements`] accepts: an optional schema and
/// a table, each 1 to 48 characters of `[a-z0-9_]` not starting with a
/// digit.
pub(crate) fn valid_table(table: &str) -> bool {
    let parts: Vec<&str> = table.split('.').collect();
    parts.len() <= 2
        && parts.iter().all(|p| {
            (1..=48).contains(&p.len())
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

/// The statements for one table. Every parameter is cast, so each prepares
/// on its own and stays prepared per pooled connection. `$2`/`$3` are
/// always the default size and rate; a key's row in the quotas table
/// (`<table>_quotas`, logged: an override must outlive a restart) replaces
/// them.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) migrate: String,
    /// `$1` key, `$2` size, `$3` rate, `$4` cost → `(admitted, debt after,
    /// size, rate)`; a refusal stores the drained debt (the same bucket,
    /// written as of now).
    pub(crate) admit: String,
    /// `$1` key, `$2` size, `$3` rate → `(debt now, size, rate)`; one row
    /// always (debt 0 for a key without a row). Writes nothing.
    pub(crate) debt: String,
    /// `$1` key, `$2` size, `$3` rate, `$4` estimated, `$5` actual → `(debt
    /// after, size, rate)`.
    pub(crate) settle: String,
    /// `$1` key, `$2` size, `$3` rate: the key's override, set.
    pub(crate) set_quota: String,
    /// `$1` key → a row iff the key had an override, now removed.
    pub(crate) clear_quota: String,
    /// `$1` batch → rows deleted: ones whose debt has drained to zero.
    pub(crate) prune: String,
    /// Rows in the table, drained or not.
    pub(crate) rows: String,
}

/// The debt of row `b` drained until `now` at rate `rate` (SQL).
fn drained(now: &str, rate: &str) -> String {
    format!(
        "greatest(0::float8, b.debt - greatest(0::float8, \
         extract(epoch from ({now} - b.updated_at))::float8) * {rate})"
    )
}

/// `at` plus `debt / rate` seconds, capped (SQL).
fn empty_at(at: &str, debt: &str, rate: &str) -> String {
    format!("{at} + least(({debt}) / {rate}, {MAX_EMPTY_SECS}) * interval '1 second'")
}

/// `name` quoted, part by part.
fn quoted(name: &str) -> String {
    name.split('.')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(".")
}

impl Statements {
    /// The statements for `table`, which must pass [`valid_table`].
    pub(crate) fn new(table: &str) -> Self {
        let t = quoted(table);
        let q = quoted(&format!("{table}_quotas"));
        let index = format!("\"{}_empty_at\"", table.rsplit('.').next().unwrap_or(table));
        let lock = format!("hashtext('dripfeed:{table}')");
        let migrate = format!(
            "BEGIN;
SELECT pg_advisory_xact_lock({lock});
CREATE UNLOGGED TABLE IF NOT EXISTS {t} (
    key text PRIMARY KEY,
    debt double precision NOT NULL,
    updated_at timestamptz NOT NULL,
    empty_at timestamptz NOT NULL,
    admitted boolean NOT NULL DEFAULT true
);
ALTER TABLE {t} ADD COLUMN IF NOT EXISTS size double precision NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS rate double precision NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS {index} ON {t} (empty_at);
CREATE TABLE IF NOT EXISTS {q} (
    key text PRIMARY KEY,
    size double precision NOT NULL CHECK (size > 0),
    rate double precision NOT NULL CHECK (rate > 0)
);
COMMIT;"
        );
        // The key's quota: its override, else the default ($2, $3).
        let quota = format!(
            "(SELECT coalesce(o.size, $2::float8) AS size, coalesce(o.rate, $3::float8) AS rate
    FROM (SELECT 1) AS one LEFT JOIN {q} AS o ON o.key = $1::text) AS q"
        );

        // New rows take the key's quota from `q`; a conflicting row sees it
        // as EXCLUDED.size / EXCLUDED.rate.
        let now = "greatest(b.updated_at, EXCLUDED.updated_at)";
        let d = drained("EXCLUDED.updated_at", "EXCLUDED.rate");
        let fits = format!("{d} + $4::float8 <= EXCLUDED.size");
        let after = format!("CASE WHEN {fits} THEN {d} + $4::float8 ELSE {d} END");
        let admit = format!(
            "INSERT INTO {t} AS b (key, debt, updated_at, empty_at, admitted, size, rate)
SELECT $1::text, CASE WHEN $4::float8 <= q.size THEN $4::float8 ELSE 0 END,
    n.t, {new_empty}, $4::float8 <= q.size, q.size, q.rate
FROM {quota}, (SELECT clock_timestamp() AS t) AS n
ON CONFLICT (key) DO UPDATE SET
    debt = {after},
    updated_at = {now},
    empty_at = {empty},
    admitted = {fits},
    size = EXCLUDED.size,
    rate = EXCLUDED.rate
RETURNING admitted, debt, size, rate",
            new_empty = empty_at("n.t", "$4::float8", "q.rate"),
            empty = empty_at(now, &after, "EXCLUDED.rate"),
        );

        let debt = format!(
            "SELECT coalesce((SELECT {} FROM {t} AS b WHERE b.key = $1::text), 0::float8),
    q.size, q.rate
FROM {quota}",
            drained("clock_timestamp()", "q.rate")
        );

        let d = drained("EXCLUDED.updated_at", "EXCLUDED.rate");
        let settled = format!("greatest(0::float8, {d} + ($5::float8 - $4::float8))");
        let fresh = "greatest(0::float8, $5::float8 - $4::float8)";
        let settle = format!(
            "INSERT INTO {t} AS b (key, debt, updated_at, empty_at, admitted, size, rate)
SELECT $1::text, {fresh}, n.t, {new_empty}, true, q.size, q.rate
FROM {quota}, (SELECT clock_timestamp() AS t) AS n
ON CONFLICT (key) DO UPDATE SET
    debt = {settled},
    updated_at = {now},
    empty_at = {empty},
    size = EXCLUDED.size,
    rate = EXCLUDED.rate
RETURNING debt, size, rate",
            new_empty = empty_at("n.t", fresh, "q.rate"),
            empty = empty_at(now, &settled, "EXCLUDED.rate"),
        );

        let set_quota = format!(
            "INSERT INTO {q} (key, size, rate) VALUES ($1::text, $2::float8, $3::float8)
ON CONFLICT (key) DO UPDATE SET size = EXCLUDED.size, rate = EXCLUDED.rate"
        );
        let clear_quota = format!("DELETE FROM {q} WHERE key = $1::text RETURNING key");

        let prune = format!(
            "DELETE FROM {t} WHERE key IN (
    SELECT key FROM {t} WHERE empty_at < clock_timestamp()
    ORDER BY empty_at LIMIT $1::int8 FOR UPDATE SKIP LOCKED
) AND empty_at < clock_timestamp()"
        );
        let rows = format!("SELECT count(*)::int8 FROM {t}");
        Self {
            migrate,
            admit,
            debt,
            settle,
            set_quota,
            clear_quota,
            prune,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        for ok in ["buckets", "dripfeed.tenants", "_t1"] {
            assert!(valid_table(ok), "{ok}");
        }
        for bad in [
            "",
            "1t",
            "a.b.c",
            "Buckets",
            "t; drop",
            "t\"",
            &"x".repeat(49),
        ] {
            assert!(!valid_table(bad), "{bad}");
        }
    }

    #[test]
    fn statements_name_the_table() {
        let s = Statements::new("app.buckets");
        assert!(s.migrate.contains("\"app\".\"buckets\""));
        assert!(s.migrate.contains("\"buckets_empty_at\""));
        assert!(s.migrate.contains("\"app\".\"buckets_quotas\""));
        assert!(s.admit.contains("clock_timestamp()"));
        assert!(s.prune.contains("SKIP LOCKED"));
    }
}
