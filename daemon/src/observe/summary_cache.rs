//! The observers' per-file summary cache: for each chat-store file followed, its identity, size, where reading stopped and the chat state derived so far, kept under `$XDG_CACHE_HOME/koru/` so that a restart over unchanged history reads nothing it read before. A damaged, foreign or unsafe cache is ignored (and rebuilt), never trusted.
//!
//! The file is one header line and one line per file. The header is JSON; a file's line
//! is its entry as JSON, a tab, and its follower's checkpoint as JSON (compact JSON never
//! holds a raw tab, so the first one splits them): the checkpoint is kept as text, not
//! parsed, until its file changes. The header names the
//! format, its version, the observers' generation (bumped whenever what parsers derive
//! changes: a cache from another generation is not trusted) and the CRC-32 of everything
//! after the header line (a check against damage, not against forgery: the file is the
//! user's own and refused when others can write it; SHA-256 of a heavy user's 9 MB was
//! 3 % of a restart). docs/observers.md, "Restarts", describes it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use koru_protocol::ChatInfo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The cache's format name, in its header.
const FORMAT: &str = "koru-observer-summary";
/// The layout of the file (2: entries say whether a turn is open, the checkpoint follows
/// the entry after a tab, the header's checksum is a CRC-32).
const VERSION: u32 = 2;
/// What the parsers derive: bump when a parser's state or its conclusions change, so that
/// a cache written by another build is read again rather than trusted.
pub const GENERATION: u32 = 1;

/// The cache file for the daemon on `socket`: `$XDG_CACHE_HOME/koru/observers/<digest of
/// the socket path>.ndjson` (else under `~/.cache`). One per socket, as daemons on
/// different sockets observe independently.
pub fn default_path(socket: &Path) -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    let digest = Sha256::digest(socket.as_os_str().as_encoded_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Some(cache.join("koru/observers").join(format!("{name}.ndjson")))
}

/// What the cache remembers of one followed file, as read back.
#[derive(Debug, Deserialize)]
pub struct CachedFile {
    /// Also the key of the map [`load`] returns (and taken from here for it: empty).
    pub path: PathBuf,
    /// The store's registry id.
    pub store: String,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    /// The follower's checkpoint (read position, the parser's state), as the JSON text it
    /// was written as (after the line's tab): the follower reads it into its own types.
    #[serde(skip)]
    pub checkpoint: Box<str>,
    /// A turn was open (time may still conclude it): the file's follower is made at
    /// start. Without one, an unchanged file's follower waits until the file changes.
    pub turn_open: bool,
    /// The chats table's rows the file produced, as the daemon last knew them.
    pub chats: Vec<ChatInfo>,
}

/// A checkpoint to write: made by a follower now, or kept as the cache held it (a file
/// whose follower was never made, `watcher`'s dormant files).
#[derive(Debug)]
pub enum Checkpoint<'a> {
    Made(serde_json::Value),
    Kept(&'a str),
}

/// One entry as it is written: the same fields as [`CachedFile`] and the file's path,
/// borrowed from the watcher's state.
#[derive(Debug, Serialize)]
pub struct CacheEntry<'a> {
    pub path: &'a Path,
    pub store: &'a str,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    #[serde(skip)]
    pub checkpoint: &'a Checkpoint<'a>,
    pub turn_open: bool,
    pub chats: &'a [ChatInfo],
}

impl CacheEntry<'_> {
    /// Appends the entry's line (entry, tab, checkpoint, newline) to `body`.
    pub fn write_line(&self, body: &mut Vec<u8>) -> std::io::Result<()> {
        let start = body.len();
        let written = serde_json::to_writer(&mut *body, self).and_then(|()| {
            body.push(b'\t');
            match self.checkpoint {
                Checkpoint::Made(value) => serde_json::to_writer(&mut *body, value),
                Checkpoint::Kept(text) => {
                    body.extend_from_slice(text.as_bytes());
                    Ok(())
                }
            }
        });
        match written {
            Ok(()) => {
                body.push(b'\n');
                Ok(())
            }
            Err(error) => {
                // Nothing of a line that could not be written whole.
                body.truncate(start);
                Err(error.into())
            }
        }
    }
}

