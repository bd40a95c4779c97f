//! The scripted engine's language: one command per line of the objective.
//!
//! ```text
//! say <text>        stream <text> as text_delta events, one per word
//! sleep <ms>        wait (heartbeating, so cancel and steer are noticed)
//! fail <message>    finish the run as failed with <message>
//! ask <kind> <text> park the run on a human gate of <kind>, its card `{"text": <text>, "step": i}`
//!                   (i = the index of this step); the park ends the lease
//! ```
//! An objective with no command line is said back as a whole, so any objective runs.
//!
//! **Resuming.** A run leased again after a decision carries `resume {gate {kind, card}, decision,
//! reason? | feedback?}`: the script goes on after the step its card names, first saying the decision
//! back (`decision: <decision>`, plus ` (<reason or feedback>)` when there is one). A later `ask`
//! parks again.

use serde_json::{json, Value};

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Say(String),
    Sleep(u64),
    Fail(String),
    /// Park on a gate of `kind` with a card carrying `text`.
    Ask {
        kind: String,
        text: String,
    },
}

/// Parses an objective into steps. Blank lines are skipped; a line that is not a command is said.
pub fn parse(objective: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut any_command = false;
    for line in objective.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let step = match word {
            "say" => Some(Step::Say(rest.to_owned())),
            "sleep" => rest.parse().ok().map(Step::Sleep),
            "fail" => Some(Step::Fail(if rest.is_empty() {
                "failed".into()
            } else {
                rest.to_owned()
            })),
            "ask" => {
                let (kind, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                Some(Step::Ask {
                    kind: kind.to_owned(),
                    text: text.trim().to_owned(),
                })
            }
            _ => None,
        };
        match step {
            Some(s) => {
                any_command = true;
                steps.push(s);
            }
            None => steps.push(Step::Say(line.to_owned())),
        }
    }
    if !any_command {
        return vec![Step::Say(objective.trim().to_owned())];
    }
    steps
}

/// The text_delta pieces of a `say`: each word with the space that follows it.
pub fn deltas(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if i + 1 < words.len() {
                format!("{w} ")
            } else {
                (*w).to_owned()
            }
        })
        .collect()
}

/// The card of the `ask` at `step`: its text and where the script goes on from.
pub fn card(text: &str, step: usize) -> Value {
    json!({"text": text, "step": step})
}

/// Where a resumed run goes on, and what it says first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumption {
    /// The first step to execute (the one after the `ask` that parked).
    pub next: usize,
    /// The decision, said back before anything else.
    pub say: String,
}

/// Reads a lease's `resume` against the script: the card's `step` must name an `ask` of the resumed
/// gate's kind (the script is the objective, so it cannot have changed; anything else is a park this
/// runner did not make, and is refused rather than guessed at).
pub fn resumption(steps: &[Step], resume: &Value) -> Result<Resumption, String> {
    let kind = resume["gate"]["kind"].as_str().unwrap_or_default();
    let step = resume["gate"]["card"]["step"].as_u64();
    let at = step
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| matches!(steps.get(i), Some(Step::Ask { kind: k, .. }) if k == kind))
        .ok_or_else(|| {
            format!(
                "resume names step {} of a {kind:?} gate, which is not an ask of that kind in this script",
                step.map_or_else(|| "(none)".to_owned(), |i| i.to_string())
            )
        })?;
    let decision = resume["decision"].as_str().unwrap_or_default();
    let note = ["reason", "feedback"]
        .iter()
        .filter_map(|k| resume[k].as_str())
        .find(|n| !n.is_empty());
    Ok(Resumption {
        next: at + 1,
        say: decision_text(decision, note),
    })
}

/// `decision: <decision>`, plus ` (<note>)` when the decision came with a reason or feedback.
pub fn decision_text(decision: &str, note: Option<&str>) -> String {
    match note {
        Some(n) => format!("decision: {decision} ({n})"),
        None => format!("decision: {decision}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_line_by_line() {
        let s = parse("say hello world\nsleep 20\n\nfail boom now\nask tool_approval");
        assert_eq!(
            s,
            vec![
                Step::Say("hello world".into()),
                Step::Sleep(20),
                Step::Fail("boom now".into()),
                Step::Ask {
                    kind: "tool_approval".into(),
                    text: String::new()
                }
            ]
        );
    }

    #[test]
    fn an_ask_takes_its_kind_then_the_rest_of_the_line_as_the_card_text() {
        assert_eq!(
            parse("ask plan_review   please  check the plan "),
            vec![Step::Ask {
                kind: "plan_review".into(),
                text: "please  check the plan".into()
            }]
        );
    }

    #[test]
    fn the_card_names_the_text_and_the_index_of_its_step() {
        assert_eq!(
            card("please check", 3),
            json!({"text": "please check", "step": 3})
        );
    }

    fn resume(kind: &str, step: Value, decision: &str) -> Value {
        json!({"gate": {"kind": kind, "card": {"text": "t", "step": step}}, "decision": decision})
    }

    #[test]
    fn a_resumed_script_goes_on_after_the_ask_that_parked_and_says_the_decision_first() {
        let steps = parse("say one\nask human ok?\nsay two\nask human again?\nsay three");
        assert_eq!(
            resumption(&steps, &resume("human", json!(1), "approve")),
            Ok(Resumption {
                next: 2,
                say: "decision: approve".into()
            })
        );
        assert_eq!(
            resumption(&steps, &resume("human", json!(3), "approve"))
                .unwrap()
                .next,
            4
        );
    }

    #[test]
    fn an_ask_as_the_last_step_resumes_at_the_end_of_the_script() {
        let steps = parse("say one\nask resource_limit more?");
        assert_eq!(
            resumption(&steps, &resume("resource_limit", json!(1), "continue")),
            Ok(Resumption {
                next: 2,
                say: "decision: continue".into()
            })
        );
    }

    #[test]
    fn a_reason_or_feedback_is_said_back_in_parentheses() {
        let steps = parse("ask plan_review plan\nsay go");
        let mut r = resume("plan_review", json!(0), "revise");
        r["feedback"] = json!("more tests");
        assert_eq!(
            resumption(&steps, &r).unwrap().say,
            "decision: revise (more tests)"
        );
        let steps = parse("ask human ok?");
        let mut r = resume("human", json!(0), "approve");
        r["reason"] = json!("looks fine");
        assert_eq!(
            resumption(&steps, &r).unwrap().say,
            "decision: approve (looks fine)"
        );
        r["reason"] = json!("");
        assert_eq!(resumption(&steps, &r).unwrap().say, "decision: approve");
    }

    #[test]
    fn a_resume_that_names_no_ask_of_its_kind_in_the_script_is_refused() {
        let steps = parse("say one\nask human ok?");
        for bad in [
            resume("human", json!(0), "approve"),
            resume("human", json!(2), "approve"),
            resume("human", json!(-1), "approve"),
            resume("human", json!("1"), "approve"),
            resume("plan_review", json!(1), "approve"),
            json!({"gate": {"kind": "human", "card": {}}, "decision": "approve"}),
        ] {
            let e = resumption(&steps, &bad).unwrap_err();
            assert!(e.contains("not an ask"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_objective_without_commands_is_said_back_whole() {
        assert_eq!(
            parse("write a haiku\nabout rust"),
            vec![Step::Say("write a haiku\nabout rust".into())]
        );
    }

    #[test]
    fn deltas_keep_the_spaces_between_words() {
        assert_eq!(deltas("a  b c"), vec!["a ", "b ", "c"]);
        assert_eq!(deltas("a b c").concat(), "a b c");
        assert!(deltas("").is_empty());
    }
}
