//! The observers' per-file summary cache: for each chat-store file followed, its identity, size, where reading stopped and the chat state derived so far, kept under `$XDG_CACHE_HOME/koru/` so that a restart over unchanged history reads nothing it read before. A damaged, foreign or unsafe cache is ignored (and rebuilt), never trusted.
//!
//! The file is one header line and one line per file. The header is JSON, padded with
//! spaces to a fixed width (it is written last, over a placeholder); a file's line
//! has three parts separated by tabs (compact JSON never holds a raw tab, so the tabs
//! split them): the entry, a JSON array `[path, store, dev, ino, size, mtime_ns,
//! turn_open]`; the chats table's rows the file produced, a JSON array of
//! `[chat_id, workspace, state, last_activity_ms, last_prompt]` (the store is the
//! entry's); and the follower's checkpoint as JSON. Arrays, not objects: a heavy user's
//! 10,000 entries are parsed at every start, and their field names were half of the
//! strings parsed. The rows and the checkpoint are kept as text, not parsed again, until
//! the file changes; for a file with no turn open, only where that text lies in the cache
//! file read, which stays open ([`KeptText`]). The header names the format, its version, the
//! observers' generation (bumped whenever what parsers derive changes: a cache from
//! another generation is not trusted) and the CRC-32 of everything after the header line
//! (a check against damage, not against forgery: the file is the user's own and refused
//! when others can write it; SHA-256 of a heavy user's 9 MB was 3 % of a restart).
//! docs/observers.md, "Restarts", describes it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use koru_protocol::{ChatInfo, ObservedChatState};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The cache's format name, in its header.
const FORMAT: &str = "koru-observer-summary";
/// The layout of the file (3: the entry and the rows are JSON arrays, the rows follow the
/// entry after a tab and the checkpoint the rows after another; 2: the entry an object
/// holding the rows, the checkpoint after a tab). A cache of another layout is refused and
/// rebuilt.
const VERSION: u32 = 3;
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

/// What the cache remembers of one followed file, as read back (its path is the key of
/// the map [`load`] returns).
#[derive(Debug)]
pub struct CachedFile {
    /// The store's registry id (one this build knows: an entry of another is skipped).
    pub store: &'static str,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    /// A turn was open (time may still conclude it): the file's follower is made at
    /// start. Without one, an unchanged file's follower waits until the file changes.
    pub turn_open: bool,
    /// The chats table's rows the file produced, as the daemon last knew them.
    pub chats: Vec<ChatInfo>,
    /// The same rows and the follower's checkpoint, as the text they were written as.
    pub kept: KeptText,
}

/// A line's rows and checkpoint as they were written (the part after the entry's tab):
/// what a dormant file keeps until it changes, and writes back as it was. The rows are
/// read again from it ([`KeptText::rows`]) and the follower's state from its checkpoint
/// ([`KeptText::checkpoint`]) only when the file changes.
///
/// Text the start-up needs no more of (a file with no turn open) stays in the cache file
/// it was read from, which stays open: its place and CRC-32 are kept, not its bytes (at a
/// heavy user's 10,000 files, 5.6 MB of text and 10,000 allocations not made at each
/// start). Read back, it must match its CRC-32, or it counts as missing (its file is read
/// again from its start): the old file is never written to, but someone else could.
#[derive(Debug, Default)]
pub struct KeptText {
    place: Kept,
}

#[derive(Debug, Default)]
enum Kept {
    /// Nothing: a file not restored from the cache.
    #[default]
    Nothing,
    /// The text itself, the checkpoint from `checkpoint_at` (after the rows' tab).
    Held {
        text: Box<[u8]>,
        checkpoint_at: usize,
    },
    /// `len` bytes at `offset` in the cache file `file` (the one loaded, kept open even
    /// after a newer cache replaced it).
    InFile {
        file: std::sync::Arc<std::fs::File>,
        offset: u64,
        len: u32,
        checkpoint_at: u32,
        crc32: u32,
    },
}

