"""Schemathesis hooks for the OpenAPI fuzz (scripts/fuzz-openapi), loaded through SCHEMATHESIS_HOOKS.

The Worker under fuzz runs in local mode (SEMA_AUTH=local): a caller declares its principal in
X-Sema-Principal and its role in X-Sema-Role (the document's `localPrincipal` / `localRole` security
schemes). Each request gets the role its operation's `security` admits (client where clients may
call, else runner, else operator), so every operation is exercised past its role check; public
operations get no identity at all.

One bound on generated data, so that a run stays within its time budget: a runner's lease long-poll
(`waitMs`, which the Worker caps at 25 s) is cut to 1 s. Nothing else is altered.
"""

import schemathesis

PRINCIPAL = "fuzz-principal"
LEASE_WAIT_MAX_MS = 1000


def role_for(operation):
    security = operation.definition.raw.get("security")
    if security == []:
        return None
    roles = set()
    for requirement in security or []:
        roles.update(requirement.get("localRole", []))
    for role in ("client", "runner", "operator"):
        if role in roles:
            return role
    raise AssertionError(f"{operation.label}: no role in its security")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    role = role_for(case.operation)
    if role is not None:
        if case.headers is None:
            case.headers = {}
        case.headers["X-Sema-Principal"] = PRINCIPAL
        case.headers["X-Sema-Role"] = role
    if case.operation.path == "/v1/runner/lease" and isinstance(case.body, dict):
        wait = case.body.get("waitMs")
        if isinstance(wait, int) and not isinstance(wait, bool) and wait > LEASE_WAIT_MAX_MS:
            case.body["waitMs"] = LEASE_WAIT_MAX_MS