/// The header line.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    generation: u32,
    /// The Koru version that wrote it.
    koru: String,
    files: usize,
    /// CRC-32 (IEEE) of the bytes after the header line, 8 hex digits.
    crc32: String,
}

/// Why a cache was not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheRefused {
    #[error("no cache yet")]
    Missing,
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    #[error("it is not ours: owned by uid {owner}, or writable by others (mode {mode:o})")]
    Unsafe { owner: u32, mode: u32 },
    #[error("damaged: {0}")]
    Damaged(String),
    #[error("written by another build ({0}): its conclusions are not trusted")]
    Foreign(String),
}

/// Reads the cache at `path`: every entry, by path, when the whole file is intact and
/// ours; otherwise why not. The file is read a line at a time (its checksum computed on the
/// way) and each entry parsed into its own types, so reading it holds the entries and not
/// the file's bytes as well.
pub fn load(path: &Path) -> Result<super::PathMap<CachedFile>, CacheRefused> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(CacheRefused::Missing)
        }
        Err(error) => return Err(CacheRefused::Unreadable(error)),
    };
    // The file opened, not the path again: what is checked is what is read.
    let meta = file.metadata().map_err(CacheRefused::Unreadable)?;
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(CacheRefused::Unsafe {
            owner: meta.uid(),
            mode: meta.permissions().mode() & 0o777,
        });
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(4096);
    let read_line = |reader: &mut BufReader<std::fs::File>, line: &mut Vec<u8>| {
        line.clear();
        reader
            .read_until(b'\n', line)
            .map_err(CacheRefused::Unreadable)
    };
    if read_line(&mut reader, &mut line)? == 0 || line.last() != Some(&b'\n') {
        return Err(CacheRefused::Damaged("no header line".into()));
    }
    let header: Header = serde_json::from_slice(&line[..line.len() - 1])
        .map_err(|error| CacheRefused::Damaged(format!("header: {error}")))?;
    if header.format != FORMAT {
        return Err(CacheRefused::Foreign(format!("format {:?}", header.format)));
    }
    if header.version != VERSION || header.generation != GENERATION {
        return Err(CacheRefused::Foreign(format!(
            "version {} generation {}, this build reads {VERSION} / {GENERATION}",
            header.version, header.generation
        )));
    }
    // Never more room than the file could hold entries for (the header is not trusted yet).
    let most = (meta.len() / 64) as usize;
    let mut files =
        super::PathMap::with_capacity_and_hasher(header.files.min(most), Default::default());
    let mut digest = crc32fast::Hasher::new();
    let mut index = 0usize;
    while read_line(&mut reader, &mut line)? > 0 {
        digest.update(&line);
        index += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        // Parsed before the checksum is known: a damaged file is refused whole below,
        // whatever its entries said.
        let Some(tab) = text.iter().position(|b| *b == b'\t') else {
            return Err(CacheRefused::Damaged(format!(
                "entry {index}: no checkpoint after it"
            )));
        };
        let mut entry: CachedFile = serde_json::from_slice(&text[..tab])
            .map_err(|error| CacheRefused::Damaged(format!("entry {index}: {error}")))?;
        entry.checkpoint = std::str::from_utf8(&text[tab + 1..])
            .map_err(|error| CacheRefused::Damaged(format!("entry {index}: {error}")))?
            .into();
        files.insert(std::mem::take(&mut entry.path).into_os_string(), entry);
    }
    if format!("{:08x}", digest.finalize()) != header.crc32 {
        return Err(CacheRefused::Damaged(
            "its checksum does not match its content".into(),
        ));
    }
    if files.len() != header.files {
        return Err(CacheRefused::Damaged(format!(
            "{} entries where the header says {}",
            files.len(),
            header.files
        )));
    }
    Ok(files)
}

/// Writes the cache at `path` (folder 0700, file 0600), atomically: a reader sees the old
/// file or the new one, never half of one.
pub fn save<'a>(
    path: &Path,
    files: impl Iterator<Item = &'a CacheEntry<'a>>,
) -> std::io::Result<()> {
    let (body, count) = serialize(files)?;
    write(path, &body, count)
}