impl KeptText {
    /// The rows and the checkpoint of one line, `rows` and `checkpoint` JSON texts.
    pub fn new(rows: &str, checkpoint: &str) -> KeptText {
        let mut text = Vec::with_capacity(rows.len() + 1 + checkpoint.len());
        text.extend_from_slice(rows.as_bytes());
        text.push(b'\t');
        text.extend_from_slice(checkpoint.as_bytes());
        KeptText {
            place: Kept::Held {
                text: text.into_boxed_slice(),
                checkpoint_at: rows.len() + 1,
            },
        }
    }

    /// The whole text and where its checkpoint starts (`None`: nothing kept, or the cache
    /// file no longer holds what was read from it).
    fn text(&self) -> Option<(std::borrow::Cow<'_, [u8]>, usize)> {
        match &self.place {
            Kept::Nothing => None,
            Kept::Held {
                text,
                checkpoint_at,
            } => Some((std::borrow::Cow::Borrowed(&text[..]), *checkpoint_at)),
            Kept::InFile {
                file,
                offset,
                len,
                checkpoint_at,
                crc32,
            } => {
                use std::os::unix::fs::FileExt;
                let mut text = vec![0; *len as usize];
                file.read_exact_at(&mut text, *offset).ok()?;
                (crc32fast::hash(&text) == *crc32)
                    .then_some((std::borrow::Cow::Owned(text), *checkpoint_at as usize))
            }
        }
    }

    /// The rows again, as `store`'s chats (`None`: not rows, or not readable).
    pub fn rows(&self, store: &str) -> Option<Vec<ChatInfo>> {
        let (text, checkpoint_at) = self.text()?;
        parse_rows(&text[..checkpoint_at.saturating_sub(1)], store).ok()
    }

    /// The follower's checkpoint (`None`: not text, or not readable).
    pub fn checkpoint(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self.text()? {
            (std::borrow::Cow::Borrowed(text), at) => std::str::from_utf8(&text[at..])
                .ok()
                .map(std::borrow::Cow::Borrowed),
            (std::borrow::Cow::Owned(mut text), at) => {
                text.drain(..at);
                String::from_utf8(text).ok().map(std::borrow::Cow::Owned)
            }
        }
    }

    /// Appends the rows, a tab and the checkpoint, as written; an error when they cannot
    /// be read back as they were.
    pub fn write_to(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let (text, _) = self
            .text()
            .ok_or_else(|| std::io::Error::other("the kept text cannot be read back"))?;
        out.extend_from_slice(&text);
        Ok(())
    }
}

/// What a cache line says besides its path and its rows, in the order it says it.
type Entry<'a> = (PathBuf, &'a str, u64, u64, u64, i64, bool);

/// One row as the cache writes it: `[chat_id, workspace, state, last_activity_ms,
/// last_prompt]`.
type RowOut<'a> = (
    &'a str,
    &'a Option<String>,
    ObservedChatState,
    u64,
    &'a Option<String>,
);

/// One row as the cache reads it.
type RowIn = (
    String,
    Option<String>,
    ObservedChatState,
    u64,
    Option<String>,
);

/// A line's rows, read straight into the chats table's type; their store is set after
/// ([`CachedRows::of_store`]).
struct CachedRows(Vec<ChatInfo>);

impl CachedRows {
    fn of_store(self, store: &str) -> Vec<ChatInfo> {
        let mut chats = self.0;
        for chat in &mut chats {
            chat.store = store.to_string();
        }
        chats
    }
}

