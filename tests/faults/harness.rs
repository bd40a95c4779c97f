//! What both fault tests share: a `wrangler dev` of their own (started in its own process group on
//! a `--persist-to` directory, killed abruptly, restarted on the same state), an HTTP client that
//! reports transport errors instead of panicking, and read-only access to the Worker's local D1
//! (the SQLite file under the state directory, opened read-only: no request to the Worker).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root (the Worker's package).
pub fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

/// A fresh directory for one test's state and logs, under `SEMA_FAULTS_DIR` (scripts/test passes
/// one inside its work directory) or the system's temporary directory.
pub fn work_dir(name: &str) -> PathBuf {
    let base = std::env::var("SEMA_FAULTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join("sema-faults"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = base.join(format!("{name}-{nanos:x}"));
    std::fs::create_dir_all(&dir).expect("work dir");
    dir
}

/// A port for a Worker this harness starts, from the scripts' one picker (scripts/lib/free_port.py):
/// outside the kernel's ephemeral range, so no socket of another Worker takes it before ours binds,
/// and held from the scripts' other picks.
fn free_port() -> u16 {
    let out = Command::new("python3")
        .arg(Path::new(root()).join("scripts/lib/free_port.py"))
        .output()
        .expect("run scripts/lib/free_port.py");
    assert!(out.status.success(), "free_port.py: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a port number")
}

/// Applies the D1 migrations to a fresh state directory.
pub fn migrate(state: &Path) {
    let out = Command::new("npx")
        .current_dir(root())
        .args(["wrangler", "d1", "migrations", "apply", "DB", "--local"])
        .arg("--persist-to")
        .arg(state)
        .output()
        .expect("npx wrangler d1 migrations apply");
    assert!(
        out.status.success(),
        "migrations: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One `wrangler dev` (local workerd) in a process group of its own, logging to `log`.
pub struct Wrangler {
    child: Child,
    /// False once its group was killed (a process group id is never signalled twice: it may be reused).
    alive: bool,
    pub url: String,
    pub log: PathBuf,
}

impl Wrangler {
    /// Starts on `state` with `vars` (`NAME:value`) and waits until `/health` answers. A start
    /// that exits first (wrangler dev sometimes finds one of its own sockets still taken right
    /// after a kill) is tried again on a fresh port.
    pub fn start(state: &Path, log: PathBuf, vars: &[String]) -> Self {
        for attempt in 1..=4 {
            if let Some(w) = Self::try_start(state, &log, vars) {
                return w;
            }
            eprintln!(
                "wrangler dev exited before it was healthy (attempt {attempt}); starting again"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        panic!(
            "wrangler dev did not become healthy; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    fn try_start(state: &Path, log: &Path, vars: &[String]) -> Option<Self> {
        let port = free_port();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let mut cmd = Command::new("npx");
        cmd.current_dir(root())
            .env("SEMA_SKIP_BUILD", "1")
            .args([
                "wrangler",
                "dev",
                "-c",
                "wrangler.toml",
                "-c",
                "static/wrangler.toml",
            ])
            .args(["--local", "--ip", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .arg("--persist-to")
            .arg(state)
            .args(["--test-scheduled", "--show-interactive-dev-session=false"]);
        for v in vars {
            cmd.args(["--var", v]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("npx wrangler dev");
        let mut w = Self {
            child,
            alive: true,
            url: format!("http://127.0.0.1:{port}"),
            log: log.to_owned(),
        };
        let api = Api::new(&w.url);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(90) {
            if api.get("/health").is_ok_and(|r| r.status == 200) {
                return Some(w);
            }
            if let Ok(Some(_)) = w.child.try_wait() {
                // Its group may still hold workerd processes: end them before trying again.
                w.kill_group();
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        w.kill_group();
        None
    }

    fn kill_group(&mut self) {
        if !std::mem::replace(&mut self.alive, false) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }

    pub fn api(&self) -> Api {
        Api::new(&self.url)
    }

    /// The user Worker's own workerd socket (Miniflare's entry, without wrangler's proxy in front:
    /// about twice the requests a second on this machine), found among the listening sockets of
    /// this start's processes by its `/health` answer; the proxy's URL when none answers.
    pub fn direct_url(&self) -> String {
        let group = self.child.id().to_string();
        let ps = Command::new("ps")
            .args(["-eo", "pid=,pgid="])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let pids: Vec<String> = ps
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (pid, pgid) = (f.next()?, f.next()?);
                (pgid == group).then(|| format!("pid={pid},"))
            })
            .collect();
        let ss = Command::new("ss")
            .args(["-ltnpH"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let ports = ss
            .lines()
            .filter(|l| pids.iter().any(|p| l.contains(p.as_str())))
            .filter_map(|l| {
                l.split_whitespace()
                    .nth(3)?
                    .strip_prefix("127.0.0.1:")
                    .map(str::to_owned)
            });
        for port in ports {
            let url = format!("http://127.0.0.1:{port}");
            if url == self.url {
                continue;
            }
            let probe = ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(2))
                .build()
                .get(&format!("{url}/health"))
                .call()
                .ok()
                .and_then(|r| r.into_string().ok());
            if probe.is_some_and(|b| b.contains("sema-edge")) {
                return url;
            }
        }
        self.url.clone()
    }

    /// Waits until the log has a line containing `marker` (false after `within`).
    pub fn wait_for_log(&self, marker: &str, within: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(f) = std::fs::File::open(&self.log) {
                if BufReader::new(f)
                    .lines()
                    .map_while(Result::ok)
                    .any(|l| l.contains(marker))
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// SIGKILL of the whole process group (wrangler, its workerd processes), then reaped: the
    /// runtime stops mid-step, with nothing flushed or shut down.
    pub fn kill(mut self) {
        self.kill_group();
        // workerd's children are gone with the group; give the kernel a moment to free the ports.
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Wrangler {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A response, fully read.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A local-mode client (`X-Sema-Principal` / `X-Sema-Role`), anonymous client role by default.
#[derive(Clone)]
pub struct Api {
    agent: ureq::Agent,
    base: String,
    role: Option<&'static str>,
}

impl Api {
    pub fn new(base: &str) -> Self {
        Self {
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(60))
                .build(),
            base: base.to_owned(),
            role: None,
        }
    }

    pub fn as_role(&self, role: &'static str) -> Self {
        Self {
            role: Some(role),
            ..self.clone()
        }
    }

    /// Sends a request; `Err` only for a transport failure (a killed runtime).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<Resp, String> {
        let mut req = self
            .agent
            .request(method, &format!("{}{}", self.base, path));
        if let Some(r) = self.role {
            req = req.set("X-Sema-Role", r);
        }
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = match body {
            Some(b) => req
                .set("Content-Type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(format!("{method} {path}: {e}")),
        };
        let status = resp.status();
        let body = resp.into_string().map_err(|e| e.to_string())?;
        Ok(Resp { status, body })
    }

    pub fn get(&self, path: &str) -> Result<Resp, String> {
        self.send("GET", path, None, &[])
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Resp, String> {
        self.send("POST", path, Some(body), &[])
    }

    /// A call that must reach the Worker.
    #[track_caller]
    pub fn must(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        self.send(method, path, body, &[])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// One cron tick (wrangler dev's scheduled test route; wrangler.toml's one cron expression).
    #[track_caller]
    pub fn cron(&self) {
        let r = self.must("GET", "/__scheduled?cron=*+*+*+*+*", None);
        assert_eq!(r.status, 200, "scheduled route: {}", r.body);
    }

    /// The claim the session's object holds (`GET /v1/admin/sessions/{id}`, operator).
    #[track_caller]
    pub fn object_claim(&self, session: &str) -> Option<String> {
        let r =
            self.as_role("operator")
                .must("GET", &format!("/v1/admin/sessions/{session}"), None);
        assert_eq!(r.status, 200, "admin session: {}", r.body);
        r.json()["claimTaskId"].as_str().map(str::to_owned)
    }
}

/// The Worker's local D1 database file under a `--persist-to` directory.
pub fn d1_file(state: &Path) -> PathBuf {
    let dir = state.join("v3/d1/miniflare-D1DatabaseObject");
    std::fs::read_dir(&dir)
        .expect("local D1 directory")
        .map_while(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "sqlite")
                && p.file_name().is_some_and(|n| n != "metadata.sqlite")
        })
        .expect("the local D1 database file")
}

/// A read-only connection to the local D1 (SQLite in WAL mode: readers never block its writer).
pub fn d1_reader(state: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open_with_flags(
        d1_file(state),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open local D1 read-only");
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c
}

/// A std-only generator (splitmix64): explicit seeds, so a failure's printed seed replays its
/// choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The seed of a randomised test: `SEMA_TEST_SEED` (decimal or `0x` hex) replays a failure, else
/// the clock. Printed, so a failing run's output names it.
pub fn test_seed() -> u64 {
    let seed = match std::env::var("SEMA_TEST_SEED") {
        Ok(v) => {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            }
            .unwrap_or_else(|e| panic!("SEMA_TEST_SEED={v:?} is not a u64: {e}"))
        }
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("seed {seed} (replay with SEMA_TEST_SEED={seed})");
    seed
}
