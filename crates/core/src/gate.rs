//! Gate kinds and the endpoint that resolves each: the single source of truth for `decidePath`.

/// The path that resolves a pending gate of `kind`, with ids inserted raw; `None` for a kind this
/// build does not know (a gate is never invented).
pub fn decide_path(kind: &str, session_id: &str, task_id: &str) -> Option<String> {
    match kind {
        "tool_approval" | "human" | "irreversible_ask" | "policy_ask" => {
            Some(format!("/v1/approvals/{session_id}/decide"))
        }
        "plan_review" => Some(format!("/v1/assistant/tasks/{task_id}/plan_review")),
        "resource_limit" => Some(format!("/v1/assistant/tasks/{task_id}/resume")),
        "task_done" => Some(format!("/v1/sessions/{session_id}/wake")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_gate_kind_maps_to_its_endpoint() {
        for k in ["tool_approval", "human", "irreversible_ask", "policy_ask"] {
            assert_eq!(decide_path(k, "S", "T").unwrap(), "/v1/approvals/S/decide");
        }
        assert_eq!(
            decide_path("plan_review", "S", "T").unwrap(),
            "/v1/assistant/tasks/T/plan_review"
        );
        assert_eq!(
            decide_path("resource_limit", "S", "T").unwrap(),
            "/v1/assistant/tasks/T/resume"
        );
        assert_eq!(
            decide_path("task_done", "S", "T").unwrap(),
            "/v1/sessions/S/wake"
        );
    }

    #[test]
    fn unknown_kinds_have_no_path() {
        assert_eq!(decide_path("verifier_pause", "S", "T"), None);
        assert_eq!(decide_path("", "S", "T"), None);
    }
}