impl<'de> Deserialize<'de> for CachedRows {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = CachedRows;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of chat rows")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut rows: A,
            ) -> Result<CachedRows, A::Error> {
                // Most files hold one chat.
                let mut chats = Vec::with_capacity(rows.size_hint().unwrap_or(1));
                while let Some(row) = rows.next_element::<RowIn>()? {
                    let (chat_id, workspace, state, last_activity_ms, last_prompt) = row;
                    chats.push(ChatInfo {
                        store: String::new(),
                        chat_id,
                        workspace,
                        state,
                        last_activity_ms,
                        last_prompt,
                    });
                }
                Ok(CachedRows(chats))
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

/// The rows of a line's middle part, as `store`'s chats.
fn parse_rows(text: &[u8], store: &str) -> serde_json::Result<Vec<ChatInfo>> {
    serde_json::from_slice::<CachedRows>(text).map(|rows| rows.of_store(store))
}

/// The first JSON value of `text`, and where it ends.
fn first_value<'de, T: Deserialize<'de>>(text: &'de [u8]) -> serde_json::Result<(T, usize)> {
    let mut values = serde_json::Deserializer::from_slice(text).into_iter::<T>();
    let value = values
        .next()
        .unwrap_or_else(|| Err(serde::de::Error::custom("nothing where a value belongs")))?;
    Ok((value, values.byte_offset()))
}

/// The registry id `id` names, as the observers spell it (`None`: no store of this build).
fn known_store(id: &str) -> Option<&'static str> {
    super::locations::Store::ALL
        .iter()
        .map(|store| store.id())
        .find(|known| *known == id)
}

/// What follows a file's entry on its line: its rows and checkpoint made now, or kept as
/// the cache held them (a file whose follower was never made, `watcher`'s dormant files).
#[derive(Debug)]
pub enum EntryBody<'a> {
    Made {
        chats: &'a [ChatInfo],
        checkpoint: serde_json::Value,
    },
    Kept(&'a KeptText),
}

/// One entry as it is written, borrowed from the watcher's state.
#[derive(Debug)]
pub struct CacheEntry<'a> {
    pub path: &'a Path,
    pub store: &'a str,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub turn_open: bool,
    pub body: EntryBody<'a>,
}

impl CacheEntry<'_> {
    /// Appends the entry's line (entry, tab, rows, tab, checkpoint, newline) to `body`.
    /// A row of another store than the entry's cannot be written (the rows name none):
    /// such an entry is refused, and its file read again at the next start.
    pub fn write_line(&self, body: &mut Vec<u8>) -> std::io::Result<()> {
        let start = body.len();
        let entry = (
            self.path,
            self.store,
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns,
            self.turn_open,
        );
        let written = serde_json::to_writer(&mut *body, &entry)
            .map_err(std::io::Error::from)
            .and_then(|()| {
                body.push(b'\t');
                match &self.body {
                    EntryBody::Made { chats, checkpoint } => {
                        if chats.iter().any(|chat| chat.store != self.store) {
                            return Err(std::io::Error::other(
                                "a row of another store than its file's",
                            ));
                        }
                        let rows: Vec<RowOut<'_>> = chats
                            .iter()
                            .map(|chat| {
                                (
                                    chat.chat_id.as_str(),
                                    &chat.workspace,
                                    chat.state,
                                    chat.last_activity_ms,
                                    &chat.last_prompt,
                                )
                            })
                            .collect();
                        serde_json::to_writer(&mut *body, &rows)?;
                        body.push(b'\t');
                        serde_json::to_writer(&mut *body, checkpoint)?;
                    }
                    EntryBody::Kept(kept) => kept.write_to(body)?,
                }
                Ok(())
            });
        match written {
            Ok(()) => {
                body.push(b'\n');
                Ok(())
            }
            Err(error) => {
                // Nothing of a line that could not be written whole.
                body.truncate(start);
                Err(error)
            }
        }
    }
}

