//! The operator console's static assets: which paths serve which file, with which content type, and
//! the headers every asset is answered with. The files live in `src/console/`; they are served as
//! static files ([`crate::static_file`]), not from the Worker's module. They hold no data (everything they show comes from the API with the operator's token,
//! kept in the page's memory), so they are served without authentication.

/// One file of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleAsset {
    /// `GET /console`: the page.
    Page,
    /// `GET /console/console.js`.
    Script,
    /// `GET /console/console.css`.
    Style,
}

/// Content-Security-Policy of every console answer: scripts, styles and connections from this origin
/// only (no inline script or style, no CDN), no plugins, never framed, forms post nowhere.
pub const CSP: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

impl ConsoleAsset {
    /// The asset at the path segments after `console` (none: the page).
    pub fn at(rest: &[&str]) -> Option<Self> {
        match rest {
            [] => Some(Self::Page),
            ["console.js"] => Some(Self::Script),
            ["console.css"] => Some(Self::Style),
            _ => None,
        }
    }

    /// The asset's file in the Worker's static files ([`crate::static_file`]).
    pub fn file(self) -> &'static str {
        match self {
            Self::Page => "/console/index.html",
            Self::Script => "/console/console.js",
            Self::Style => "/console/console.css",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Page => "text/html; charset=utf-8",
            Self::Script => "text/javascript; charset=utf-8",
            Self::Style => "text/css; charset=utf-8",
        }
    }

    /// Every header of the answer (besides the body's content type): nothing may be cached, nor
    /// sniffed as another type, nor framed, nor leak the page's address.
    pub fn headers(self) -> [(&'static str, &'static str); 7] {
        [
            ("content-type", self.content_type()),
            ("content-security-policy", CSP),
            ("cache-control", "no-store"),
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "DENY"),
            ("referrer-policy", "no-referrer"),
            ("cross-origin-opener-policy", "same-origin"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_two_assets_are_the_only_console_paths() {
        assert_eq!(ConsoleAsset::at(&[]), Some(ConsoleAsset::Page));
        assert_eq!(
            ConsoleAsset::at(&["console.js"]),
            Some(ConsoleAsset::Script)
        );
        assert_eq!(
            ConsoleAsset::at(&["console.css"]),
            Some(ConsoleAsset::Style)
        );
        assert_eq!(ConsoleAsset::at(&["index.html"]), None);
        assert_eq!(ConsoleAsset::at(&["console.js", "x"]), None);
    }

    #[test]
    fn every_asset_is_uncacheable_unsniffable_unframable_and_allows_only_its_own_origin() {
        for a in [
            ConsoleAsset::Page,
            ConsoleAsset::Script,
            ConsoleAsset::Style,
        ] {
            let h = a.headers();
            let get = |k: &str| h.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
            assert_eq!(get("cache-control"), Some("no-store"));
            assert_eq!(get("x-content-type-options"), Some("nosniff"));
            let csp = get("content-security-policy").unwrap();
            assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"));
            assert!(!csp.contains("unsafe") && !csp.contains("http"));
        }
    }
}
