//! Damaged segments: a garbled byte costs the record it is in, never the
//! records after it; the damaged file is set aside, never deleted; what
//! was skipped is counted. Segments in the first format (before the sync
//! word) still recover. A record a client forges inside its payload is not
//! taken for one after damage: checksums are keyed by the directory's key,
//! which is kept in every segment's header (twice, so a garbled byte there
//! costs nothing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use dripfeed::journal::Journal;
use dripfeed::{Delivery, Outcome, Throttle};
use metrics_util::debugging::DebuggingRecorder;

use super::{fresh_dir, segments, snapshot};

/// Admits `n` jobs `job-NNN` and shuts down with them all still queued:
/// they stay in the journal. Returns `(id, job)` in admission order.
async fn leave(dir: &Path, n: usize) -> Vec<(u64, String)> {
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(n)
        .journal(Journal::open(dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let mut admitted = Vec::new();
    for i in 0..n {
        let job = format!("job-{i:03}");
        admitted.push((throttle.submit(job.clone()).await.unwrap().id(), job));
    }
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(report.stats.outcome(Outcome::Kept), n as u64);
    drop(throttle);
    drain.join().await;
    admitted
}

/// The segment holding the jobs (the largest file).
fn biggest(dir: &Path) -> PathBuf {
    let size = |p: &PathBuf| std::fs::metadata(p).unwrap().len();
    segments(dir).into_iter().max_by_key(size).unwrap()
}

fn aside(seg: &Path) -> PathBuf {
    let mut name = seg.as_os_str().to_owned();
    name.push(".damaged");
    PathBuf::from(name)
}

fn found(journal: &Journal) -> Vec<(u64, String)> {
    let jobs = journal.take_recovered().into_iter();
    jobs.map(|r| (r.id, String::from_utf8(r.job).unwrap()))
        .collect()
}

const SKIPPED: &str = "leaky_bucket_journal_skipped_records_total{}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_flipped_byte_costs_one_record_not_the_rest_of_the_segment() {
    let dir = fresh_dir("flip");
    let admitted = leave(&dir, 200).await;
    let seg = biggest(&dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();

    let recorder = DebuggingRecorder::new();
    let journal = metrics::with_local_recorder(&recorder, || Journal::open(&dir)).unwrap();
    let stats = journal.stats();
    let recovered = found(&journal);
    assert_eq!(recovered.len(), 199, "one record lost, the other 199 kept");
    let kept: Vec<_> = admitted
        .iter()
        .filter(|job| recovered.contains(job))
        .cloned()
        .collect();
    assert_eq!(recovered, kept, "every one as admitted, in order");
    assert_eq!(stats.skipped, 1);
    assert!((26..=40).contains(&stats.skipped_bytes), "{stats:?}");
    assert_eq!(stats.cut, 0, "nothing cut");
    assert_eq!(support_counter(&recorder), 1);
    assert_eq!(
        std::fs::read(aside(&seg)).unwrap(),
        bytes,
        "the damaged segment kept aside as it was"
    );
    drop(journal);

    // Rewritten for good: the next open skips nothing and finds the same.
    let journal = Journal::open(&dir).unwrap();
    assert_eq!((journal.recovered(), journal.stats().skipped), (199, 0));
    assert_eq!(found(&journal), recovered);
}

fn support_counter(recorder: &DebuggingRecorder) -> u64 {
    crate::support::counters(recorder)
        .get(SKIPPED)
        .copied()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flipped_bit_of_a_middle_record_loses_no_other_record() {
    let dir = fresh_dir("flip-each");
    let admitted = leave(&dir, 5).await;
    let seg = biggest(&dir);
    let bytes = std::fs::read(&seg).unwrap();
    // Five records of 28 bytes ("job-NNN" and 21 of framing) end the file.
    let third = bytes.len() - 3 * 28;
    let others: Vec<_> = [0, 1, 3, 4].map(|i| admitted[i].clone()).into();
    for at in third..third + 28 {
        for bit in 0..8 {
            let copy = snapshot(&dir, "flip-each-copy");
            let seg = copy.join(seg.file_name().unwrap());
            let mut bad = bytes.clone();
            bad[at] ^= 1 << bit;
            std::fs::write(&seg, &bad).unwrap();
            let journal = Journal::open(&copy).unwrap();
            assert_eq!(found(&journal), others, "byte {at} bit {bit}");
            assert_eq!(journal.stats().skipped, 1, "byte {at} bit {bit}");
            assert!(aside(&seg).exists());
        }
    }
}

/// What `tests/fixtures/journal-v1` holds unfinished (see its README).
fn v1_unfinished() -> Vec<(u64, Option<String>, String)> {
    let mut out: Vec<_> = [1001, 1003, 1005, 1006, 1008]
        .map(|id| (id, None, format!("job-{}", id - 1000)))
        .into();
    out.push((1009, Some("dest-a".to_string()), "tagged".to_string()));
    out
}

fn fixture(name: &str) -> super::Scratch {
    let dir = fresh_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal-v1");
    let seg = "0000000000000001.seg";
    std::fs::copy(from.join(seg), dir.join(seg)).unwrap();
    dir
}

fn tagged(journal: &Journal) -> Vec<(u64, Option<String>, String)> {
    let jobs = journal.take_recovered().into_iter();
    jobs.map(|r| (r.id, r.tag, String::from_utf8(r.job).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_of_the_first_format_still_recovers() {
    let dir = fixture("v1");
    let journal = Journal::open(&dir).unwrap();
    assert_eq!(tagged(&journal), v1_unfinished());
    assert_eq!((journal.stats().skipped, journal.stats().cut), (0, 0));
    // New segments are written in the new format.
    let newest = segments(&dir).pop().unwrap();
    assert_eq!(&std::fs::read(&newest).unwrap()[..8], b"dripjnl\x03");
    // Ending half of them copies the rest forward (read from the old
    // format, written in the new) and gives the old segment back.
    for id in [1001, 1003, 1005] {
        journal.discard(id);
    }
    journal.flush().await;
    journal.flush().await; // space is given back after a batch
    assert!(!dir.join("0000000000000001.seg").exists(), "reclaimed");
    drop(journal);
    let journal = Journal::open(&dir).unwrap();
    assert_eq!(tagged(&journal), v1_unfinished()[3..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_segment_of_the_first_format_keeps_its_other_records() {
    let dir = fixture("v1-damaged");
    let seg = dir.join("0000000000000001.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    // Records of 22 bytes after the 8-byte magic: job 1003's payload.
    bytes[8 + 2 * 22 + 19] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let journal = Journal::open(&dir).unwrap();
    let mut expected = v1_unfinished();
    expected.remove(1);
    assert_eq!(tagged(&journal), expected);
    assert_eq!(journal.stats().skipped, 1);
    assert_eq!(std::fs::read(aside(&seg)).unwrap(), bytes);
    // Once the first batch has given space back (the rewritten segment may
    // be copied forward), every segment left is in the new format.
    journal.flush().await;
    for seg in segments(&dir) {
        let magic = std::fs::read(&seg).unwrap()[..8].to_vec();
        assert_eq!(magic, b"dripjnl\x03", "{}", seg.display());
    }
    drop(journal);
    let journal = Journal::open(&dir).unwrap();
    assert_eq!(tagged(&journal), expected, "the same, once rewritten");
    assert_eq!(journal.stats().skipped, 0);
}

/// CRC-32 (IEEE), as anyone can compute it from the published format.
fn public_crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for byte in parts.iter().flat_map(|p| p.iter()) {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// An `End` record for job `id` as a client that knows the published
/// layout (sync word, checksum, length, kind, id) but not the directory's
/// key would build it.
fn forged_end(id: u64) -> Vec<u8> {
    let mut body = vec![2u8]; // End
    body.extend_from_slice(&id.to_le_bytes());
    let len = (body.len() as u32).to_le_bytes();
    let mut out = vec![0xFE, 0xD7, 0x1F, 0x5A];
    out.extend_from_slice(&public_crc32(&[&len, &body]).to_le_bytes());
    out.extend_from_slice(&len);
    out.extend_from_slice(&body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_forged_in_a_payload_cannot_end_another_job_after_damage() {
    let dir = fresh_dir("forged");
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(10)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &Vec<u8>, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let victim = b"victim".to_vec();
    let a = throttle.submit(victim.clone()).await.unwrap().id();
    // A client's body that embeds a whole record ending job A.
    let forged = forged_end(a);
    let mut hostile = b"{\"note\":\"".to_vec();
    hostile.extend_from_slice(&forged);
    hostile.extend_from_slice(b"\"}");
    let b = throttle.submit(hostile.clone()).await.unwrap().id();
    let after = b"after".to_vec();
    let c = throttle.submit(after.clone()).await.unwrap().id();
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(report.stats.outcome(Outcome::Kept), 3);
    drop(throttle);
    drain.join().await;

    // Garble a byte of B's header (its checksum): recovery loses B and
    // searches for the next record from inside B's payload.
    let seg = biggest(&dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let payload = bytes
        .windows(hostile.len())
        .position(|w| w == hostile)
        .unwrap();
    let b_record = payload - 21; // sync, crc, len, kind, id
    assert_eq!(bytes[b_record..b_record + 4], [0xFE, 0xD7, 0x1F, 0x5A]);
    bytes[b_record + 5] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();

    let journal = Journal::open(&dir).unwrap();
    let recovered: Vec<_> = journal
        .take_recovered()
        .into_iter()
        .map(|r| (r.id, r.job))
        .collect();
    assert_eq!(
        recovered,
        [(a, victim), (c, after)],
        "job A survives the forged End; only B is lost (B was {b})"
    );
    let lost = 21 + hostile.len() as u64;
    assert_eq!(journal.stats().skipped_bytes, lost, "B's record alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_byte_in_the_key_loses_nothing_and_the_key_is_kept() {
    let dir = fresh_dir("key-flip");
    let admitted = leave(&dir, 5).await;
    let seg = biggest(&dir);
    let bytes = std::fs::read(&seg).unwrap();
    let key = bytes[8..24].to_vec();
    // The header: magic, then two copies of the key, each with its CRC-32.
    assert_eq!(&bytes[..8], b"dripjnl\x03");
    assert_eq!(bytes[28..44], key[..], "the second copy");
    for at in 8..48 {
        let copy = snapshot(&dir, "key-flip-copy");
        let seg = copy.join(seg.file_name().unwrap());
        let mut bad = bytes.clone();
        bad[at] ^= 0x08;
        std::fs::write(&seg, &bad).unwrap();
        let journal = Journal::open(&copy).unwrap();
        assert_eq!(found(&journal), admitted, "byte {at}");
        let stats = journal.stats();
        assert_eq!((stats.skipped, stats.skipped_bytes), (0, 20), "byte {at}");
        assert_eq!(std::fs::read(aside(&seg)).unwrap(), bad, "kept aside");
        drop(journal);
        // Rewritten with a whole header, and the same key everywhere.
        let journal = Journal::open(&copy).unwrap();
        assert_eq!(journal.stats().skipped_bytes, 0, "byte {at}");
        for s in segments(&copy) {
            let head = std::fs::read(&s).unwrap();
            assert_eq!(head[8..24], key[..], "{}", s.display());
            assert_eq!(head[28..44], key[..], "{}", s.display());
        }
    }
}