/// The header line.
#[derive(Debug, serde::Serialize, Deserialize)]
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
/// the file's bytes as well; the text of an entry with no turn open is left in the file,
/// which stays open ([`KeptText`]).
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
    // Kept open: the text of files with no turn open is read from it again when needed.
    let file = std::sync::Arc::new(file);
    let mut reader = BufReader::with_capacity(64 * 1024, &*file);
    let mut line = Vec::with_capacity(4096);
    let read_line = |reader: &mut BufReader<&std::fs::File>, line: &mut Vec<u8>| {
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
    let mut entries = 0usize;
    // Where the line read starts in the file.
    let mut position = line.len() as u64;
    while read_line(&mut reader, &mut line)? > 0 {
        digest.update(&line);
        let line_at = position;
        position += line.len() as u64;
        index += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        entries += 1;
        // Parsed before the checksum is known: a damaged file is refused whole below,
        // whatever its entries said.
        let damaged =
            |what: &dyn std::fmt::Display| CacheRefused::Damaged(format!("entry {index}: {what}"));
        // Each part is read where it stands, up to its end: the tabs are not looked for.
        let ((path, store, dev, ino, size, mtime_ns, turn_open), entry_end) =
            first_value::<Entry<'_>>(text).map_err(|error| damaged(&error))?;
        let after_entry = match text.get(entry_end..) {
            Some([b'\t', after @ ..]) => after,
            _ => return Err(damaged(&"no rows after it")),
        };
        let (rows, rows_end) =
            first_value::<CachedRows>(after_entry).map_err(|error| damaged(&error))?;
        if after_entry.get(rows_end) != Some(&b'\t') {
            return Err(damaged(&"no checkpoint after its rows"));
        }
        let Some(store) = known_store(store) else {
            // A store this build does not observe: nothing to restore it for.
            continue;
        };
        let chats = rows.of_store(store);
        let kept = match (turn_open, u32::try_from(after_entry.len())) {
            // Restored live at start: its checkpoint is read at once.
            (true, _) | (_, Err(_)) => KeptText {
                place: Kept::Held {
                    text: after_entry.into(),
                    checkpoint_at: rows_end + 1,
                },
            },
            (false, Ok(len)) => KeptText {
                place: Kept::InFile {
                    file: file.clone(),
                    offset: line_at + (text.len() - after_entry.len()) as u64,
                    len,
                    checkpoint_at: rows_end as u32 + 1,
                    crc32: crc32fast::hash(after_entry),
                },
            },
        };
        files.insert(
            path.into_os_string(),
            CachedFile {
                store,
                dev,
                ino,
                size,
                mtime_ns,
                turn_open,
                chats,
                kept,
            },
        );
    }
    if format!("{:08x}", digest.finalize()) != header.crc32 {
        return Err(CacheRefused::Damaged(
            "its checksum does not match its content".into(),
        ));
    }
    if entries != header.files {
        return Err(CacheRefused::Damaged(format!(
            "{entries} entries where the header says {}",
            header.files
        )));
    }
    Ok(files)
}

/// Writes the cache at `path` (folder 0700, file 0600), atomically: a reader sees the old
/// file or the new one, never half of one. An entry that cannot be written is left out.
pub fn save<'a>(
    path: &Path,
    files: impl Iterator<Item = &'a CacheEntry<'a>>,
) -> std::io::Result<usize> {
    let (mut lines, write) = start_write(path.to_path_buf());
    for file in files {
        let _ = lines.push(file);
    }
    lines.finish();
    write.run()
}

/// Lines handed to the writing thread at a time.
const CHUNK_BYTES: usize = 64 * 1024;
/// The header line's length, newline included: it is written last, over a line of
/// spaces this long, once the count and the checksum are known (JSON allows the spaces
/// that pad it).
const HEADER_BYTES: usize = 256;

/// What the serializing side hands the writing side.
enum Piece {
    Lines(Vec<u8>),
    /// Every line was handed over: `count` entries, the CRC-32 of all of them.
    End {
        count: usize,
        crc32: u32,
    },
}

