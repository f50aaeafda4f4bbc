//! An append-only file written through a shared memory map of space allocated ahead of its data (a copy per append instead of a `write(2)`): the journal's current segment. The allocated space after the data reads as NUL bytes until the file is finished (cut back to its data); where no map can be made (a file system that is not a local disk or `tmpfs`, no `fallocate`), appends fall back to `pwrite(2)` and the file never holds a reserve.
//!
//! Readers of a segment take its first NUL byte as the end of its data when only NUL bytes
//! follow it (`segments::Lines`, `segments::segment_end`; docs/journal.md).
//!
//! Why the map is safe to hold: the file is the daemon's own (its folder is 0700 and the
//! journal's lock is held while it is open); the space the map covers is allocated on the
//! disk before it is mapped (`fallocate`), so a page the daemon writes never needs a block
//! the disk does not have (the cause of `SIGBUS` on a full disk); the map is dropped before
//! the file is ever cut shorter than it. What remains is another process cutting the live
//! segment file, which `SIGBUS`es the daemon at its next append — as a hand editing a live
//! database file would corrupt it — and an I/O error of the disk under a mapped page.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;

/// Bytes mapped (and allocated ahead of the data) at a time: about 200 drives' entries.
/// From the second window on, a window's pages are faulted in when it is mapped (one
/// `madvise` instead of a fault every few appends) and count in the daemon's resident
/// memory (as file pages) while it is; the first window after opening is not, so a daemon
/// that has only started holds the few pages it wrote.
pub const WINDOW_BYTES: usize = 256 << 10;

/// How appends reach the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendMode {
    /// Copied into a shared map of allocated space.
    Mapped,
    /// `pwrite(2)`, and why not mapped.
    Written(String),
}

/// The part of the file mapped now: `len` bytes from `start` (a multiple of the page size).
struct Window {
    ptr: NonNull<u8>,
    start: u64,
    len: usize,
}

/// An append-only file; see the module's documentation.
pub struct MappedAppender {
    file: File,
    /// Bytes of data.
    len: u64,
    /// The file's size: the data and, when mapped, the NUL reserve after it.
    allocated: u64,
    window: Option<Window>,
    window_bytes: usize,
    page: u64,
    mode: AppendMode,
    /// Windows mapped so far.
    windows: u64,
    /// Whether the first window is faulted in when it is mapped, as the later ones are.
    fault_in_first: bool,
}

// The map is only touched through `&mut self`; the pointer is the map's, not shared.
unsafe impl Send for MappedAppender {}

/// Whether a file system keeps a shared map of a file coherent with the file and can
/// allocate ahead: local disks' file systems and `tmpfs`; not NFS, SMB, FUSE.
fn mappable(file: &File) -> Result<(), String> {
    use nix::sys::statfs as fs;
    let stat = fs::fstatfs(file).map_err(|e| format!("statfs: {e}"))?;
    let kind = stat.filesystem_type();
    let local = [
        fs::EXT4_SUPER_MAGIC,
        fs::XFS_SUPER_MAGIC,
        fs::BTRFS_SUPER_MAGIC,
        fs::TMPFS_MAGIC,
        fs::F2FS_SUPER_MAGIC,
    ];
    if local.contains(&kind) {
        Ok(())
    } else {
        Err(format!(
            "file system {:#x} is not one a map is used on",
            kind.0
        ))
    }
}

impl MappedAppender {
    /// Appends to `file` (opened for reading and writing) after its first `len` bytes, which
    /// are its data; anything after them is overwritten.
    pub fn open(file: File, len: u64) -> io::Result<MappedAppender> {
        let mode = match mappable(&file) {
            Ok(()) => AppendMode::Mapped,
            Err(why) => AppendMode::Written(why),
        };
        MappedAppender::with(file, len, mode, WINDOW_BYTES)
    }

    /// [`MappedAppender::open`] with the mode and window size chosen (tests).
    pub fn with(
        file: File,
        len: u64,
        mode: AppendMode,
        window_bytes: usize,
    ) -> io::Result<MappedAppender> {
        let allocated = file.metadata()?.len().max(len);
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        Ok(MappedAppender {
            file,
            len,
            allocated,
            window: None,
            window_bytes: window_bytes.max(page as usize),
            page,
            mode,
            windows: 0,
            fault_in_first: false,
        })
    }

