//! The public static files: the OpenAPI document, its docs page, and the operator console's page,
//! script and style sheet. None is in the Worker's module. `sema-assets` (`crates/assets`, run by
//! `scripts/build`) writes them at build time into `build/assets`, which a Worker of their own serves
//! from the platform's asset store (`static/wrangler.toml`); the API Worker routes every request
//! and answers each of these routes with its file, read through its `STATIC` service binding, under
//! the headers said here.
//! Each file is the same for every caller and holds nothing of any principal's, so all are public.

use crate::{console::ConsoleAsset, openapi, route::Route};

/// A static route's file and the headers it is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticFile {
    /// The file's path in the asset directory (from its root, with a leading `/`).
    pub file: &'static str,
    /// Every header of the answer, content type included.
    pub headers: Vec<(&'static str, &'static str)>,
}

/// The routes answered with a static file, each once.
pub const ROUTES: [Route; 5] = [
    Route::OpenApi,
    Route::Docs,
    Route::Console(ConsoleAsset::Page),
    Route::Console(ConsoleAsset::Script),
    Route::Console(ConsoleAsset::Style),
];

impl StaticFile {
    /// The file answering `route`; `None` for every route a handler answers.
    pub fn of(route: &Route) -> Option<Self> {
        let public = |content_type| {
            vec![
                ("content-type", content_type),
                ("cache-control", openapi::CACHE_CONTROL),
                ("x-content-type-options", "nosniff"),
            ]
        };
        let (file, headers) = match route {
            Route::OpenApi => (
                openapi::DOCUMENT_FILE,
                public("application/json; charset=utf-8"),
            ),
            Route::Docs => {
                let mut headers = public("text/html; charset=utf-8");
                headers.push(("content-security-policy", openapi::DOCS_CSP));
                headers.push(("referrer-policy", "no-referrer"));
                (openapi::DOCS_FILE, headers)
            }
            Route::Console(asset) => (asset.file(), asset.headers().to_vec()),
            _ => return None,
        };
        Some(Self { file, headers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{match_route, Access};

    #[test]
    fn every_static_route_is_public_and_has_its_own_file() {
        let mut files = std::collections::BTreeSet::new();
        for route in ROUTES {
            assert_eq!(route.access(), Access::Public, "{route:?}");
            let f = StaticFile::of(&route).expect("a static route has a file");
            assert!(
                f.file.starts_with('/') && !f.file.ends_with('/'),
                "{}",
                f.file
            );
            assert!(files.insert(f.file), "{} twice", f.file);
            let names: Vec<_> = f.headers.iter().map(|(n, _)| *n).collect();
            for name in ["content-type", "cache-control", "x-content-type-options"] {
                assert_eq!(names.iter().filter(|n| **n == name).count(), 1, "{name}");
            }
        }
    }

    #[test]
    fn the_static_routes_are_exactly_the_ones_matched_at_their_paths() {
        for (path, want) in [
            ("/openapi.json", Some(openapi::DOCUMENT_FILE)),
            ("/docs", Some(openapi::DOCS_FILE)),
            ("/console", Some("/console/index.html")),
            ("/console/", Some("/console/index.html")),
            ("/console/console.js", Some("/console/console.js")),
            ("/console/console.css", Some("/console/console.css")),
            ("/health", None),
            ("/v1/runs", None),
        ] {
            let route = match_route("GET", path).unwrap();
            assert_eq!(StaticFile::of(&route).map(|f| f.file), want, "{path}");
            assert_eq!(want.is_some(), ROUTES.contains(&route), "{path}");
        }
    }
}