/// A cache being written, in two halves: [`CacheLines`], which the watcher fills a line
/// at a time from its state, and [`CacheWrite`], which a blocking thread runs to append
/// each chunk of lines to a temporary file as it comes. The whole body is never held in
/// memory (2.2 MB at 3,000 files, 7.5 MB at 10,000: it was the peak of a first start),
/// and a disk busy with others' writes still never holds the watcher up (chunks wait in
/// the channel).
pub fn start_write(path: PathBuf) -> (CacheLines, CacheWrite) {
    let (sender, pieces) = std::sync::mpsc::channel();
    (
        CacheLines {
            sender,
            chunk: Vec::with_capacity(CHUNK_BYTES + 4096),
            crc: crc32fast::Hasher::new(),
            count: 0,
        },
        CacheWrite { path, pieces },
    )
}

/// The serializing half of a cache write ([`start_write`]). Dropped before
/// [`CacheLines::finish`], the write is abandoned and the old cache stays.
pub struct CacheLines {
    sender: std::sync::mpsc::Sender<Piece>,
    chunk: Vec<u8>,
    crc: crc32fast::Hasher,
    count: usize,
}

impl CacheLines {
    /// Adds `entry`'s line; an entry that cannot be written whole is left out (its file
    /// is read again at the next start).
    pub fn push(&mut self, entry: &CacheEntry<'_>) -> std::io::Result<()> {
        entry.write_line(&mut self.chunk)?;
        self.count += 1;
        if self.chunk.len() >= CHUNK_BYTES {
            self.hand_over();
        }
        Ok(())
    }

    fn hand_over(&mut self) {
        self.crc.update(&self.chunk);
        let chunk = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_BYTES + 4096));
        // A writer that stopped (it could not write) drops what follows.
        let _ = self.sender.send(Piece::Lines(chunk));
    }

    /// Hands the last lines over and says the cache is complete; returns how many
    /// entries it holds.
    pub fn finish(mut self) -> usize {
        if !self.chunk.is_empty() {
            self.hand_over();
        }
        let _ = self.sender.send(Piece::End {
            count: self.count,
            crc32: self.crc.clone().finalize(),
        });
        self.count
    }
}

/// The writing half of a cache write ([`start_write`]), for a blocking thread.
pub struct CacheWrite {
    path: PathBuf,
    pieces: std::sync::mpsc::Receiver<Piece>,
}

impl CacheWrite {
    /// Writes the lines as they come to a temporary file, then the header over its
    /// placeholder, then renames it over the cache; returns the number of entries. Not
    /// synced to disk: it is a cache, and a file a crash cut short fails its checksum and
    /// is rebuilt. On any failure, or when the lines stop before their end, the temporary
    /// file is removed and the old cache stays.
    pub fn run(self) -> std::io::Result<usize> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| std::io::Error::other("the cache path has no folder"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let temporary = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let written = (|| {
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temporary)?;
            let mut placeholder = vec![b' '; HEADER_BYTES];
            placeholder[HEADER_BYTES - 1] = b'\n';
            out.write_all(&placeholder)?;
            let (count, crc32) = loop {
                match self.pieces.recv() {
                    Ok(Piece::Lines(lines)) => out.write_all(&lines)?,
                    Ok(Piece::End { count, crc32 }) => break (count, crc32),
                    Err(_) => return Err(std::io::Error::other("the cache's lines stopped")),
                }
            };
            let header = Header {
                format: FORMAT.into(),
                version: VERSION,
                generation: GENERATION,
                koru: env!("CARGO_PKG_VERSION").into(),
                files: count,
                crc32: format!("{crc32:08x}"),
            };
            let mut line = serde_json::to_vec(&header)?;
            if line.len() >= HEADER_BYTES {
                return Err(std::io::Error::other("the cache's header is too long"));
            }
            line.resize(HEADER_BYTES - 1, b' ');
            line.push(b'\n');
            use std::os::unix::fs::FileExt;
            out.write_all_at(&line, 0)?;
            Ok(count)
        })();
        let renamed =
            written.and_then(|count| std::fs::rename(&temporary, &self.path).map(|()| count));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::ObservedChatState;
    use std::os::unix::fs::FileExt;