    /// Faults the first window in when it is mapped too (for a file that is written
    /// through right after it is opened, like the pending-text log; a segment's first
    /// window is left to fault page by page so that an idle daemon holds few pages).
    pub fn faulting_in_the_first_window(mut self) -> MappedAppender {
        self.fault_in_first = true;
        self
    }

    /// Bytes of data.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn mode(&self) -> &AppendMode {
        &self.mode
    }

    /// The file (for `fdatasync`: it covers what was written through the map).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Appends `bytes` after the data.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.mode == AppendMode::Mapped {
            self.ensure_window(bytes.len())?;
            if let Some(window) = &self.window {
                let at = (self.len - window.start) as usize;
                // SAFETY: `window_holds` (or `move_window`) made sure `at + bytes.len()`
                // is within the map, which covers allocated space of the file; the map is
                // this value's alone and `bytes` cannot overlap it (it is borrowed while
                // `self` is mutably borrowed).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        window.ptr.as_ptr().add(at),
                        bytes.len(),
                    );
                }
                self.len += bytes.len() as u64;
                return Ok(());
            }
        }
        self.file.write_all_at(bytes, self.len)?;
        self.len += bytes.len() as u64;
        self.allocated = self.allocated.max(self.len);
        Ok(())
    }

    /// Maps the window the next appends go to now (its space allocated and its pages
    /// faulted in as an append would), so that the first append is only a copy: for a
    /// file prepared off the thread that appends. Nothing when appends are written.
    pub fn map_ahead(&mut self) -> io::Result<()> {
        if self.mode == AppendMode::Mapped {
            self.ensure_window(0)?;
        }
        Ok(())
    }

    /// Makes sure the window holds `more` bytes after the data; where the kernel refuses
    /// the map, appends are written from then on.
    fn ensure_window(&mut self, more: usize) -> io::Result<()> {
        if self.window_holds(more) {
            return Ok(());
        }
        if let Err(error) = self.move_window(more) {
            match error.raw_os_error() {
                // No map here after all: every append from now on is written.
                Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) | Some(libc::EINVAL) => {
                    self.unmap();
                    self.mode = AppendMode::Written(format!("no map: {error}"));
                }
                _ => return Err(error),
            }
        }
        Ok(())
    }

    fn window_holds(&self, more: usize) -> bool {
        self.window.as_ref().is_some_and(|w| {
            self.len >= w.start && self.len + more as u64 <= w.start + w.len as u64
        })
    }

    /// Maps a window that starts at the page of the data's end and holds `more` bytes
    /// after it, allocating the file's space first.
    fn move_window(&mut self, more: usize) -> io::Result<()> {
        self.unmap();
        let start = self.len / self.page * self.page;
        let needed = (self.len - start) as usize + more;
        let len = needed.max(self.window_bytes).div_ceil(self.page as usize) * self.page as usize;
        let end = start + len as u64;
        if end > self.allocated {
            nix::fcntl::fallocate(
                &self.file,
                nix::fcntl::FallocateFlags::empty(),
                self.allocated as libc::off_t,
                (end - self.allocated) as libc::off_t,
            )
            .map_err(io::Error::from)?;
            self.allocated = end;
        }
        // SAFETY: a shared map of `len` bytes of the file from `start` (page aligned), all
        // of it within the file's allocated size; unmapped in `unmap` before the file is
        // cut.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.file.as_raw_fd(),
                start as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Fault the window's pages in now, in one call, rather than one fault per page
        // during appends (Linux 5.14 and later; older kernels refuse, and appends fault).
        // Not the first window unless asked: a daemon that has just started writes a few
        // entries.
        if self.windows > 0 || self.fault_in_first {
            // SAFETY: the range is the map just made.
            unsafe {
                libc::madvise(ptr, len, libc::MADV_POPULATE_WRITE);
            }
        }
        self.windows += 1;
        self.window = Some(Window {
            ptr: NonNull::new(ptr.cast()).expect("mmap does not return null on success"),
            start,
            len,
        });
        Ok(())
    }

    fn unmap(&mut self) {
        if let Some(window) = self.window.take() {
            // SAFETY: the map made in `move_window`, not used after this.
            unsafe {
                libc::munmap(window.ptr.as_ptr().cast(), window.len);
            }
        }
    }

    /// Cuts the data back to its first `len` bytes (undoing appends that must not stand);
    /// the space after them is NUL again.
    pub fn cut_to(&mut self, len: u64) -> io::Result<()> {
        if len >= self.len {
            return Ok(());
        }
        self.unmap();
        self.file.set_len(len)?;
        self.len = len;
        self.allocated = len;
        Ok(())
    }

    /// Drops the map and cuts the file to its data (closing a segment, stopping).
    pub fn finish(&mut self) -> io::Result<()> {
        self.unmap();
        if self.allocated != self.len {
            self.file.set_len(self.len)?;
            self.allocated = self.len;
        }
        Ok(())
    }
}

