//! Corpus files: a JSON array, or JSON Lines (one record per non-blank line), told apart by
//! their first non-blank character.

use crate::{CorpusPlace, VerifyError};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct CorpusRecord {
    pub place: CorpusPlace,
    pub value: Value,
}

/// Reads a corpus; errors name the line. An empty corpus is returned as such: whether that is
/// acceptable is the caller's rule.
pub fn parse_corpus(text: &str) -> Result<Vec<CorpusRecord>, VerifyError> {
    if text.trim_start().starts_with('[') {
        let values: Vec<Value> =
            serde_json::from_str(text).map_err(|e| VerifyError::CorpusLine {
                line: e.line(),
                message: format!("not a JSON array of records: {e}"),
            })?;
        return Ok(values
            .into_iter()
            .enumerate()
            .map(|(index, value)| CorpusRecord {
                place: CorpusPlace { index, line: None },
                value,
            })
            .collect());
    }
    let mut records = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| VerifyError::CorpusLine {
            line: number + 1,
            message: format!("not a JSON value: {e}"),
        })?;
        records.push(CorpusRecord {
            place: CorpusPlace {
                index: records.len(),
                line: Some(number + 1),
            },
            value,
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_array_has_no_lines() {
        let corpus = parse_corpus(" [{\"text\":\"a\"}, {\"text\":\"b\"}]").unwrap();
        assert_eq!(corpus.len(), 2);
        assert_eq!(
            corpus[1].place,
            CorpusPlace {
                index: 1,
                line: None
            }
        );
        assert_eq!(corpus[1].value["text"], "b");
    }

    #[test]
    fn json_lines_skip_blank_lines_and_keep_line_numbers() {
        let corpus = parse_corpus("{\"text\":\"a\"}\n\n  \n{\"text\":\"b\"}\n").unwrap();
        assert_eq!(corpus.len(), 2);
        assert_eq!(
            corpus[1].place,
            CorpusPlace {
                index: 1,
                line: Some(4)
            }
        );
    }

    #[test]
    fn errors_name_the_line() {
        let error = parse_corpus("{\"text\":\"a\"}\n{\"text\":\n").unwrap_err();
        assert!(error.to_string().starts_with("corpus line 2: "), "{error}");
        let error = parse_corpus("[\n{\"text\":\"a\"},\n{oops}\n]").unwrap_err();
        assert!(error.to_string().starts_with("corpus line 3: "), "{error}");
    }

    #[test]
    fn empty_files_are_empty_corpora() {
        assert!(parse_corpus("").unwrap().is_empty());
        assert!(parse_corpus("[]").unwrap().is_empty());
        assert!(parse_corpus("\n\n").unwrap().is_empty());
    }
}