    /// An entry's owned parts, lent to [`CacheEntry`] by [`Owned::entry`].
    struct Owned {
        path: PathBuf,
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
                turn_open: false,
                body: EntryBody::Made {
                    chats: &self.chats,
                    checkpoint: serde_json::json!({"position": 300}),
                },
            }
        }
    }

    fn owned(name: &str) -> Owned {
        Owned {
            path: PathBuf::from(format!("/h/.claude/projects/p/{name}.jsonl")),
            chats: vec![ChatInfo {
                store: "chat_history_claude_code_jsonl".into(),
                chat_id: name.into(),
                workspace: Some("/w".into()),
                state: ObservedChatState::Idle,
                last_activity_ms: 9,
                last_prompt: Some("fix\tit".into()),
            }],
        }
    }

    /// A loaded entry, to be written back as it was read.
    fn kept_entry<'a>(path: &'a std::ffi::OsStr, file: &'a CachedFile) -> CacheEntry<'a> {
        CacheEntry {
            path: Path::new(path),
            store: file.store,
            dev: file.dev,
            ino: file.ino,
            size: file.size,
            mtime_ns: file.mtime_ns,
            turn_open: file.turn_open,
            body: EntryBody::Kept(&file.kept),
        }
    }

    /// A temporary folder holding a cache of two entries, and the cache's path.
    fn two_saved() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("koru/observers/x.ndjson");
        save_two(&path);
        (dir, path)
    }

    fn save_two(path: &Path) {
        let (a, b) = (owned("a"), owned("b"));
        save(path, [a.entry(), b.entry()].iter()).unwrap();
    }

    #[test]
    fn a_saved_cache_loads_back_whole_and_private() {
        let (dir, path) = two_saved();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.len(), 2);
        let a = &loaded[Path::new("/h/.claude/projects/p/a.jsonl").as_os_str()];
        assert_eq!(a.chats, owned("a").chats);
        assert_eq!(a.store, "chat_history_claude_code_jsonl");
        assert_eq!((a.dev, a.ino, a.size, a.mtime_ns), (1, 2, 300, 4));
        assert!(!a.turn_open);
        assert_eq!(a.kept.checkpoint().as_deref(), Some(r#"{"position":300}"#));
        assert_eq!(
            a.kept.rows("chat_history_claude_code_jsonl"),
            Some(owned("a").chats)
        );

        // Kept as it was read, it is written back as it was read.
        let again = dir.path().join("again.ndjson");
        let entries: Vec<CacheEntry<'_>> = loaded
            .iter()
            .map(|(path, file)| kept_entry(path, file))
            .collect();
        save(&again, entries.iter()).unwrap();
        let lines = |p: &Path| {
            let mut lines: Vec<String> = std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&again), lines(&path));

        // Rows name no store: a row of another store than its file's is not written.
        let mut odd = owned("c");
        odd.chats[0].store = "chat_history_codex_jsonl".into();
        let mut body = b"kept".to_vec();
        assert!(odd.entry().write_line(&mut body).is_err());
        assert_eq!(body, b"kept");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn a_cache_is_written_as_its_lines_come_and_an_abandoned_write_leaves_the_old_one() {
        let (_dir, path) = two_saved();
        let before = std::fs::read(&path).unwrap();
        // The header is written last, over its placeholder: padded to its width.
        assert_eq!(
            before.iter().position(|b| *b == b'\n'),
            Some(HEADER_BYTES - 1)
        );
        let header = std::str::from_utf8(&before[..HEADER_BYTES - 1]).unwrap();
        assert!(
            header.starts_with('{') && header.trim_end().ends_with('}') && header.ends_with(' ')
        );

        // Many entries, in several chunks, the writing thread running alongside.
        let many: Vec<Owned> = (0..400)
            .map(|n| owned(&format!("s{n:03}-{}", "x".repeat(200))))
            .collect();
        let (mut lines, write) = start_write(path.clone());
        let writer = std::thread::spawn(move || write.run());
        for file in &many {
            lines.push(&file.entry()).unwrap();
        }
        assert_eq!(lines.finish(), 400);
        assert_eq!(writer.join().unwrap().unwrap(), 400);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.len(), 400);
        assert!(std::fs::metadata(&path).unwrap().len() > 2 * CHUNK_BYTES as u64);
        let last = &many[399];
        assert_eq!(loaded[last.path.as_os_str()].chats, last.chats);

        // Lines that stop before their end: nothing replaces the cache, no file is left.
        let (mut lines, write) = start_write(path.clone());
        lines.push(&owned("late").entry()).unwrap();
        drop(lines);
        assert!(write.run().is_err());
        assert_eq!(load(&path).unwrap().len(), 400);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![path.file_name().unwrap().to_os_string()]);
    }

    #[test]
    fn a_dormant_files_text_stays_in_the_cache_it_came_from_and_is_never_trusted_changed() {
        let (_dir, path) = two_saved();
        let written = std::fs::read(&path).unwrap();
        let loaded = load(&path).unwrap();
        let kept = |loaded: &super::super::PathMap<CachedFile>| {
            let a = &loaded[Path::new("/h/.claude/projects/p/a.jsonl").as_os_str()];
            (
                a.kept.checkpoint().map(|c| c.into_owned()),
                a.kept.rows(a.store),
            )
        };
        let as_read = (
            Some(r#"{"position":300}"#.to_string()),
            Some(owned("a").chats),
        );
        assert_eq!(kept(&loaded), as_read);

        // A newer cache written over it (as the watcher does) leaves the loaded file's
        // text readable: it was kept open.
        let entries = |loaded: &super::super::PathMap<CachedFile>| -> Vec<u8> {
            let mut body = Vec::new();
            for (path, file) in loaded {
                kept_entry(path, file).write_line(&mut body).unwrap();
            }
            body
        };
        let over: Vec<CacheEntry<'_>> = loaded
            .iter()
            .map(|(path, file)| kept_entry(path, file))
            .collect();
        assert_eq!(save(&path, over.iter()).unwrap(), 2);
        assert_eq!(kept(&loaded), as_read);
        let body_written = &written[written.iter().position(|b| *b == b'\n').unwrap() + 1..];
        let lines = |body: &[u8]| {
            let mut lines: Vec<Vec<u8>> = body.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&entries(&loaded)), lines(body_written));

        // Someone else changes the file in place under a loaded cache: what was kept there
        // no longer matches its CRC-32, so it is not used (the file is read again) and not
        // written into a new cache.
        let loaded = load(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        // Every file's checkpoint, same length, another position.
        for at in 0..bytes.len() - 14 {
            if &bytes[at..at + 14] == b"\"position\":300" {
                bytes[at + 11] = b'9';
            }
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all_at(&bytes, 0)
            .unwrap();
        assert_eq!(kept(&loaded), (None, None));
        let (a_path, a) = loaded
            .get_key_value(Path::new("/h/.claude/projects/p/a.jsonl").as_os_str())
            .unwrap();
        let mut body = b"before".to_vec();
        assert!(kept_entry(a_path, a).write_line(&mut body).is_err());
        assert_eq!(body, b"before");
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

        // The layout before this one (2, each entry an object holding its rows).
        let older = text.replacen(&format!("\"version\":{VERSION}"), "\"version\":2", 1);
        assert_ne!(older, text);
        std::fs::write(&path, older).unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Foreign(_))));

        // Writable by others: anyone could have put chats in it.
        std::fs::write(&path, &good).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(load(&path), Err(CacheRefused::Unsafe { .. })));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load(&path).unwrap().len(), 2);
    }
}