impl Drop for MappedAppender {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Where the data of a file's `bytes` ends: at its first NUL byte (no journal line holds
/// one: canonical JSON escapes it), or at its end. The second value says whether anything
/// but NUL follows that point (which no appender leaves: damage).
pub fn data_end(bytes: &[u8]) -> (usize, bool) {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => (end, bytes[end..].iter().any(|&b| b != 0)),
        None => (bytes.len(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn open_rw(path: &std::path::Path) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap()
    }

    fn lines(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                format!("{{\"seq\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i * 37 % 900)).into_bytes()
            })
            .collect()
    }

    #[test]
    fn appends_cross_windows_and_the_file_is_its_data_once_finished() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [AppendMode::Mapped, AppendMode::Written("test".into())] {
            let path = dir
                .path()
                .join(format!("seg-{}", mode == AppendMode::Mapped));
            let mut file = MappedAppender::with(open_rw(&path), 0, mode.clone(), 8192).unwrap();
            let mut expected = Vec::new();
            for line in lines(200) {
                file.append(&line).unwrap();
                expected.extend_from_slice(&line);
            }
            // One append larger than a window.
            let big = vec![b'y'; 20_000];
            file.append(&big).unwrap();
            expected.extend_from_slice(&big);
            assert_eq!(file.len(), expected.len() as u64);
            assert_eq!(file.mode(), &mode);

            // Read while it is open: the data, then (mapped) the NUL reserve.
            let seen = std::fs::read(&path).unwrap();
            let (end, damaged) = data_end(&seen);
            assert_eq!(&seen[..end], &expected[..], "{mode:?}");
            assert!(!damaged);
            if mode == AppendMode::Mapped {
                assert!(seen.len() > expected.len(), "a reserve is allocated ahead");
            }

            file.finish().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), expected, "{mode:?}");
        }
    }

    #[test]
    fn a_file_left_without_finishing_ends_in_nul_bytes_and_goes_on_from_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let first = lines(30).concat();
        {
            let mut file =
                MappedAppender::with(open_rw(&path), 0, AppendMode::Mapped, 4096).unwrap();
            file.append(&first).unwrap();
            // A crash: the map and the reserve stay as they are.
            std::mem::forget(file);
        }
        let seen = std::fs::read(&path).unwrap();
        let (end, damaged) = data_end(&seen);
        assert_eq!(end, first.len());
        assert!(!damaged);
        assert!(seen.len() > end);

        // The next start appends after the data, over the reserve.
        let mut file =
            MappedAppender::with(open_rw(&path), end as u64, AppendMode::Mapped, 4096).unwrap();
        file.append(b"{\"seq\":30}\n").unwrap();
        file.finish().unwrap();
        let mut expected = first.clone();
        expected.extend_from_slice(b"{\"seq\":30}\n");
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn a_cut_undoes_appends_and_the_next_ones_follow_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let mut file = MappedAppender::with(open_rw(&path), 0, AppendMode::Mapped, 4096).unwrap();
        file.append(b"kept\n").unwrap();
        file.append(b"undone\n").unwrap();
        file.cut_to(5).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"kept\n");
        file.append(b"next\n").unwrap();
        file.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"kept\nnext\n");
    }

    #[test]
    fn the_data_ends_at_the_first_nul_and_bytes_after_it_are_damage() {
        assert_eq!(data_end(b"a\nb\n"), (4, false));
        assert_eq!(data_end(b"a\nb\n\0\0\0"), (4, false));
        assert_eq!(data_end(b"a\nb\0\0"), (3, false));
        assert_eq!(data_end(b"a\n\0\0b\n"), (2, true));
        assert_eq!(data_end(b""), (0, false));
    }
}
