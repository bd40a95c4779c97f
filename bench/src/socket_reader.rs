//! A runner's WebSocket read on a thread of its own, for the hand-over scenarios (ours and the
//! floors'). The lease frame is timed the moment it arrives: read after the submit's answer, as the
//! socket was before, it was timed at max(202, lease) — and the lease usually comes first, so that
//! figure was the submit's round trip, not the hand-over. The long-poll scenarios already time the
//! lease on the poll's own thread.
//!
//! Per round: [`SocketReader::ready`] has the thread send the ready frame (and, for a floor socket,
//! read its `waiting` answer, [`SocketReader::waiting`]), then read until a lease frame, which
//! [`SocketReader::lease`] returns with its arrival time. Bounded: every wait has a deadline, and
//! dropping the reader shuts the socket down, ending a read in progress; a round that failed (the
//! socket closed, or a frame not read in time) ends the reader, and the scenario with it.

use std::net::TcpStream;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// What the thread read: a frame's text and when it arrived, or why the socket stopped.
type Read = Result<(String, Instant), String>;

/// The frames of one kind of runner socket.
#[derive(Clone, Copy)]
pub(crate) struct Frames {
    /// Sent when the runner wants a run.
    pub ready: &'static str,
    /// The socket's answer to `ready` when it has one (the floor's `waiting`); ours has none.
    pub waiting: Option<fn(&str) -> bool>,
    /// Whether a frame is a lease.
    pub lease: fn(&str) -> bool,
}

pub(crate) struct SocketReader {
    go: Option<mpsc::Sender<()>>,
    got: mpsc::Receiver<Read>,
    thread: Option<JoinHandle<()>>,
    /// The socket's TCP stream, shut down on drop so a thread blocked in a read ends at once.
    tcp: Option<TcpStream>,
}

impl SocketReader {
    /// Moves `ws` onto a reader thread.
    pub fn start(mut ws: WebSocket<TcpStream>, frames: Frames) -> Self {
        let tcp = ws.get_ref().try_clone().ok();
        let (go, rounds) = mpsc::channel::<()>();
        let (tx, got) = mpsc::channel::<Read>();
        let thread = std::thread::spawn(move || {
            while rounds.recv().is_ok() {
                let read = round(&mut ws, frames, &tx);
                if read.is_err() {
                    let _ = tx.send(read);
                    break;
                }
            }
            let _ = ws.close(None);
            let _ = ws.flush();
        });
        Self {
            go: Some(go),
            got,
            thread: Some(thread),
            tcp,
        }
    }

    /// Has the runner say it wants a run (its socket then waits for the lease frame).
    pub fn ready(&self) -> Result<(), String> {
        self.go
            .as_ref()
            .and_then(|g| g.send(()).ok())
            .ok_or_else(|| "the socket's reader has stopped".to_owned())
    }

    /// The floor socket's `waiting` answer to the last ready.
    pub fn waiting(&self, deadline: Duration) -> Result<(), String> {
        self.next(deadline).map(|_| ())
    }

    /// The next lease frame and when it arrived.
    pub fn lease(&self, deadline: Duration) -> Read {
        self.next(deadline)
    }

    fn next(&self, deadline: Duration) -> Read {
        self.got
            .recv_timeout(deadline)
            .map_err(|e| format!("no frame: {e}"))?
    }
}

impl Drop for SocketReader {
    fn drop(&mut self) {
        // Closing the rounds' channel ends the thread between rounds; shutting the stream down
        // ends a read in progress.
        self.go.take();
        if let Some(tcp) = self.tcp.take() {
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One round on the thread: the ready frame sent, the floor's `waiting` read and passed on, then
/// the lease frame read; `Ok` once the lease was passed on (an error ends the thread).
fn round(ws: &mut WebSocket<TcpStream>, frames: Frames, tx: &mpsc::Sender<Read>) -> Read {
    ws.send(Message::text(frames.ready))
        .map_err(|e| e.to_string())?;
    if let Some(waiting) = frames.waiting {
        let read = read_until(ws, waiting)?;
        tx.send(Ok(read.clone())).map_err(|e| e.to_string())?;
    }
    let read = read_until(ws, frames.lease)?;
    tx.send(Ok(read.clone())).map_err(|e| e.to_string())?;
    Ok(read)
}

/// The next text frame that satisfies `want`, with its arrival time.
fn read_until(ws: &mut WebSocket<TcpStream>, want: fn(&str) -> bool) -> Read {
    loop {
        let frame = ws.read().map_err(|e| e.to_string())?;
        let at = Instant::now();
        match frame {
            Message::Text(t) if want(t.as_str()) => return Ok((t.as_str().to_owned(), at)),
            Message::Close(_) => return Err("closed".into()),
            _ => {}
        }
    }
}
