//! Standard output for the binaries: a reader that goes away (`mlagents-run check ... | head`)
//! ends what is shown, quietly, as other command-line tools do. Rust ignores SIGPIPE, so
//! `println!` to a closed pipe panics with a backtrace; these writes do not.

use std::io::Write;

/// Writes `text` to standard output and flushes it. A closed pipe is not an error (nothing
/// more can be shown, and the command's own outcome stands); other write errors are.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// [`write_stdout`] of one line.
pub fn write_stdout_line(line: &str) -> std::io::Result<()> {
    write_stdout(&format!("{line}\n"))
}
