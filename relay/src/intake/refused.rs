//! A webhook the destinations set refused, as the problem intake answers.

use axum::http::StatusCode;
use axum::response::Response;
use dripfeed::{Cause, Reason, Rejected, headers};

use super::answers::Answers;
use crate::domain::job::Job;
use crate::domain::problem::problem;

/// The problem for a webhook the set refused, counted in `answers`.
pub fn refused(answers: &Answers, r: Rejected<Job>) -> Response {
    let fields = headers::for_rejected(&r);
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let (kind, detail) = match r.reason() {
        Reason::Overloaded => {
            Answers::bump(&answers.full_503);
            ("overloaded", "the delivery queue is full; retry later")
        }
        Reason::OverQuota => {
            Answers::bump(&answers.quota_429);
            ("over-quota", "this tenant is over its quota; retry later")
        }
        Reason::Closed => {
            Answers::bump(&answers.closed_503);
            ("closed", "the relay is shutting down")
        }
        Reason::Unavailable {
            cause: Cause::JournalFull,
        } => {
            Answers::bump(&answers.journal_503);
            ("unavailable", "the relay's journal is full; retry later")
        }
        Reason::Unavailable {
            cause: Cause::JournalFailed,
        } => {
            Answers::bump(&answers.journal_503);
            (
                "unavailable",
                "the relay cannot write its journal; retry later",
            )
        }
        Reason::Unavailable { .. } => {
            Answers::bump(&answers.store_503);
            (
                "unavailable",
                "the tenant quota store is unavailable; retry later",
            )
        }
        _ => ("invalid", "this webhook can never be admitted"),
    };
    problem(status, kind, detail.to_owned(), fields)
}
