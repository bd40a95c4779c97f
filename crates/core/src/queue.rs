//! Named task queues: every run belongs to one queue (`task_run.queue`), and a runner's lease request
//! takes runs of one queue only. A queue name is a safe id ([`crate::ids::is_safe_id`]): the same rule
//! as session and task ids, so it can name a Durable Object (the queue's dispatcher) and a SQL key
//! without escaping. A submit that names no queue lands in [`DEFAULT_QUEUE`].

use crate::{
    error::ApiError,
    ids::{is_safe_id, SAFE_ID_RULE},
};

/// The queue of a run whose submit named none, and of a lease request that names none.
pub const DEFAULT_QUEUE: &str = "default";

/// [`DEFAULT_QUEUE`] as an owned string (a serde default for stored shapes that predate queues).
pub fn default_queue() -> String {
    DEFAULT_QUEUE.to_owned()
}

/// A request's `queue` field: absent (or JSON `null`) is [`DEFAULT_QUEUE`]; anything else must be a
/// safe id, else 400 `invalid_request` naming the field `queue`.
pub fn parse_queue(queue: Option<&str>) -> Result<String, ApiError> {
    match queue {
        None => Ok(default_queue()),
        Some(q) if is_safe_id(q) => Ok(q.to_owned()),
        Some(_) => Err(ApiError::invalid_field("queue", SAFE_ID_RULE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_queue_is_the_default_queue() {
        assert_eq!(parse_queue(None).unwrap(), "default");
        assert_eq!(default_queue(), DEFAULT_QUEUE);
    }

    #[test]
    fn a_named_queue_is_kept_as_given_case_included() {
        assert_eq!(parse_queue(Some("gpu-A.1_x")).unwrap(), "gpu-A.1_x");
        assert_eq!(parse_queue(Some(&"q".repeat(64))).unwrap(), "q".repeat(64));
    }

    #[test]
    fn an_unsafe_queue_name_is_400_naming_the_queue_field() {
        for bad in ["", ".", "..", "a/b", "a b", "é", &"q".repeat(65)] {
            let e = parse_queue(Some(bad)).unwrap_err();
            assert_eq!((e.status(), e.code()), (400, "invalid_request"), "{bad:?}");
            assert_eq!(e.detail("field"), Some("\"queue\""), "{bad:?}");
        }
    }
}
