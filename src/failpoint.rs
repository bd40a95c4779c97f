//! Test-only failpoints: named steps where a kill-anywhere test (tests/faults/kill.rs) stops the
//! runtime abruptly. Closed by default: nothing can arm one unless the deployment sets
//! `SEMA_TEST_FAILPOINTS`, which the repository's config never does (scripts/test checks that a
//! dry-run deploy carries no `SEMA_TEST_` binding). Its value is a comma-separated list: `header`
//! lets a request arm one failpoint for itself with `x-sema-failpoint: <name>` (forwarded to the
//! session object it calls); any other word is a name armed for every request, alarm and cron tick
//! (the cron has no request to carry a header).
//!
//! At an armed step the code logs `failpoint reached: <name>` and then waits forever (on a timer,
//! so the runtime never cancels it as a hung promise), holding whatever it holds (the session
//! object's lock included). The harness sees the line in the log and SIGKILLs the runtime while the
//! step is in flight. Off, a failpoint is one branch on a field read once per isolate.

use worker::Env;

/// The deployment var that enables failpoints.
pub const VAR: &str = "SEMA_TEST_FAILPOINTS";
/// The request header that arms one failpoint for a request (only with `header` in [`VAR`]).
pub const HEADER: &str = "x-sema-failpoint";

/// Most bytes of a failpoint name a request may arm (longer is ignored).
const NAME_MAX: usize = 64;

/// What [`VAR`] enables, read once per isolate (a deployment's vars never change under a live one).
#[derive(Debug, Clone, Default)]
struct Config {
    header: bool,
    armed: Vec<String>,
}

thread_local! {
    static CONFIG: std::cell::OnceCell<Config> = const { std::cell::OnceCell::new() };
}

fn config(env: &Env) -> Config {
    CONFIG.with(|c| {
        c.get_or_init(|| {
            let Ok(v) = env.var(VAR) else {
                return Config::default();
            };
            let mut config = Config::default();
            for word in v.to_string().split(',').map(str::trim) {
                match word {
                    "" => {}
                    "header" => config.header = true,
                    name => config.armed.push(name.to_owned()),
                }
            }
            config
        })
        .clone()
    })
}

/// Whether a request may arm a failpoint by [`HEADER`] (else the header is never read).
pub fn by_header(env: &Env) -> bool {
    config(env).header
}

/// The failpoints armed for one request (or alarm, or tick): `None` in every default deployment.
#[derive(Debug, Clone, Default)]
pub struct Armed(Option<Box<ArmedSet>>);

#[derive(Debug, Clone)]
struct ArmedSet {
    everywhere: Vec<String>,
    /// The one a request armed for itself (and the session object calls it makes).
    request: Option<String>,
}

impl Armed {
    /// What `env` arms for a call carrying `header` (the value of [`HEADER`], if any).
    pub fn from_env(env: &Env, header: Option<String>) -> Self {
        let c = config(env);
        if !c.header && c.armed.is_empty() {
            return Self(None);
        }
        let request = header.filter(|n| c.header && !n.is_empty() && n.len() <= NAME_MAX);
        Self(Some(Box::new(ArmedSet {
            everywhere: c.armed,
            request,
        })))
    }

    /// The name to forward to a session object as [`HEADER`] (a request-armed failpoint).
    pub fn forward(&self) -> Option<&str> {
        self.0.as_ref()?.request.as_deref()
    }

    /// A named step: returns at once unless `name` is armed; if it is, logs the marker and never
    /// returns.
    pub async fn hit(&self, name: &str) {
        let Some(set) = &self.0 else {
            return;
        };
        if set.request.as_deref() != Some(name) && !set.everywhere.iter().any(|a| a == name) {
            return;
        }
        worker::console_error!("failpoint reached: {name}");
        loop {
            worker::Delay::from(std::time::Duration::from_secs(1)).await;
        }
    }
}
