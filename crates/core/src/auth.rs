//! Principals and roles, and how a deployment identifies its callers ([`Auth`]).
//!
//! Closed by default. With tokens configured (`SEMA_TOKENS`: a JSON object mapping
//! sha256-hex(token) to `{"principal", "role"}`), every request must carry
//! `Authorization: Bearer <token>`. Only a deployment that says so explicitly (`SEMA_AUTH = "local"`,
//! as `scripts/dev` and the test Workers do) trusts self-declared identities: the principal in
//! `X-Sema-Principal` (absent = anonymous) and the role in `X-Sema-Role` (absent = `client`). Anything
//! else — no table, an empty one, `{}`, one that does not parse, an unknown `SEMA_AUTH` — is a closed
//! deployment: every route but `/health` answers 503 saying what to configure.

use crate::{error::ApiError, json::Quoted, text_map::TextMap};
use serde::{Deserialize, Serialize};

/// Longest principal accepted (the width of the `owner` columns).
pub const PRINCIPAL_MAX: usize = 190;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Runner,
    Operator,
}

crate::tree_enum!(Role { Client = "client", Runner = "runner", Operator = "operator" });

impl Role {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "client" => Some(Self::Client),
            "runner" => Some(Self::Runner),
            "operator" => Some(Self::Operator),
            _ => None,
        }
    }
}

/// Who is calling. `id == None` is the anonymous principal; ownership compares ids null-safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub id: Option<String>,
    pub role: Role,
}

impl Principal {
    /// Whether this principal may see and act on a thing owned by `owner`: the owner itself (null-safe
    /// equality: anonymous matches only anonymous) or an operator.
    pub fn may_access(&self, owner: Option<&str>) -> bool {
        self.role == Role::Operator || self.owns(owner)
    }

