//! Where the daemon's log lines go: straight to stderr, except while the state machine handles a run of events, when they wait in that thread's buffer and reach stderr with one `write(2)` after the run (a drive logs a few lines at info, and a `write(2)` each cost more than the rest of its logging).

use std::cell::{Cell, RefCell};
use std::io::Write;

/// Bytes the buffer may hold before it is written out in the middle of a run.
const MOST_BUFFERED: usize = 64 * 1024;

thread_local! {
    /// Whether this thread is inside a run of events (lines wait in `PENDING`).
    static IN_RUN: Cell<bool> = const { Cell::new(false) };
    static PENDING: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The `tracing_subscriber` writer: each call gets one formatted line.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogLines;

/// One line's way out: into the run's buffer, or to stderr.
pub struct LogLine;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogLines {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine
    }
}

impl Write for LogLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if !IN_RUN.with(Cell::get) {
            return std::io::stderr().write(bytes);
        }
        let full = PENDING.with_borrow_mut(|pending| {
            pending.extend_from_slice(bytes);
            pending.len() >= MOST_BUFFERED
        });
        if full {
            write_pending();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lines logged on this thread from now on wait until [`end_run`].
pub fn begin_run() {
    IN_RUN.with(|run| run.set(true));
}

/// Writes the lines this thread's run logged (one `write(2)`), and logs straight again.
pub fn end_run() {
    IN_RUN.with(|run| run.set(false));
    write_pending();
}

fn write_pending() {
    PENDING.with_borrow_mut(|pending| {
        if !pending.is_empty() {
            let _ = std::io::stderr().write_all(pending);
            pending.clear();
            if pending.capacity() > MOST_BUFFERED {
                pending.shrink_to(MOST_BUFFERED);
            }
        }
    });
}

/// Writes what waits before a panic's own message (installed once by the daemon).
pub fn install_panic_flush() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        write_pending();
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_during_a_run_and_go_out_in_order_after_it() {
        begin_run();
        LogLine.write_all(b"first\n").unwrap();
        LogLine.write_all(b"second\n").unwrap();
        let waiting = PENDING.with_borrow(|p| p.clone());
        assert_eq!(waiting, b"first\nsecond\n");
        end_run();
        assert!(PENDING.with_borrow(|p| p.is_empty()));
        assert!(
            !IN_RUN.with(Cell::get),
            "lines after the run go straight out"
        );
    }
}
