//! `svc encounter record`: asks for a structured use on stderr, reads the answers line by line
//! from stdin (a terminal or a pipe), and prints an encounter record that `svc publish
//! encounter` accepts. Nothing is published.

use super::{UsageError, print_json};
use crate::cli::EncounterArgs;
use serde_json::{Map, Value, json};
use std::io::{BufRead, Write};
use svc_lexicon::Lexicons;

struct Prompter<R: BufRead> {
    input: R,
}

impl<R: BufRead> Prompter<R> {
    /// Asks on stderr; the trimmed answer, `None` when blank or at the end of input.
    fn ask(&mut self, question: &str) -> anyhow::Result<Option<String>> {
        let mut stderr = std::io::stderr();
        write!(stderr, "{question}: ")?;
        stderr.flush()?;
        let mut line = String::new();
        self.input.read_line(&mut line)?;
        let answer = line.trim();
        Ok((!answer.is_empty()).then(|| answer.to_string()))
    }
}

fn check_uri(flag: &str, value: &str) -> Result<(), UsageError> {
    svc_syntax::check_at_uri(value)
        .map(|_| ())
        .map_err(|e| UsageError(format!("--{flag} {value}: {e}")))
}

/// Picks an action of a vocabulary by its number in the list or by its id.
fn choose_action(actions: &[(String, String)], answer: &str) -> Option<String> {
    if let Ok(n) = answer.parse::<usize>() {
        return actions.get(n.checked_sub(1)?).map(|(id, _)| id.clone());
    }
    actions
        .iter()
        .find(|(id, _)| id == answer)
        .map(|(id, _)| id.clone())
}

pub async fn record(args: &EncounterArgs) -> anyhow::Result<()> {
    check_uri("lens", &args.lens)?;
    check_uri("source-schema", &args.source_schema)?;
    if let Some(target) = &args.target_schema {
        check_uri("target-schema", target)?;
    }
    let stdin = std::io::stdin();
    let mut prompter = Prompter {
        input: stdin.lock(),
    };
    let usage = if args.text_only {
        text_use(&mut prompter)?
    } else {
        structured_use(args, &mut prompter).await?
    };
    let now = svc_syntax::now_unix_micros();
    let mut encounter = json!({
        "$type": "dev.svc.encounter",
        "lens": {"uri": args.lens},
        "sourceSchema": {"uri": args.source_schema},
        "use": usage,
        "kind": args.kind,
        "visibility": args.visibility,
        "occurredAt": svc_syntax::format_unix_micros(now),
    });
    if let Some(target) = &args.target_schema {
        encounter["targetSchema"] = json!({"uri": target});
    }
    let encounter = super::record::prepare(Lexicons::embedded(), "dev.svc.encounter", encounter)?;
    print_json(&encounter)
}

/// A use told in one line of free text, kept as its action.
fn text_use<R: BufRead>(prompter: &mut Prompter<R>) -> anyhow::Result<Map<String, Value>> {
    let text = prompter
        .ask("describe the use in one line")?
        .ok_or_else(|| UsageError("a description of the use is required".into()))?;
    let mut usage = Map::new();
    usage.insert("action".into(), Value::String(text));
    Ok(usage)
}

/// A use asked field by field; the optional fields are left out when answered blank.
async fn structured_use<R: BufRead>(
    args: &EncounterArgs,
    prompter: &mut Prompter<R>,
) -> anyhow::Result<Map<String, Value>> {
    let mut usage = Map::new();
    let action = match &args.action_vocab {
        Some(vocab) => {
            let id = action_from_vocabulary(vocab, prompter).await?;
            usage.insert("actionVocabulary".into(), json!({"uri": vocab}));
            id
        }
        None => prompter
            .ask("action")?
            .ok_or_else(|| UsageError("an action is required".into()))?,
    };
    usage.insert("action".into(), Value::String(action));
    if let Some(scope) = prompter.ask("material scope (blank to skip)")? {
        usage.insert("material".into(), json!({"scope": scope}));
    }
    if let Some(purpose) = prompter.ask("purpose (blank to skip)")? {
        usage.insert("purpose".into(), Value::String(purpose));
    }
    if let Some(actor) = prompter.ask("actor (blank to skip)")? {
        usage.insert("actor".into(), Value::String(actor));
    }
    Ok(usage)
}

/// Fetches the vocabulary, lists its actions and asks for one of them.
async fn action_from_vocabulary<R: BufRead>(
    vocab: &str,
    prompter: &mut Prompter<R>,
) -> anyhow::Result<String> {
    check_uri("action-vocab", vocab)?;
    let record = super::identity::RecordFetcher::new(None)?
        .fetch(vocab)
        .await?
        .value;
    let actions = vocabulary_actions(&record);
    if actions.is_empty() {
        anyhow::bail!("{vocab} offers no actions");
    }
    for (i, (id, about)) in actions.iter().enumerate() {
        eprintln!(
            "  {}) {id}{}",
            i + 1,
            if about.is_empty() {
                String::new()
            } else {
                format!(": {about}")
            }
        );
    }
    let answer = prompter
        .ask("action (number or id)")?
        .ok_or_else(|| UsageError("an action is required".into()))?;
    let id = choose_action(&actions, &answer).ok_or_else(|| {
        UsageError(format!(
            "{answer:?} is neither a number from the list nor an action id"
        ))
    })?;
    Ok(id)
}

/// The (id, description) pairs of a vocabulary record; entries without an id are skipped.
fn vocabulary_actions(record: &Value) -> Vec<(String, String)> {
    record
        .get("actions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|entry| {
                    let id = entry.get("id")?.as_str()?.to_string();
                    let about = entry
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    Some((id, about))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn actions_by_number_or_id() {
        let actions = vec![
            ("read".to_string(), String::new()),
            ("write".to_string(), String::new()),
        ];
        assert_eq!(
            super::choose_action(&actions, "2").as_deref(),
            Some("write")
        );
        assert_eq!(
            super::choose_action(&actions, "read").as_deref(),
            Some("read")
        );
        assert_eq!(super::choose_action(&actions, "0"), None);
        assert_eq!(super::choose_action(&actions, "3"), None);
        assert_eq!(super::choose_action(&actions, "delete"), None);
    }
}