/// The cache's entries as its body (one line each), and how many.
pub fn serialize<'a>(
    files: impl Iterator<Item = &'a CacheEntry<'a>>,
) -> std::io::Result<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut count = 0usize;
    for file in files {
        file.write_line(&mut body)?;
        count += 1;
    }
    Ok((body, count))
}

/// Writes a serialized body with its header, atomically (a temporary file renamed over
/// the old one). Not synced to disk: it is a cache, and a file a crash cut short fails its
/// checksum and is rebuilt.
pub fn write(path: &Path, body: &[u8], count: usize) -> std::io::Result<()> {
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        generation: GENERATION,
        koru: env!("CARGO_PKG_VERSION").into(),
        files: count,
        crc32: format!("{:08x}", crc32fast::hash(body)),
    };
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the cache path has no folder"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    out.write_all(body)?;
    drop(out);
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::ObservedChatState;

    /// An entry's owned parts, lent to [`CacheEntry`] by [`Owned::entry`].
    struct Owned {
        path: PathBuf,
        checkpoint: Checkpoint<'static>,
        chats: Vec<ChatInfo>,
    }

    impl Owned {
        fn entry(&self) -> CacheEntry<'_> {
            CacheEntry {
                path: &self.path,
                store: "chat_history_claude_code_jsonl",
                dev: 1,
                ino: 2,
                size: 300,
                mtime_ns: 4,
                checkpoint: &self.checkpoint,
                turn_open: false,
                chats: &self.chats,
            }
        }
    }

    fn owned(name: &str) -> Owned {
        Owned {
            path: PathBuf::from(format!("/h/.claude/projects/p/{name}.jsonl")),
            checkpoint: Checkpoint::Made(serde_json::json!({"position": 300})),
            chats: vec![ChatInfo {
                store: "chat_history_claude_code_jsonl".into(),
                chat_id: name.into(),
                workspace: Some("/w".into()),
                state: ObservedChatState::Idle,
                last_activity_ms: 9,
                last_prompt: Some("fix it".into()),
            }],
        }
    }

    fn save_two(path: &Path) {
        let (a, b) = (owned("a"), owned("b"));
        save(path, [a.entry(), b.entry()].iter()).unwrap();
    }

    #[test]
    fn a_saved_cache_loads_back_whole_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("koru/observers/x.ndjson");
        save_two(&path);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.len(), 2);
        let a = &loaded[Path::new("/h/.claude/projects/p/a.jsonl").as_os_str()];
        assert_eq!(a.chats[0].last_prompt.as_deref(), Some("fix it"));
        assert_eq!(a.store, "chat_history_claude_code_jsonl");
        assert_eq!((a.dev, a.ino, a.size, a.mtime_ns), (1, 2, 300, 4));
        assert_eq!(&*a.checkpoint, r#"{"position":300}"#);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn a_damaged_foreign_or_unsafe_cache_is_refused_never_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.ndjson");
        assert!(matches!(load(&path), Err(CacheRefused::Missing)));
        save_two(&path);
        let good = std::fs::read(&path).unwrap();

        // One byte changed in an entry: the checksum says so.
        let mut flipped = good.clone();
        let at = flipped.len() - 20;
        flipped[at] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(
            matches!(load(&path), Err(CacheRefused::Damaged(_))),
            "{:?}",
            load(&path)
        );

        // Cut short (a crash while another program wrote it).
        std::fs::write(&path, &good[..good.len() / 2]).unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Damaged(_))));

        // Not a cache at all.
        std::fs::write(&path, b"hello\n").unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Damaged(_))));

        // Another generation's conclusions.
        let text = String::from_utf8(good.clone()).unwrap();
        let other = text.replacen(
            &format!("\"generation\":{GENERATION}"),
            &format!("\"generation\":{}", GENERATION + 1),
            1,
        );
        std::fs::write(&path, other).unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Foreign(_))));

        // Writable by others: anyone could have put chats in it.
        std::fs::write(&path, &good).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Unsafe { .. })));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load(&path).unwrap().len(), 2);
    }
}
