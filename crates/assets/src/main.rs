//! `sema-assets OUT_DIR CONSOLE_DIR ESBUILD`: writes the Worker's static files into `OUT_DIR`
//! (`scripts/build` runs it into `build/assets`, the directory the static Worker serves:
//! `static/wrangler.toml`).
//! One file per static route, at the path `sema_core::static_file` gives it:
//! - the OpenAPI document as served (`sema_core::openapi::DOCUMENT`: the file, compact);
//! - the docs page, rendered from it (`sema_core::openapi::docs_page`), so the Worker carries
//!   neither the document nor the renderer;
//! - the console's page as written, and its script and style sheet minified by `ESBUILD` (they
//!   keep their meaning and lose their comments and indentation).
//!
//! Only these files are ever served: the static Worker has no address of its own, and the API
//! Worker reads it at its routes' files alone.

use sema_core::{console::ConsoleAsset, openapi, route::Route, static_file};
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [out, console, esbuild] = args.as_slice() else {
        eprintln!("usage: sema-assets OUT_DIR CONSOLE_DIR ESBUILD");
        return ExitCode::from(2);
    };
    match write_all(out, console, esbuild) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sema-assets: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write_all(out: &Path, console: &Path, esbuild: &Path) -> Result<(), String> {
    for route in static_file::ROUTES {
        let Some(file) = static_file::StaticFile::of(&route) else {
            return Err(format!("{route:?} has no static file"));
        };
        let target = out.join(file.file.trim_start_matches('/'));
        if let Some(dir) = target.parent() {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        match route {
            Route::OpenApi => write(&target, openapi::DOCUMENT)?,
            Route::Docs => write(&target, &openapi::docs_page(openapi::DOCUMENT))?,
            Route::Console(ConsoleAsset::Page) => {
                let page = console.join("index.html");
                let text =
                    fs::read_to_string(&page).map_err(|e| format!("{}: {e}", page.display()))?;
                write(&target, &text)?;
            }
            Route::Console(asset) => minify(esbuild, &console.join(asset_name(asset)), &target)?,
            other => return Err(format!("{other:?} is not a static route")),
        }
    }
    Ok(())
}

/// The source file of a console asset: its served file's name.
fn asset_name(asset: ConsoleAsset) -> &'static str {
    asset.file().rsplit('/').next().unwrap_or_default()
}

/// `target` afresh, whole: written beside it and renamed over it, so a static Worker serving the
/// directory meanwhile (`scripts/dev` rebuilds while it runs) reads the old file or the new one.
fn write(target: &Path, text: &str) -> Result<(), String> {
    let fresh = fresh_path(target);
    fs::write(&fresh, text).map_err(|e| format!("{}: {e}", fresh.display()))?;
    replace(&fresh, target)
}

fn fresh_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".fresh");
    target.with_file_name(name)
}

fn replace(fresh: &Path, target: &Path) -> Result<(), String> {
    fs::rename(fresh, target)
        .map_err(|e| format!("{} → {}: {e}", fresh.display(), target.display()))
}

fn minify(esbuild: &Path, source: &Path, target: &Path) -> Result<(), String> {
    let fresh = fresh_path(target);
    let status = Command::new(esbuild)
        .arg(source)
        .args(["--minify", "--log-level=warning"])
        .arg(format!("--outfile={}", fresh.display()))
        .status();
    match status {
        Ok(s) if s.success() => replace(&fresh, target),
        other => Err(format!(
            "esbuild ({}) could not minify {}: {other:?}; run scripts/setup",
            esbuild.display(),
            source.display()
        )),
    }
}
