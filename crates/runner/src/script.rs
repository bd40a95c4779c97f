//! The scripted engine's language: one command per line of the objective.
//!
//! ```text
//! say <text>        stream <text> as text_delta events, one per word
//! sleep <ms>        wait (heartbeating, so cancel and steer are noticed)
//! fail <message>    finish the run as failed with <message>
//! ask <gate-kind>   park on a human gate (not supported by this runner yet: the run fails, saying so)
//! ```
//! An objective with no command line is said back as a whole, so any objective runs.

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Say(String),
    Sleep(u64),
    Fail(String),
    Ask(String),
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
            "ask" => Some(Step::Ask(rest.to_owned())),
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
                Step::Ask("tool_approval".into())
            ]
        );
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
