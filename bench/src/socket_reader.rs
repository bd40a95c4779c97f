//! A runner's WebSocket read on a thread of its own, for the hand-over scenarios (ours and the
//! floors'): a lease frame is timed the moment it arrives, even while the submit that caused it is
//! still waiting for its answer (as a long-poll's lease is timed on the poll's own thread).
//!
//! Per round: [`SocketReader::ready`] has the thread send the ready frame (and, for a floor socket,
//! read its `waiting` answer, [`SocketReader::waiting`]), then read until a lease frame, which
//! [`SocketReader::lease`] returns with its arrival time. Bounded: every wait has a deadline; a
//! round that failed (the socket closed, or a frame not read in time) ends the reader, and the
//! scenario with it. Dropping the reader between rounds closes the socket with a close frame;
//! dropping it with a round in flight shuts the socket down, ending the read.

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
    /// The socket's TCP stream, shut down on drop while a round is in flight, so a thread
    /// blocked in a read ends at once.
    tcp: Option<TcpStream>,
    /// A round was asked for and its lease not yet returned.
    in_flight: std::cell::Cell<bool>,
}

impl SocketReader {
    /// Moves `ws` onto a reader thread.
    pub fn start(mut ws: WebSocket<TcpStream>, frames: Frames) -> Self {
        let tcp = ws.get_ref().try_clone().ok();
        let (go, rounds) = mpsc::channel::<()>();
        let (tx, got) = mpsc::channel::<Read>();
        let thread = std::thread::spawn(move || {
            while rounds.recv().is_ok() {
                if let Err(e) = round(&mut ws, frames, &tx) {
                    let _ = tx.send(Err(e));
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
            in_flight: std::cell::Cell::new(false),
        }
    }

    /// Has the runner say it wants a run (its socket then waits for the lease frame).
    pub fn ready(&self) -> Result<(), String> {
        self.in_flight.set(true);
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
        let read = self.next(deadline);
        self.in_flight.set(read.is_err());
        read
    }

    fn next(&self, deadline: Duration) -> Read {
        self.got
            .recv_timeout(deadline)
            .map_err(|e| format!("no frame: {e}"))?
    }
}

impl Drop for SocketReader {
    fn drop(&mut self) {
        // Closing the rounds' channel ends the thread between rounds (it closes the socket);
        // shutting the stream down ends a read in progress.
        self.go.take();
        if let Some(tcp) = self.tcp.take().filter(|_| self.in_flight.get()) {
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One round on the thread: the ready frame sent, the floor's `waiting` read and passed on, then
/// the lease frame read and passed on (an error ends the thread).
fn round(
    ws: &mut WebSocket<TcpStream>,
    frames: Frames,
    tx: &mpsc::Sender<Read>,
) -> Result<(), String> {
    ws.send(Message::text(frames.ready))
        .map_err(|e| e.to_string())?;
    if let Some(waiting) = frames.waiting {
        let read = read_until(ws, waiting)?;
        tx.send(Ok(read)).map_err(|e| e.to_string())?;
    }
    let read = read_until(ws, frames.lease)?;
    tx.send(Ok(read)).map_err(|e| e.to_string())
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
