//! Principals and roles.
//!
//! With tokens configured (`SEMA_TOKENS`: a JSON object mapping sha256-hex(token) to
//! `{"principal", "role"}`), every request must carry `Authorization: Bearer <token>`. With none
//! configured (the local default), the principal is self-declared in `X-Sema-Principal` (absent =
//! anonymous) and the role in `X-Sema-Role` (absent = `client`).

use crate::error::ApiError;
use serde::Deserialize;
use std::collections::HashMap;

/// Longest principal accepted (the width of the `owner` columns).
pub const PRINCIPAL_MAX: usize = 190;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Runner,
    Operator,
}

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
        self.role == Role::Operator || self.id.as_deref() == owner
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
    entries: HashMap<String, TokenEntry>,
}

impl TokenTable {
    /// Parses the `SEMA_TOKENS` JSON. An empty or absent value means "no tokens" (local mode).
    pub fn parse(json: Option<&str>) -> Result<Self, String> {
        let Some(text) = json.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Self::default());
        };
        let raw: HashMap<String, TokenEntry> =
            serde_json::from_str(text).map_err(|e| format!("SEMA_TOKENS is not valid: {e}"))?;
        let mut entries = HashMap::with_capacity(raw.len());
        for (hash, entry) in raw {
            let hash = hash.to_ascii_lowercase();
            if hash.len() != 64 || crate::hex::decode(&hash).is_none() {
                return Err("SEMA_TOKENS keys must be sha256 hex digests of the tokens".into());
            }
            if !valid_principal(&entry.principal) {
                return Err(format!(
                    "SEMA_TOKENS principal {:?} is not valid",
                    entry.principal
                ));
            }
            entries.insert(hash, entry);
        }
        Ok(Self { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Resolves the caller from the request headers.
    pub fn resolve(
        &self,
        authorization: Option<&str>,
        principal_header: Option<&str>,
        role_header: Option<&str>,
    ) -> Result<Principal, ApiError> {
        if self.is_empty() {
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
            return Ok(Principal { id, role });
        }
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
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

fn valid_principal(p: &str) -> bool {
    !p.is_empty() && p.len() <= PRINCIPAL_MAX && p.bytes().all(|b| (0x21..0x7f).contains(&b))
}

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

    #[test]
    fn without_tokens_the_principal_header_is_trusted_and_absent_means_anonymous() {
        let t = TokenTable::parse(None).unwrap();
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
    fn without_tokens_bad_headers_are_refused_with_400() {
        let t = TokenTable::default();
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
        let p = table()
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
        let t = table();
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
    fn malformed_token_tables_are_rejected() {
        assert!(TokenTable::parse(Some("[]")).is_err());
        assert!(TokenTable::parse(Some(r#"{"abc":{"principal":"a","role":"client"}}"#)).is_err());
        let h = "0".repeat(64);
        assert!(TokenTable::parse(Some(&format!(
            r#"{{"{h}":{{"principal":"a","role":"god"}}}}"#
        )))
        .is_err());
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
    }
}