    /// Whether this principal owns a thing owned by `owner` (null-safe; operators included only for
    /// their own things): what acting *in* a run, rather than overseeing it, requires.
    pub fn owns(&self, owner: Option<&str>) -> bool {
        self.id.as_deref() == owner
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    principal: String,
    role: Role,
}

/// The configured token table, keyed by lowercase sha256 hex of the token.
#[derive(Debug, Clone, Default)]
pub struct TokenTable {
    entries: TextMap<TokenEntry>,
}

crate::tree_struct!(TokenEntry strict { principal: "principal", role: "role" });

/// The first key written twice in one object of `text` (JSON that parsed), compared as decoded (a
/// key with an escape is decoded before it is compared). A tree keeps the last of repeated keys;
/// a credential table must not keep either silently.
fn repeated_key(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // One entry per open container: the keys of an object so far, or `None` for an array.
    let mut open: Vec<Option<Vec<std::borrow::Cow<'_, str>>>> = Vec::new();
    let mut key_next = false;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'{' => {
                open.push(Some(Vec::new()));
                key_next = true;
            }
            b'[' => {
                open.push(None);
                key_next = false;
            }
            b'}' | b']' => {
                open.pop();
                key_next = false;
            }
            b',' => key_next = matches!(open.last(), Some(Some(_))),
            b'"' => {
                let start = i + 1;
                i += 1;
                while let Some(&c) = b.get(i) {
                    match c {
                        b'"' => break,
                        b'\\' => i += 2,
                        _ => i += 1,
                    }
                }
                if key_next {
                    key_next = false;
                    let raw = text.get(start..i)?;
                    let key = if raw.contains('\\') {
                        // Quotes included: the key as JSON text, decoded.
                        std::borrow::Cow::Owned(
                            crate::json::parse(text.get(start - 1..=i)?)
                                .ok()?
                                .as_str()?
                                .to_owned(),
                        )
                    } else {
                        std::borrow::Cow::Borrowed(raw)
                    };
                    if let Some(Some(keys)) = open.last_mut() {
                        if keys.contains(&key) {
                            return Some(key.into_owned());
                        }
                        keys.push(key);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl TokenTable {
    /// Parses the `SEMA_TOKENS` JSON. An empty or absent value means "no tokens" (local mode).
    pub fn parse(json: Option<&str>) -> Result<Self, String> {
        let Some(text) = json.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Self::default());
        };
        let invalid = |e: &dyn std::fmt::Display| format!("SEMA_TOKENS is not valid: {e}");
        let tree: crate::json::Value = crate::json::parse(text).map_err(|e| invalid(&e))?;
        if let Some(key) = repeated_key(text) {
            return Err(invalid(&format_args!(
                "`{key}` is written twice in one object"
            )));
        }
        let written = crate::json::object(&tree, "an object mapping token digests to entries")
            .map_err(|e| invalid(&e))?;
        let mut entries = TextMap::new();
        for (hash, entry) in written {
            let entry: TokenEntry =
                crate::json::FromTree::from_tree(entry).map_err(|e| invalid(&e))?;
            let hash = hash.to_ascii_lowercase();
            if hash.len() != 64 || crate::hex::decode(&hash).is_none() {
                return Err("SEMA_TOKENS keys must be sha256 hex digests of the tokens".into());
            }
            if !valid_principal(&entry.principal) {
                return Err(format!(
                    "SEMA_TOKENS principal {} is not valid",
                    Quoted(&entry.principal)
                ));
            }
            entries.insert(hash, entry);
        }
        Ok(Self { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The principal of a bearer token (`Authorization: Bearer <token>`, the scheme in any case).
    pub fn resolve(&self, authorization: Option<&str>) -> Result<Principal, ApiError> {
        let token = authorization
            .map(str::trim_start)
            .filter(|h| {
                h.get(..7)
                    .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
            })
            .map(|h| h[7..].trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("a bearer token is required (Authorization: Bearer <token>)")
            })?;
        let entry = self
            .entries
            .get(&crate::hex::sha256(token.as_bytes()))
            .ok_or_else(|| ApiError::unauthorized("the bearer token is not recognised"))?;
        Ok(Principal {
            id: Some(entry.principal.clone()),
            role: entry.role,
        })
    }
}

/// How a deployment identifies its callers, decided once from its configuration.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `SEMA_AUTH = "local"`: self-declared identities (development and tests only).
    Local,
    /// Bearer tokens from a table with at least one entry.
    Tokens(TokenTable),
    /// Nothing usable is configured: every route but `/health` is refused, saying why.
    Closed { reason: String },
}

/// The refusal of a closed deployment: what is wrong, and what to configure.
pub fn not_configured(reason: &str) -> ApiError {
    ApiError::new(
        crate::error::ErrorCode::AuthNotConfigured,
        format!(
            "this deployment accepts no requests: {reason}. Set SEMA_TOKENS (a secret: a JSON object \
             mapping the sha256 hex of each bearer token to {{\"principal\", \"role\"}}), or \
             SEMA_AUTH = \"local\" for local development only"
        ),
    )
}

impl Auth {
    /// From `SEMA_AUTH` and `SEMA_TOKENS` (the table's JSON text; a TOML table arrives as its JSON).
    /// Tokens win when both are usable: a table is never ignored in favour of trusting headers.
    pub fn configure(mode: Option<&str>, tokens: Option<&str>) -> Self {
        let tokens = tokens.map(str::trim).filter(|t| !t.is_empty());
        let table = tokens.map(|t| TokenTable::parse(Some(t)));
        match (mode.map(str::trim), table) {
            (_, Some(Ok(table))) if !table.is_empty() => Self::Tokens(table),
            (Some("local"), _) => Self::Local,
            (Some(other), _) if !other.is_empty() => Self::Closed {
                reason: format!(
                    "SEMA_AUTH is {}; the only mode it names is \"local\"",
                    Quoted(other)
                ),
            },
            (_, Some(Err(e))) => Self::Closed { reason: e },
            (_, Some(Ok(_))) => Self::Closed {
                reason: "SEMA_TOKENS holds no tokens".into(),
            },
            (_, None) => Self::Closed {
                reason: "SEMA_TOKENS is not set".into(),
            },
        }
    }

    /// Resolves the caller from the request headers.
    pub fn resolve(
        &self,
        authorization: Option<&str>,
        principal_header: Option<&str>,
        role_header: Option<&str>,
    ) -> Result<Principal, ApiError> {
        match self {
            Self::Tokens(table) => table.resolve(authorization),
            Self::Closed { reason } => Err(not_configured(reason)),
            Self::Local => {
                let id = match principal_header {
                    None => None,
                    Some(p) if valid_principal(p) => Some(p.to_owned()),
                    Some(_) => {
                        return Err(ApiError::invalid_request(format!(
                            "X-Sema-Principal must be 1..{PRINCIPAL_MAX} printable ASCII characters"
                        )))
                    }
                };
                let role = match role_header {
                    None => Role::Client,
                    Some(r) => Role::parse(r).ok_or_else(|| {
                        ApiError::invalid_request("X-Sema-Role must be client, runner or operator")
                    })?,
                };
                Ok(Principal { id, role })
            }
        }
    }
}

fn valid_principal(p: &str) -> bool {
    !p.is_empty() && p.len() <= PRINCIPAL_MAX && p.bytes().all(|b| (0x21..0x7f).contains(&b))
}

// Between the Worker and its objects (`object_codec`): each field keeps its place, each
// variant its number.
crate::codec_enum!(Role {
    0 => Client,
    1 => Runner,
    2 => Operator,
});

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TokenTable {
        let h = crate::hex::sha256(b"s3cret");
        TokenTable::parse(Some(&format!(
            r#"{{"{h}":{{"principal":"alice","role":"operator"}}}}"#
        )))
        .unwrap()
    }

    fn tokens(table: TokenTable) -> Auth {
        Auth::Tokens(table)
    }

    #[test]
    fn in_local_mode_the_principal_header_is_trusted_and_absent_means_anonymous() {
        let t = Auth::configure(Some("local"), None);
        let p = t.resolve(None, Some("bob"), None).unwrap();
        assert_eq!(
            p,
            Principal {
                id: Some("bob".into()),
                role: Role::Client
            }
        );
        let anon = t.resolve(None, None, Some("runner")).unwrap();
        assert_eq!(
            anon,
            Principal {
                id: None,
                role: Role::Runner
            }
        );
    }

    #[test]
    fn in_local_mode_bad_headers_are_refused_with_400() {
        let t = Auth::Local;
        assert_eq!(
            t.resolve(None, Some("a b"), None).unwrap_err().status(),
            400
        );
        assert_eq!(
            t.resolve(None, Some("a"), Some("root"))
                .unwrap_err()
                .status(),
            400
        );
    }

    #[test]
    fn with_tokens_a_known_bearer_token_yields_its_principal_and_role() {
        let p = tokens(table())
            .resolve(Some("Bearer s3cret"), Some("mallory"), None)
            .unwrap();
        assert_eq!(
            p,
            Principal {
                id: Some("alice".into()),
                role: Role::Operator
            }
        );
    }

    #[test]
    fn with_tokens_missing_or_unknown_tokens_get_401() {
        let t = tokens(table());
        assert_eq!(
            t.resolve(None, Some("alice"), None).unwrap_err().status(),
            401
        );
        assert_eq!(
            t.resolve(Some("Bearer nope"), None, None)
                .unwrap_err()
                .status(),
            401
        );
        assert_eq!(
            t.resolve(Some("Basic s3cret"), None, None)
                .unwrap_err()
                .status(),
            401
        );
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        for h in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "  Bearer   s3cret ",
        ] {
            assert!(
                tokens(table()).resolve(Some(h), None, None).is_ok(),
                "{h:?}"
            );
        }
    }

    #[test]
    fn a_deployment_without_usable_credentials_is_closed_and_says_what_to_configure() {
        let h = crate::hex::sha256(b"s3cret");
        let good = format!(r#"{{"{h}":{{"principal":"alice","role":"client"}}}}"#);
        for (mode, raw) in [
            (None, None),
            (None, Some("")),
            (None, Some("   ")),
            (None, Some("{}")),
            (None, Some("not json")),
            (None, Some(r#"{"abc":{"principal":"a","role":"client"}}"#)),
            (Some(""), None),
            (Some("open"), None),
            (Some("Local"), None),
        ] {
            let auth = Auth::configure(mode, raw);
            assert!(
                matches!(auth, Auth::Closed { .. }),
                "{mode:?} {raw:?}: {auth:?}"
            );
            let e = auth
                .resolve(None, Some("alice"), Some("operator"))
                .unwrap_err();
            assert_eq!((e.status(), e.code()), (503, "auth.not_configured"));
            assert!(e.message.contains("SEMA_TOKENS") && e.message.contains("SEMA_AUTH"));
        }
        assert!(matches!(
            Auth::configure(None, Some(&good)),
            Auth::Tokens(_)
        ));
        assert!(matches!(Auth::configure(Some("local"), None), Auth::Local));
        // A usable table is never ignored in favour of trusting headers.
        assert!(matches!(
            Auth::configure(Some("local"), Some(&good)),
            Auth::Tokens(_)
        ));
    }

    #[test]
    fn a_token_entry_reads_as_serde_s_derived_reader_reads_it() {
        crate::json::assert_reads_as_serde::<TokenEntry>(
            crate::json!({"principal": "p", "role": "client"}),
        );
    }

    #[test]
    fn malformed_token_tables_are_rejected() {
        assert!(TokenTable::parse(Some("[]")).is_err());
        assert!(TokenTable::parse(Some(r#"{"abc":{"principal":"a","role":"client"}}"#)).is_err());
        let h = "0".repeat(64);
        assert!(TokenTable::parse(Some(&format!(
            r#"{{"{h}":{{"principal":"a","role":"god"}}}}"#
        )))
        .is_err());
        let g = "1".repeat(64);
        let twice = |table: String| TokenTable::parse(Some(&table)).unwrap_err();
        assert_eq!(
            twice(format!(
                r#"{{"{h}":{{"principal":"a","role":"client","principal":"b"}}}}"#
            )),
            "SEMA_TOKENS is not valid: `principal` is written twice in one object"
        );
        assert!(twice(format!(
            r#"{{"{h}":{{"principal":"a","role":"client"}}, "{g}":{{"principal":"c","role":"runner"}},
                "{h}":{{"principal":"b","role":"operator"}}}}"#
        ))
        .contains(&format!("`{h}` is written twice")));
        // Repeats in different objects, in arrays or inside strings are not repeats.
        let fine = format!(
            r#"{{"{h}":{{"principal":"a","role":"client"}},"{g}":{{"principal":"a,\"principal\":","role":"runner"}}}}"#
        );
        assert!(repeated_key(&fine).is_none());
        assert!(repeated_key(r#"[{"a":1},{"a":2}]"#).is_none());
        assert_eq!(
            repeated_key(r#"{"x":[{"a":1,"b":[1,{"a":2}],"a":3}]}"#).as_deref(),
            Some("a")
        );
        // A key spelt with an escape is the same key.
        assert_eq!(
            twice(format!(
                r#"{{"{h}":{{"principal":"a","role":"client","\u0070rincipal":"b"}}}}"#
            )),
            "SEMA_TOKENS is not valid: `principal` is written twice in one object"
        );
        assert_eq!(repeated_key(r#"{"a\"b":1,"a\"c":2}"#), None);
    }

    #[test]
    fn access_is_null_safe_owner_equality_or_operator() {
        let anon = Principal {
            id: None,
            role: Role::Client,
        };
        let bob = Principal {
            id: Some("bob".into()),
            role: Role::Client,
        };
        let op = Principal {
            id: Some("op".into()),
            role: Role::Operator,
        };
        assert!(anon.may_access(None) && !anon.may_access(Some("bob")));
        assert!(bob.may_access(Some("bob")) && !bob.may_access(None));
        assert!(op.may_access(Some("bob")) && op.may_access(None));
        assert!(!op.owns(Some("bob")) && op.owns(Some("op")));
    }
}
