//! The keys of the messages a run moved, kept out of memory as the run goes: a replay of a
//! million messages would otherwise hold a million strings (tens of MiB) until its audit record
//! is written. The replay shell appends each batch the engine confirmed ([`Spool::append`]);
//! the audit record, the TUI's page and `--json` read them back in order ([`Spool::for_each`]),
//! one at a time.
//!
//! The keys go to a file in the temporary directory (created at the first key, readable by this
//! user only, removed when the last handle is dropped). Where that file cannot be written the
//! keys stay in memory instead, so none is ever lost: the audit must name every moved message.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A run's moved keys, in the order they were confirmed. Cloning shares the same list.
#[derive(Clone, Default)]
pub struct Spool {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    file: Option<(PathBuf, BufWriter<File>)>,
    /// Keys the file could not take (it could not be created or written), after those in it.
    memory: Vec<String>,
    /// Keys in the file.
    in_file: u64,
    /// Set when the file failed: why, said once by whoever reads the spool.
    broken: Option<String>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((path, _)) = self.file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spool({} keys)", self.len())
    }
}

/// Distinguishes the spools of one process.
static NEXT: AtomicU64 = AtomicU64::new(0);

impl Spool {
    /// Keys held in memory only (tests, and runs that are known to be small).
    pub fn from_keys(keys: Vec<String>) -> Spool {
        let s = Spool::default();
        s.lock().memory = keys;
        s
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many keys it holds.
    pub fn len(&self) -> u64 {
        let i = self.lock();
        i.in_file + i.memory.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `keys` at the end. Never fails: what the file cannot take is kept in memory.
    pub fn append(&self, keys: Vec<String>) {
        if keys.is_empty() {
            return;
        }
        let mut i = self.lock();
        if !i.memory.is_empty() || i.broken.is_some() {
            // Once in memory, always in memory: the order stays the order of confirms.
            i.memory.extend(keys);
            return;
        }
        if i.file.is_none() {
            match create() {
                Ok(f) => i.file = Some(f),
                Err(e) => {
                    i.broken = Some(format!("cannot create a file for the moved ids: {e}"));
                    i.memory.extend(keys);
                    return;
                }
            }
        }
        let Some((_, w)) = i.file.as_mut() else {
            return;
        };
        let mut written = 0usize;
        let mut failed = None;
        for k in &keys {
            match write_key(w, k) {
                Ok(()) => written += 1,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        i.in_file += written as u64;
        if let Some(e) = failed {
            // A key half written would be read back wrong: the file is read up to the last
            // whole key ([`read_key`] stops at a short record) and the rest kept here.
            i.broken = Some(format!("writing the moved ids to a file failed: {e}"));
            i.memory.extend(keys.into_iter().skip(written));
        }
    }

    /// Adds every key of `other` at the end (a run that reconnected carries on in a new segment).
    pub fn extend_from(&self, other: &Spool) {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return;
        }
        let mut batch = Vec::with_capacity(4096);
        let r = other.for_each(|k| {
            batch.push(k);
            if batch.len() == 4096 {
                self.append(std::mem::take(&mut batch));
            }
        });
        self.append(batch);
        if let Err(e) = r {
            let mut i = self.lock();
            i.broken.get_or_insert(e);
        }
    }

    /// Calls `each` with every key, in order, holding one at a time. `Err` says why some keys
    /// could not be read back (the file was damaged or removed); those read are given.
    pub fn for_each(&self, mut each: impl FnMut(String)) -> Result<(), String> {
        let mut i = self.lock();
        let mut problem = i.broken.clone();
        if let Some((path, w)) = i.file.as_mut() {
            let read = w
                .flush()
                .and_then(|()| File::open(&*path))
                .map_err(|e| format!("reading back the moved ids failed: {e}"));
            match read {
                Ok(f) => {
                    let mut r = BufReader::with_capacity(64 * 1024, f);
                    let mut left = i.in_file;
                    while left > 0 {
                        match read_key(&mut r) {
                            Ok(k) => each(k),
                            Err(e) => {
                                problem.get_or_insert(format!(
                                    "reading back the moved ids failed: {e}; {left} not read"
                                ));
                                break;
                            }
                        }
                        left -= 1;
                    }
                }
                Err(e) => problem = Some(e),
            }
        }
        for k in &i.memory {
            each(k.clone());
        }
        match problem {
            Some(p) => Err(p),
            None => Ok(()),
        }
    }

    /// A reader of the keys, in order, one at a time ([`Reader::next_key`]): for
    /// a writer that must await between chunks (the broker audit's `outcome-ids` entries),
    /// which [`for_each`](Self::for_each) cannot. Keys appended after it was made are not read.
    pub fn reader(&self) -> Reader {
        let mut i = self.lock();
        let mut problem = i.broken.clone();
        let mut file = None;
        let mut left = 0;
        if let Some((path, w)) = i.file.as_mut() {
            match w.flush().and_then(|()| File::open(&*path)) {
                Ok(f) => {
                    file = Some(BufReader::with_capacity(64 * 1024, f));
                    left = i.in_file;
                }
                Err(e) => problem = Some(format!("reading back the moved ids failed: {e}")),
            }
        }
        Reader {
            file,
            left,
            // Only where the file failed (rare): those keys are in memory already.
            memory: i.memory.clone().into_iter(),
            problem,
        }
    }

    /// Every key in memory: only for lists known to be short (tests, a TUI page's worth).
    pub fn to_vec(&self) -> Vec<String> {
        let mut out = Vec::new();
        let _ = self.for_each(|k| out.push(k));
        out
    }
}

/// Reads a spool's keys in order, one at a time (see [`Spool::reader`]). It holds the file
/// open, not the spool's lock.
pub struct Reader {
    file: Option<BufReader<File>>,
    /// Keys still to read from the file.
    left: u64,
    memory: std::vec::IntoIter<String>,
    problem: Option<String>,
}

impl Reader {
    /// True when every key was read (or the rest could not be).
    pub fn is_done(&self) -> bool {
        (self.left == 0 || self.file.is_none()) && self.memory.as_slice().is_empty()
    }

    /// Why some keys could not be read back, if so (the file was damaged or removed).
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// The next key, in order; `None` at the end.
    pub fn next_key(&mut self) -> Option<String> {
        if self.left > 0
            && let Some(r) = self.file.as_mut()
        {
            match read_key(r) {
                Ok(k) => {
                    self.left -= 1;
                    return Some(k);
                }
                Err(e) => {
                    self.problem.get_or_insert(format!(
                        "reading back the moved ids failed: {e}; {} not read",
                        self.left
                    ));
                    self.left = 0;
                    self.file = None;
                }
            }
        }
        self.memory.next()
    }
}

fn create() -> std::io::Result<(PathBuf, BufWriter<File>)> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("warren-moved-{}-{n}.keys", std::process::id()));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let f = o.open(&path)?;
    Ok((path, BufWriter::with_capacity(64 * 1024, f)))
}

/// One key: its length (4 bytes, little-endian) and its UTF-8 bytes. Any text fits, newlines
/// included (a message id is the sender's to choose).
fn write_key(w: &mut impl Write, k: &str) -> std::io::Result<()> {
    let len = u32::try_from(k.len()).map_err(|_| std::io::Error::other("a key over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(k.as_bytes())
}

fn read_key(r: &mut impl Read) -> std::io::Result<String> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut buf)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::other(format!("not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_back_in_order_from_the_file_and_the_file_goes_with_the_last_handle() {
        let s = Spool::default();
        s.append(vec!["id:a".into(), "id:b\nwith a newline".into()]);
        s.append(Vec::new());
        s.append(vec!["h:ü".into(), String::new()]);
        assert_eq!(s.len(), 4);
        let path = s.lock().file.as_ref().map(|(p, _)| p.clone()).unwrap();
        assert!(path.exists());
        let copy = s.clone();
        drop(s);
        assert_eq!(
            copy.to_vec(),
            vec!["id:a", "id:b\nwith a newline", "h:ü", ""]
        );
        drop(copy);
        assert!(
            !path.exists(),
            "the spool file is removed with the last handle"
        );
    }

    #[test]
    fn a_later_segment_is_appended_after_the_first() {
        let a = Spool::default();
        a.append(vec!["1".into(), "2".into()]);
        let b = Spool::from_keys(vec!["3".into()]);
        a.extend_from(&b);
        a.extend_from(&a.clone());
        assert_eq!(a.to_vec(), vec!["1", "2", "3"]);
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn a_reader_gives_the_keys_in_order_and_says_when_it_is_done() {
        let s = Spool::default();
        s.append((0..3).map(|n| format!("k{n}")).collect());
        s.lock().broken = Some("disk full".into());
        s.append(vec!["memory".into()]);
        let mut r = s.reader();
        // Appended after the reader was made: not read by it.
        s.append(vec!["later".into()]);
        let mut got = Vec::new();
        while !r.is_done() {
            got.extend(r.next_key());
        }
        assert_eq!(got, vec!["k0", "k1", "k2", "memory"]);
        assert_eq!(r.next_key(), None);
        assert_eq!(r.problem(), Some("disk full"));
        let empty = Spool::default().reader();
        assert!(empty.is_done());
    }

    #[test]
    fn keys_kept_in_memory_after_a_file_problem_come_after_those_in_the_file() {
        let s = Spool::default();
        s.append(vec!["1".into()]);
        s.lock().broken = Some("disk full".into());
        s.append(vec!["2".into()]);
        let mut got = Vec::new();
        let r = s.for_each(|k| got.push(k));
        assert_eq!(got, vec!["1", "2"]);
        assert_eq!(r, Err("disk full".to_string()));
    }
}
