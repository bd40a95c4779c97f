//! The framing of an object's RPC answer (`SessionDo::session_call`, `DispatchDo::dispatch_call`):
//! one string, so the answer crosses the runtime's RPC and the wasm boundary once.
//!
//! An answer is the object's D1 meter line (what its share of the call cost, which the Worker adds
//! to the calling request's), a newline, then the reply's text (`object_codec`). The meter line
//! never holds a newline: it is the Worker's own `round-trips=N; statements=N`.

/// The answer text of a reply whose text is `reply`, the object's meter line `meter`.
pub fn answer(meter: &str, reply: &str) -> String {
    let mut text = String::with_capacity(meter.len() + 1 + reply.len());
    text.push_str(meter);
    text.push('\n');
    text.push_str(reply);
    text
}

/// An answer split into its meter line and its reply's text (`None`: not such an answer).
pub fn split(text: &str) -> Option<(&str, &str)> {
    text.split_once('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_splits_back_into_its_meter_line_and_its_reply() {
        let reply = r#"{"noted":{"claim_released":true}}"#;
        let text = answer("round-trips=2; statements=5", reply);
        assert_eq!(split(&text), Some(("round-trips=2; statements=5", reply)));
    }

    #[test]
    fn only_the_first_newline_splits_an_answer() {
        // A reply's strings are written as they are, newlines included: only the first splits.
        let text = answer("round-trips=0; statements=0", "{\"a\":\"x\\ny\"}\n");
        assert_eq!(split(&text).unwrap().1, "{\"a\":\"x\\ny\"}\n");
        assert_eq!(split("no newline"), None);
    }
}
