//! The `sema` CLI (`SEMA_CLI_BIN`) on the Worker with bearer tokens (`SEMA_TOKEN_URL`): the token
//! from `--token` or `SEMA_TOKEN` goes out as `Authorization: Bearer`, and the server's refusals
//! come back as exit 3 with their error code. (The CLI's run, stream and gate behaviour is tested
//! against the runner Worker, tests/runner/cli.rs.)

use crate::helpers::unique;
use crate::tokens::{ALICE, BOB, RUNNER};
use std::process::{Command, Output};

fn token_url() -> String {
    std::env::var("SEMA_TOKEN_URL").expect("SEMA_TOKEN_URL is not set: run through scripts/test")
}

/// `sema args...` against the tokens Worker, with `SEMA_TOKEN` set to `env_token` when given.
fn sema(env_token: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let bin =
        std::env::var("SEMA_CLI_BIN").expect("SEMA_CLI_BIN is not set: run through scripts/test");
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("SEMA_URL", token_url())
        .env_remove("SEMA_TOKEN")
        .env_remove("SEMA_PRINCIPAL");
    if let Some(t) = env_token {
        cmd.env("SEMA_TOKEN", t);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run sema");
    (
        status.code().expect("sema ended by a signal"),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

#[test]
fn the_cli_sends_its_token_as_a_bearer_and_another_principal_cannot_read_the_run() {
    let session = unique("cli-token");
    let (code, out, err) = sema(
        None,
        &["--token", ALICE, "submit", "-s", &session, "write a haiku"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let task = out.trim().to_owned();
    // The same principal through the environment variable reads it.
    let (code, out, err) = sema(Some(ALICE), &["--json", "get", &task]);
    assert_eq!(code, 0, "{out}{err}");
    let face: serde_json::Value = serde_json::from_str(&out).expect("--json get is JSON");
    assert_eq!(face["sessionId"], session.as_str());
    // Another client's token: the run is not there for it.
    let (code, _, err) = sema(Some(BOB), &["get", &task]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("(not_found)"), "{err}");
    // --token wins over SEMA_TOKEN; a runner credential may not use client routes.
    let (code, _, err) = sema(Some(ALICE), &["--token", RUNNER, "get", &task]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("(forbidden)"), "{err}");
    // No token at all: 401.
    let (code, _, err) = sema(None, &["get", &task]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("(unauthorized)"), "{err}");
    let (code, out, err) = sema(Some(ALICE), &["cancel", &task]);
    assert_eq!(
        (code, out.as_str()),
        (0, format!("run {task} cancelled\n").as_str()),
        "{err}"
    );
}
