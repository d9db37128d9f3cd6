//! A browsed page kept out of memory: each message's packing (`domain::packed`) appended to a
//! file Warren owns, and read back when the message is opened, saved or filtered by its body or
//! headers. The list keeps only what it shows, filters and groups by (`domain::brief`) and where
//! each message lies in the file, so a read of a million dead letters does not hold a million
//! bodies.
//!
//! One file per browse, in Warren's cache directory (`$WARREN_CACHE_DIR`, else the platform's,
//! e.g. `~/.cache/warren/pages/`, else the temporary directory), readable by this user only
//! (it holds message bodies), removed when the last handle is dropped: when the page is
//! replaced, or Warren exits. Files left by a Warren that was killed are removed by the next one
//! that spills (see [`sweep`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::packed::Packed;

/// Overrides where spill files go (tests, or a host whose cache is small).
pub const CACHE_ENV: &str = "WARREN_CACHE_DIR";

/// The file of one browse. Dropping the last handle removes it.
#[derive(Debug)]
pub struct Spill {
    path: PathBuf,
    file: File,
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Spill {
    /// Where the file is (tests check that it goes).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes at `at`, `len` long.
    fn read(&self, at: u64, len: u32) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        read_exact_at(&self.file, &mut buf, at)?;
        Ok(buf)
    }
}

#[cfg(unix)]
fn read_exact_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
}

#[cfg(not(unix))]
fn read_exact_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    // Positioned reads without a shared cursor: Windows' `seek_read` may read less.
    let mut done = 0;
    while done < buf.len() {
        let n = std::os::windows::fs::FileExt::seek_read(f, &mut buf[done..], at + done as u64)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        done += n;
    }
    Ok(())
}

/// One message in a spill file.
#[derive(Clone, Debug)]
pub struct Spilled {
    spill: Arc<Spill>,
    at: u64,
    len: u32,
}

impl Spilled {
    /// The packed message, read back from the file.
    pub fn read(&self) -> std::io::Result<Packed> {
        let bytes = self.spill.read(self.at, self.len)?;
        Packed::from_bytes(&bytes)
            .ok_or_else(|| std::io::Error::other("the spill file holds no message there"))
    }

    /// The file it is in.
    pub fn spill(&self) -> &Arc<Spill> {
        &self.spill
    }
}

/// A message of a long list: packed in memory, or in the page's spill file.
#[derive(Clone, Debug)]
pub enum Letter {
    /// Boxed: a row of a million must stay small, and most are spilled.
    Held(Box<Packed>),
    Spilled(Spilled),
}

impl Letter {
    /// The packed message (read back from the file when spilled).
    pub fn packed(&self) -> std::io::Result<std::borrow::Cow<'_, Packed>> {
        match self {
            Letter::Held(p) => Ok(std::borrow::Cow::Borrowed(p)),
            Letter::Spilled(s) => s.read().map(std::borrow::Cow::Owned),
        }
    }

    /// The whole message. A spill file that cannot be read back (a disk error: the file is
    /// open, so removing it does not lose it) gives a message that says so in its body.
    pub fn unpack(&self) -> crate::domain::message::DeadLetter {
        match self.packed() {
            Ok(p) => p.unpack(),
            Err(e) => {
                tracing::warn!("reading a message back from its spill file failed: {e}");
                crate::domain::message::DeadLetter {
                    body: format!(
                        "(Warren could not read this message back from its spill file: {e})"
                    )
                    .into_bytes(),
                    ..Default::default()
                }
            }
        }
    }
}

impl From<Packed> for Letter {
    fn from(p: Packed) -> Letter {
        Letter::Held(Box::new(p))
    }
}

/// Appends messages to a new spill file; what it appended is readable once [`flush`]ed.
///
/// [`flush`]: SpillWriter::flush
pub struct SpillWriter {
    spill: Arc<Spill>,
    out: BufWriter<File>,
    at: u64,
    scratch: Vec<u8>,
}

/// Distinguishes the spill files of one process.
static NEXT: AtomicU64 = AtomicU64::new(0);

impl SpillWriter {
    /// A new, empty spill file (see the module documentation for where).
    pub fn create() -> std::io::Result<SpillWriter> {
        let dir = dir();
        std::fs::create_dir_all(&dir)?;
        sweep(&dir);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("page-{}-{n}.spill", std::process::id()));
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let file = o.open(&path)?;
        let writer = file.try_clone()?;
        Ok(SpillWriter {
            spill: Arc::new(Spill { path, file }),
            out: BufWriter::with_capacity(256 * 1024, writer),
            at: 0,
            scratch: Vec::new(),
        })
    }

    /// Appends `p`; where it lies is readable after the next [`SpillWriter::flush`].
    pub fn append(&mut self, p: &Packed) -> std::io::Result<Spilled> {
        self.scratch.clear();
        p.write_bytes(&mut self.scratch);
        let len = u32::try_from(self.scratch.len())
            .map_err(|_| std::io::Error::other("a message over 4 GiB"))?;
        self.out.write_all(&self.scratch)?;
        let at = self.at;
        self.at += u64::from(len);
        Ok(Spilled {
            spill: self.spill.clone(),
            at,
            len,
        })
    }

    /// Makes everything appended so far readable.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.at
    }

    pub fn is_empty(&self) -> bool {
        self.at == 0
    }

    pub fn spill(&self) -> &Arc<Spill> {
        &self.spill
    }
}

/// The directory spill files go to.
pub fn dir() -> PathBuf {
    if let Some(p) = std::env::var_os(CACHE_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("pages");
    }
    directories::ProjectDirs::from("", "", "warren")
        .map(|d| d.cache_dir().join("pages"))
        .unwrap_or_else(|| std::env::temp_dir().join("warren-pages"))
}

/// Removes the spill files of Warren processes that are gone (killed before they could remove
/// their own). Where a process cannot be looked up (not Linux), nothing is removed.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("page-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let proc = Path::new("/proc");
        if pid != std::process::id() && proc.is_dir() && !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::DeadLetter;

    #[test]
    fn messages_read_back_as_written_and_the_file_goes_with_the_last_handle() {
        let mut w = SpillWriter::create().expect("spill file");
        let letters: Vec<Packed> = (0..3u8)
            .map(|i| {
                Packed::pack(DeadLetter {
                    position: u64::from(i),
                    body: vec![i; 100 * usize::from(i)],
                    ..DeadLetter::default()
                })
            })
            .collect();
        let at: Vec<Spilled> = letters.iter().map(|p| w.append(p).unwrap()).collect();
        w.flush().unwrap();
        for (p, s) in letters.iter().zip(&at).rev() {
            assert_eq!(&s.read().unwrap(), p);
        }
        let path = w.spill().path().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        drop(w);
        assert!(path.exists(), "a message still refers to it");
        drop(at);
        assert!(!path.exists());
    }
}
