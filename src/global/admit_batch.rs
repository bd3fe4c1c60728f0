//! Admissions gathered into one round trip, as the journal gathers
//! admissions into one `fsync`: while one pipeline of admission scripts is
//! on its way, the admissions that arrive wait, and go together in the
//! next. Nothing waits for company: an admission that finds no pipeline
//! on its way goes at once, alone. Each admission still runs its own
//! script (its own bound check, its own answer); only the round trip is
//! shared. One task per queue, started by its first admission.

use std::sync::{Arc, OnceLock};

use redis::{Script, Value};
use tokio::sync::{mpsc, oneshot};

use super::conn::{RedisConnection, RedisError, bounded};
use super::redis_queue::CALL;

/// Admissions in one pipeline at most.
const MOST: usize = 128;
/// Admissions that may wait for the next pipeline; past it a caller waits
/// for room (back-pressure on intake).
const WAITING: usize = 4096;

/// One admission script's keys and arguments, owned.
#[derive(Debug, Default)]
pub(crate) struct Call {
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
}

/// An admission waiting for its pipeline, and where its answer goes.
struct Pending {
    call: Call,
    answer: oneshot::Sender<Result<Value, RedisError>>,
}

/// A queue's admissions, gathered (cheap to clone: one task for all).
#[derive(Clone, Default)]
pub(crate) struct Batcher {
    waiting: Arc<OnceLock<mpsc::Sender<Pending>>>,
}

impl Batcher {
    /// Runs `call` of `script` through `conn` in the next pipeline: the
    /// script's answer, or why there is none (the pipeline failed, or
    /// Redis refused this script).
    pub async fn run(
        &self,
        script: &Script,
        conn: &RedisConnection,
        call: Call,
    ) -> Result<Value, RedisError> {
        let waiting = self.waiting.get_or_init(|| {
            let (tx, rx) = mpsc::channel(WAITING);
            tokio::spawn(gather(script.clone(), conn.clone(), rx));
            tx
        });
        let (answer, answered) = oneshot::channel();
        if waiting.send(Pending { call, answer }).await.is_err() {
            return Err(RedisError::unexpected("the admissions' task has ended"));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(RedisError::unexpected("the admissions' task has ended")))
    }
}

/// The task: each turn, every admission waiting (up to [`MOST`]) in one
/// pipeline.
async fn gather(script: Script, mut conn: RedisConnection, mut waiting: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MOST);
    while let Some(first) = waiting.recv().await {
        batch.push(first);
        while batch.len() < MOST
            && let Ok(more) = waiting.try_recv()
        {
            batch.push(more);
        }
        let calls: Vec<&Call> = batch.iter().map(|p| &p.call).collect();
        let answers = pipeline(&script, &mut conn, &calls).await;
        for (pending, answer) in batch.drain(..).zip(answers) {
            let _ = pending.answer.send(answer);
        }
    }
}

/// `calls` in one pipeline: an answer for each, in order. A script Redis
/// does not know (a restart, `SCRIPT FLUSH`) is loaded, and the calls it
/// refused for that sent again (they ran nothing).
async fn pipeline(
    script: &Script,
    conn: &mut RedisConnection,
    calls: &[&Call],
) -> Vec<Result<Value, RedisError>> {
    let mut answers = send(script, conn, calls).await;
    let unknown: Vec<usize> = (0..calls.len())
        .filter(|&i| matches!(&answers[i], Err(e) if unknown_script(e)))
        .collect();
    if unknown.is_empty() {
        return answers;
    }
    if let Err(e) = bounded(script.load_async(conn), CALL).await {
        for i in unknown {
            answers[i] = Err(e.clone());
        }
        return answers;
    }
    let again: Vec<&Call> = unknown.iter().map(|&i| calls[i]).collect();
    for (i, answer) in unknown.into_iter().zip(send(script, conn, &again).await) {
        answers[i] = answer;
    }
    answers
}

/// Whether Redis refused a call for not knowing its script.
fn unknown_script(e: &RedisError) -> bool {
    let text = e.to_string();
    text.contains("NOSCRIPT") || text.contains("NoScript")
}

/// One round trip: `calls` as `EVALSHA`s, each answer on its own (an
/// error in one is that call's).
async fn send(
    script: &Script,
    conn: &mut RedisConnection,
    calls: &[&Call],
) -> Vec<Result<Value, RedisError>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for call in calls {
        let mut invocation = script.prepare_invoke();
        for key in &call.keys {
            invocation.key(key.as_slice());
        }
        for arg in &call.args {
            invocation.arg(arg.as_slice());
        }
        pipe.invoke_script(&invocation);
    }
    match bounded(pipe.query_async::<Vec<Value>>(conn), CALL).await {
        Ok(values) if values.len() == calls.len() => values
            .into_iter()
            .map(|v| match v {
                Value::ServerError(e) => Err(RedisError::from(redis::RedisError::from(e))),
                v => Ok(v),
            })
            .collect(),
        Ok(_) => calls
            .iter()
            .map(|_| Err(RedisError::unexpected("a pipeline's answers")))
            .collect(),
        Err(e) => calls.iter().map(|_| Err(e.clone())).collect(),
    }
}
